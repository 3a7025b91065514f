//! Contract binding: views decode slots, calls encode inputs and decode outputs.

#![allow(clippy::unwrap_used)] // test support code outside #[test] functions

use std::collections::BTreeMap;
use std::sync::Mutex;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use shiitake_protocol::extension::{SessionScope, view};
use shiitake_protocol::*;

struct Counter;
impl ExtensionContract for Counter {
    const EXTENSION_ID: &'static str = "example-counter";
    type Projection = CounterView;
}

#[derive(Debug, PartialEq, Deserialize)]
struct CounterView {
    count: u32,
}

#[derive(Serialize)]
struct Increment {
    by: u32,
}
impl ContractCommand for Increment {
    type Contract = Counter;
    type Scope = SessionScope;
    type Output = u32;
    const NAME: &'static str = "increment";
}

/// Answers every extension call with a fixed value and records what it was asked.
struct Recorder {
    answer: Value,
    calls: Mutex<Vec<(String, String, Value)>>,
    id: SessionId,
}

impl Recorder {
    fn new(answer: Value) -> Self {
        Self {
            answer,
            calls: Mutex::new(Vec::new()),
            id: SessionId::new("s-1").unwrap(),
        }
    }

    fn record(&self, extension_id: &ExtensionId, command: &str, input: Value) -> Value {
        self.calls
            .lock()
            .unwrap()
            .push((extension_id.to_string(), command.to_owned(), input));
        self.answer.clone()
    }
}

fn unsupported() -> ShiitakeError {
    ShiitakeError::internal("not part of this test")
}

#[async_trait]
impl SessionApi for Recorder {
    fn session_id(&self) -> &SessionId {
        &self.id
    }
    fn address(&self) -> SessionAddress {
        SessionAddress::new(AddressOrigin::Local, None, self.id.clone())
    }
    fn new_request_id(&self) -> RequestId {
        RequestId::new("minted").unwrap()
    }
    async fn command(&self, command: SessionCommand) -> Result<CommandOutcome, ShiitakeError> {
        let value = serde_json::to_value(&command).unwrap();
        self.calls
            .lock()
            .unwrap()
            .push(("".into(), "command".into(), value));
        match command {
            SessionCommand::Prompt { .. } => Ok(CommandOutcome::Accepted(Accepted {
                command_id: CommandId::new("c-1").unwrap(),
            })),
            SessionCommand::Cancel { command_id, .. } => {
                Ok(CommandOutcome::Cancel(CancelResult::TooLate(TooLate {
                    command_id,
                })))
            }
            _ => Ok(CommandOutcome::Done),
        }
    }
    async fn read(&self, _: ReadOptions) -> Result<SessionSnapshot, ShiitakeError> {
        Err(unsupported())
    }
    async fn subscribe(&self, _: SubscribeOptions) -> Result<FrameStream, ShiitakeError> {
        Err(unsupported())
    }
    async fn watch(&self, _: WatchOptions) -> Result<SessionWatch, ShiitakeError> {
        Err(unsupported())
    }
    async fn model_preference(&self) -> Result<Option<ModelPreference>, ShiitakeError> {
        Err(unsupported())
    }
    async fn set_model_preference(&self, _: ModelPreference) -> Result<(), ShiitakeError> {
        Err(unsupported())
    }
    async fn call_extension(
        &self,
        extension_id: &ExtensionId,
        command: &str,
        input: Value,
    ) -> Result<Value, ShiitakeError> {
        Ok(self.record(extension_id, command, input))
    }
}

/// A minimal executor: these futures never wait on I/O.
fn block_on<F: std::future::Future>(future: F) -> F::Output {
    use std::pin::pin;
    use std::task::{Context, Poll, Waker};
    let mut future = pin!(future);
    let mut context = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut context) {
            return output;
        }
    }
}

#[test]
fn a_bound_session_call_encodes_input_and_decodes_output() {
    let session = Recorder::new(json!(4));
    let bound = bind_session_extension::<_, Counter>(&session);
    assert_eq!(block_on(bound.call(&Increment { by: 3 })).unwrap(), 4);
    let calls = session.calls.lock().unwrap().clone();
    assert_eq!(
        calls,
        vec![(
            "example-counter".into(),
            "increment".into(),
            json!({"by": 3})
        )]
    );
}

#[test]
fn an_output_that_breaks_the_contract_is_an_error() {
    let session = Recorder::new(json!("four"));
    let bound = bind_session_extension::<_, Counter>(&session);
    let error = block_on(bound.call(&Increment { by: 1 })).unwrap_err();
    assert_eq!(error.code, ErrorCode::Internal);
    assert!(error.message.contains("command output"), "{error}");
}

#[test]
fn views_decode_every_slot_state() {
    let id = ExtensionId::new(Counter::EXTENSION_ID).unwrap();
    let mut slots = BTreeMap::new();
    assert_eq!(
        view::<Counter>(&slots).unwrap(),
        ExtensionViewV0::Unavailable
    );

    slots.insert(
        id.clone(),
        ExtensionSlotV0::Stopped {
            reason: "boom".into(),
        },
    );
    assert_eq!(
        view::<Counter>(&slots).unwrap(),
        ExtensionViewV0::Stopped {
            reason: "boom".into()
        }
    );

    slots.insert(id.clone(), ExtensionSlotV0::Running { value: Value::Null });
    assert_eq!(
        view::<Counter>(&slots).unwrap(),
        ExtensionViewV0::Running { value: None }
    );

    slots.insert(
        id.clone(),
        ExtensionSlotV0::Running {
            value: json!({"count": 2}),
        },
    );
    assert_eq!(
        view::<Counter>(&slots).unwrap(),
        ExtensionViewV0::Running {
            value: Some(CounterView { count: 2 })
        }
    );

    slots.insert(
        id,
        ExtensionSlotV0::Running {
            value: json!({"count": "two"}),
        },
    );
    assert!(view::<Counter>(&slots).is_err());
}

#[test]
fn send_mints_a_request_id_and_defaults_to_follow_up() {
    let session = Recorder::new(Value::Null);
    let accepted =
        block_on(session.send(PromptText::new("hi").unwrap(), SendOptions::default())).unwrap();
    assert_eq!(accepted.command_id.as_str(), "c-1");
    let calls = session.calls.lock().unwrap().clone();
    assert_eq!(
        calls[0].2,
        json!({"type": "prompt", "requestId": "minted", "text": "hi", "delivery": "followUp"})
    );
}

#[test]
fn cancel_passes_only_if_pending_through() {
    let session = Recorder::new(Value::Null);
    let input = CancelInput {
        command_id: CommandId::new("c-9").unwrap(),
        only_if_pending: Some(true),
    };
    let result = block_on(session.cancel(input)).unwrap();
    assert!(
        matches!(result, CancelResult::TooLate(TooLate { ref command_id }) if command_id.as_str() == "c-9")
    );
    let calls = session.calls.lock().unwrap().clone();
    assert_eq!(
        calls[0].2,
        json!({"type": "cancel", "commandId": "c-9", "onlyIfPending": true})
    );
}
