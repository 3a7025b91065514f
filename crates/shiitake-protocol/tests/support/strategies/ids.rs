//! Ids, bounded text and the JSON values the other strategies build on.

use proptest::collection::{btree_map, vec};
use proptest::prelude::*;
use serde_json::{Map, Value};
use shiitake_protocol::message::Extra;
use shiitake_protocol::number::JsNumber;
use shiitake_protocol::*;

pub fn bounded_id() -> impl Strategy<Value = String> {
    "[!-~]{1,128}"
}

pub fn session_id() -> impl Strategy<Value = SessionId> {
    bounded_id().prop_map(|s| SessionId::new(s).unwrap())
}
pub fn command_id() -> impl Strategy<Value = CommandId> {
    bounded_id().prop_map(|s| CommandId::new(s).unwrap())
}
pub fn request_id() -> impl Strategy<Value = RequestId> {
    bounded_id().prop_map(|s| RequestId::new(s).unwrap())
}
pub fn entry_id() -> impl Strategy<Value = EntryId> {
    bounded_id().prop_map(|s| EntryId::new(s).unwrap())
}
pub fn event_id() -> impl Strategy<Value = EventId> {
    bounded_id().prop_map(|s| EventId::new(s).unwrap())
}
pub fn extension_id() -> impl Strategy<Value = ExtensionId> {
    "[a-z][a-z-]{0,40}".prop_map(|s| ExtensionId::new(s).unwrap())
}
pub fn cursor() -> impl Strategy<Value = Cursor> {
    "[!-~]{1,256}".prop_map(|s| Cursor::new(s).unwrap())
}
pub fn prompt_text() -> impl Strategy<Value = PromptText> {
    "\\PC{0,40}[a-zA-Z0-9é漢🍄]\\PC{0,40}".prop_map(|s| PromptText::new(s).unwrap())
}
pub fn text() -> impl Strategy<Value = String> {
    "\\PC{0,60}"
}

pub fn json_leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        text().prop_map(Value::from),
    ]
}

pub fn json() -> impl Strategy<Value = Value> {
    json_leaf().prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            vec(inner.clone(), 0..4).prop_map(Value::Array),
            btree_map("[a-z]{1,8}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Unknown fields: keys that no known struct uses.
pub fn extra() -> impl Strategy<Value = Extra> {
    btree_map("x_[a-z]{1,6}", json(), 0..3).prop_map(|m| m.into_iter().collect::<Map<_, _>>())
}

pub fn js_number() -> impl Strategy<Value = JsNumber> {
    prop_oneof![
        (0u32..1_000_000).prop_map(JsNumber::from),
        (0.0f64..1000.0).prop_map(|v| JsNumber::new(v).unwrap()),
    ]
}
