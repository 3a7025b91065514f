//! The JSON-RPC 2.0 envelope: one request in (no batches), one response or one stream
//! event out. Each SSE event of a stream is a whole response with the request's id.

use serde_json::{Value, json};

use super::error::A2aError;

/// The methods of A2A v1.0's JSON-RPC binding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// Sends a message; answers with the task once it ends or waits for input.
    SendMessage,
    /// Sends a message; streams the task's events until it ends or waits for input.
    SendStreamingMessage,
    /// A task as it is now.
    GetTask,
    /// Stops a task.
    CancelTask,
    /// Streams a task's events from now on.
    SubscribeToTask,
    /// Lists tasks (not offered).
    ListTasks,
    /// The extended card (none here).
    GetExtendedAgentCard,
    /// Push notification configurations (not offered).
    PushConfig,
}

impl Method {
    /// The method `name` names, if A2A has it.
    pub fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "SendMessage" => Self::SendMessage,
            "SendStreamingMessage" => Self::SendStreamingMessage,
            "GetTask" => Self::GetTask,
            "CancelTask" => Self::CancelTask,
            "SubscribeToTask" => Self::SubscribeToTask,
            "ListTasks" => Self::ListTasks,
            "GetExtendedAgentCard" => Self::GetExtendedAgentCard,
            "CreateTaskPushNotificationConfig"
            | "GetTaskPushNotificationConfig"
            | "ListTaskPushNotificationConfigs"
            | "DeleteTaskPushNotificationConfig" => Self::PushConfig,
            _ => return None,
        })
    }
}

/// One JSON-RPC request.
#[derive(Clone, Debug, PartialEq)]
pub struct Call {
    /// Its id, echoed in the answer (`null` when it had none).
    pub id: Value,
    /// What it asks.
    pub method: Method,
    /// Its params (`{}` when it had none).
    pub params: Value,
}

/// A request that could not be read, with the id to answer it under.
#[derive(Clone, Debug, PartialEq)]
pub struct Refused {
    /// The request's id, when it could be read.
    pub id: Value,
    /// Why.
    pub error: A2aError,
}

fn refused(id: Value, error: A2aError) -> Refused {
    Refused { id, error }
}

/// Reads one request from a body.
pub fn parse(body: &[u8]) -> Result<Call, Refused> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|error| refused(Value::Null, A2aError::Parse(error.to_string())))?;
    let Value::Object(mut request) = value else {
        let what = if value.is_array() {
            "batches are not supported: send one request"
        } else {
            "a request is a JSON object"
        };
        return Err(refused(
            Value::Null,
            A2aError::InvalidRequest(what.to_owned()),
        ));
    };
    let id = match request.remove("id") {
        None => Value::Null,
        Some(id @ (Value::String(_) | Value::Number(_) | Value::Null)) => id,
        Some(_) => {
            return Err(refused(
                Value::Null,
                A2aError::InvalidRequest("`id` is a string, a number or null".to_owned()),
            ));
        }
    };
    if request.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err(refused(
            id,
            A2aError::InvalidRequest("`jsonrpc` must be \"2.0\"".to_owned()),
        ));
    }
    let Some(Value::String(name)) = request.remove("method") else {
        return Err(refused(
            id,
            A2aError::InvalidRequest("`method` must be a string".to_owned()),
        ));
    };
    let Some(method) = Method::parse(&name) else {
        let shown: String = name.chars().take(100).collect();
        return Err(refused(id, A2aError::MethodNotFound(shown)));
    };
    let params = match request.remove("params") {
        None | Some(Value::Null) => json!({}),
        Some(params @ Value::Object(_)) => params,
        Some(_) => {
            return Err(refused(
                id,
                A2aError::InvalidParams("`params` must be an object".to_owned()),
            ));
        }
    };
    Ok(Call { id, method, params })
}

/// A response carrying `result`.
pub fn result(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

/// A response carrying `error`.
pub fn error(id: &Value, error: &A2aError) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": error.to_json()})
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn code(body: &str) -> (Value, i32) {
        let refused = parse(body.as_bytes()).unwrap_err();
        (refused.id, refused.error.code())
    }

    #[test]
    fn a_request_reads_with_its_id_method_and_params() {
        let call = parse(br#"{"method":"GetTask","params":{"id":"t"},"id":"r1","jsonrpc":"2.0"}"#)
            .unwrap();
        assert_eq!(
            call,
            Call {
                id: json!("r1"),
                method: Method::GetTask,
                params: json!({"id": "t"})
            }
        );
        let bare = parse(br#"{"jsonrpc":"2.0","id":7,"method":"GetExtendedAgentCard"}"#).unwrap();
        assert_eq!(bare.params, json!({}));
    }

    #[test]
    fn mistakes_get_json_rpc_codes() {
        assert_eq!(code("not json"), (Value::Null, -32700));
        assert_eq!(code("[1]"), (Value::Null, -32600));
        assert_eq!(code("3"), (Value::Null, -32600));
        assert_eq!(
            code(r#"{"jsonrpc":"1.0","id":1,"method":"GetTask"}"#),
            (json!(1), -32600)
        );
        assert_eq!(
            code(r#"{"jsonrpc":"2.0","id":{},"method":"GetTask"}"#),
            (Value::Null, -32600)
        );
        assert_eq!(
            code(r#"{"jsonrpc":"2.0","id":1,"method":5}"#),
            (json!(1), -32600)
        );
        assert_eq!(
            code(r#"{"jsonrpc":"2.0","id":2,"method":"message/send"}"#),
            (json!(2), -32601)
        );
        assert_eq!(
            code(r#"{"jsonrpc":"2.0","id":3,"method":"GetTask","params":[1]}"#),
            (json!(3), -32602)
        );
    }
}
