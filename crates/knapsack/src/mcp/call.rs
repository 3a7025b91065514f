//! Calling one MCP tool: forward the decoded input, shape the result.

use std::sync::Arc;

use async_trait::async_trait;
use rmcp::model::{CallToolRequestParams, CallToolResult, ContentBlock};
use rmcp::service::{Peer, RoleClient, ServiceError};
use serde_json::{Value, json};
use shiitake_capabilities::{
    ForModelError, ForModelKind, InvocationContext, OperationHandler, ToolError,
};

use super::error::classify_service;
use super::server::SecretHeaders;

/// Calls one advertised tool on its server's live connection.
pub(crate) struct McpTool {
    pub(crate) server: String,
    pub(crate) tool: String,
    pub(crate) peer: Peer<RoleClient>,
    pub(crate) headers: Arc<SecretHeaders>,
}

#[async_trait]
impl OperationHandler for McpTool {
    async fn call(&self, input: Value, ctx: &InvocationContext) -> Result<Value, ToolError> {
        let Value::Object(arguments) = input else {
            return Err(ToolError::ForModel(ForModelError::new(
                ForModelKind::InvalidInput,
                "MCP tool arguments must be a JSON object",
            )));
        };
        let params = CallToolRequestParams::new(self.tool.clone()).with_arguments(arguments);
        // Dropping rmcp's request future sends `notifications/cancelled` to the server,
        // so a cancelled run or a passed deadline reaches the tool too.
        let result = tokio::select! {
            biased;
            () = ctx.cancellation().cancelled() => return Err(ToolError::Cancelled),
            result = self.peer.call_tool(params) => result,
        };
        match result {
            Ok(result) if result.is_error == Some(true) => Err(self.tool_failed(result)),
            Ok(result) => Ok(tool_output(result)),
            Err(error) => Err(self.call_error(&error, ctx)),
        }
    }
}

impl McpTool {
    /// A tool that ran and reported failure (`isError: true`) is a `failed` tool error,
    /// so the result message says so; `details` holds `{ isError, content }`.
    fn tool_failed(&self, result: CallToolResult) -> ToolError {
        let text = self.headers.scrub(&failure_text(&result.content));
        let output = tool_output(result);
        ToolError::ForModel(
            ForModelError::new(
                ForModelKind::Failed,
                format!(
                    "MCP tool `{}` of server `{}` failed: {text}",
                    self.tool, self.server
                ),
            )
            .with_details(output),
        )
    }

    fn call_error(&self, error: &ServiceError, ctx: &InvocationContext) -> ToolError {
        let server = &self.server;
        let tool = &self.tool;
        match error {
            ServiceError::McpError(data) => {
                let message = self.headers.scrub(&data.message);
                let mut details = json!({ "code": data.code.0 });
                if let (Some(extra), Some(map)) = (&data.data, details.as_object_mut()) {
                    map.insert("data".to_owned(), extra.clone());
                }
                ToolError::ForModel(
                    ForModelError::new(
                        ForModelKind::Failed,
                        format!("MCP server `{server}` refused `{tool}`: {message}"),
                    )
                    .with_details(details),
                )
            }
            ServiceError::Cancelled { .. } if ctx.is_cancelled() => ToolError::Cancelled,
            ServiceError::Timeout { .. } => ToolError::ForModel(ForModelError::new(
                ForModelKind::DeadlineExceeded,
                format!("MCP server `{server}` did not answer `{tool}` in time"),
            )),
            other => {
                let failure = classify_service(other, &self.headers);
                ToolError::ForModel(ForModelError::new(
                    ForModelKind::Unavailable,
                    format!(
                        "MCP server `{server}` could not run `{tool}`: {}",
                        failure.describe()
                    ),
                ))
            }
        }
    }
}

/// The text blocks of a failed tool's content, one per line; other blocks are named
/// by their type.
fn failure_text(content: &[ContentBlock]) -> String {
    let lines: Vec<String> = content
        .iter()
        .map(|block| match block.as_text() {
            Some(text) => text.text.clone(),
            None => format!(
                "[{} content]",
                serde_json::to_value(block)
                    .ok()
                    .and_then(|value| value["type"].as_str().map(str::to_owned))
                    .unwrap_or_else(|| "other".to_owned())
            ),
        })
        .collect();
    if lines.is_empty() {
        "(no content)".to_owned()
    } else {
        lines.join("\n")
    }
}

/// A result is the tool's `structuredContent`; when there is none, or the tool
/// failed, it is `{ isError, content }`.
pub(crate) fn tool_output(result: CallToolResult) -> Value {
    let is_error = result.is_error.unwrap_or(false);
    match result.structured_content {
        Some(structured) if !is_error => structured,
        _ => json!({
            "isError": is_error,
            "content": serde_json::to_value(&result.content).unwrap_or(Value::Array(Vec::new())),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn structured_content_is_the_result() {
        let result = CallToolResult::structured(json!({ "id": 7 }));
        assert_eq!(tool_output(result), json!({ "id": 7 }));
    }

    #[test]
    fn without_structured_content_the_result_is_is_error_and_content() {
        let result = CallToolResult::success(vec![ContentBlock::text("done")]);
        assert_eq!(
            tool_output(result),
            json!({ "isError": false, "content": [ { "type": "text", "text": "done" } ] })
        );
    }

    #[test]
    fn a_failure_reads_as_its_text_blocks_and_names_the_others() {
        let image = ContentBlock::image("aGk=", "image/png");
        let content = vec![
            ContentBlock::text("disk full"),
            image,
            ContentBlock::text("retry"),
        ];
        assert_eq!(failure_text(&content), "disk full\n[image content]\nretry");
        assert_eq!(failure_text(&[]), "(no content)");
    }

    #[test]
    fn a_failed_tool_reports_is_error_even_with_structured_content() {
        let mut result = CallToolResult::structured_error(json!({ "reason": "full" }));
        result.content = vec![ContentBlock::text("disk full")];
        assert_eq!(
            tool_output(result),
            json!({ "isError": true, "content": [ { "type": "text", "text": "disk full" } ] })
        );
    }
}
