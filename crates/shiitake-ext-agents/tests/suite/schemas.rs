//! The tools' input schemas are derived from the contract's input types and carry the
//! bounds the hand-written ones did.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Value, json};
use shiitake_protocol::PromptText;

use crate::support::*;

fn schemas() -> BTreeMap<String, Value> {
    let (extension, _runtime) =
        shiitake_ext_agents::extension(name("A"), Arc::new(TestDirectory::default())).unwrap();
    extension
        .tool_schemas()
        .map(|(name, schema)| (name.to_owned(), schema.clone()))
        .collect()
}

/// The derived schemas carry the hand-written ones' bounds, required fields and
/// `additionalProperties: false`. (The hand-written name `pattern` is gone: it lay
/// outside the capabilities' subset, which made those schemas opaque; the name's
/// rule is in its description and `AgentName` refuses a bad one.)
#[test]
fn the_derived_schemas_carry_the_bounds_and_refuse_unknown_fields() {
    use shiitake_ext_agents::contract::{
        MAX_AGENT_NAME_BYTES, MAX_ASK_ID_CHARS, MAX_SESSION_ID_BYTES,
    };
    use shiitake_ext_question::contract::MAX_QUESTIONS;
    let schemas = schemas();
    assert_eq!(
        schemas.keys().map(String::as_str).collect::<Vec<_>>(),
        ["answer", "create", "escalate", "send"]
    );
    let name = |schema: &Value, field: &str| {
        let name = &schema["properties"][field];
        assert_eq!(name["type"], "string");
        assert_eq!(
            (name["minLength"].clone(), name["maxLength"].clone()),
            (json!(1), json!(MAX_AGENT_NAME_BYTES))
        );
        let told = name["description"].as_str().unwrap_or_default();
        assert!(told.contains("letters, digits, - and _"), "{told}");
    };
    for (tool, schema) in &schemas {
        assert_eq!(schema["type"], "object", "{tool}");
        assert_eq!(schema["additionalProperties"], false, "{tool}");
    }
    let send = &schemas["send"];
    assert_eq!(send["required"], json!(["agent", "text"]));
    name(send, "agent");
    let text = &send["properties"]["text"];
    assert_eq!(
        (text["minLength"].clone(), text["maxLength"].clone()),
        (json!(1), json!(PromptText::MAX_BYTES))
    );
    let session = &send["properties"]["sessionId"];
    assert_eq!(
        (
            session["type"].clone(),
            session["minLength"].clone(),
            session["maxLength"].clone()
        ),
        (json!("string"), json!(1), json!(MAX_SESSION_ID_BYTES))
    );
    let mode = &send["properties"]["mode"];
    assert_eq!(
        (mode["enum"].clone(), mode["default"].clone()),
        (json!(["wait", "continue"]), json!("wait"))
    );
    let create = &schemas["create"];
    assert_eq!(create["required"], json!(["name"]));
    name(create, "name");
    for tool in ["answer", "escalate"] {
        let schema = &schemas[tool];
        name(schema, "agent");
        let ask = &schema["properties"]["askId"];
        assert_eq!(
            (
                ask["type"].clone(),
                ask["minLength"].clone(),
                ask["maxLength"].clone()
            ),
            (json!("string"), json!(1), json!(MAX_ASK_ID_CHARS))
        );
    }
    assert_eq!(schemas["escalate"]["required"], json!(["agent"]));
    let answer = &schemas["answer"];
    assert_eq!(answer["required"], json!(["agent", "answers"]));
    let answers = &answer["properties"]["answers"];
    assert_eq!(
        (answers["minItems"].clone(), answers["maxItems"].clone()),
        (json!(1), json!(MAX_QUESTIONS))
    );
    let one = &answers["items"];
    assert_eq!(one["additionalProperties"], false);
    assert_eq!(one["properties"]["selected"]["items"]["type"], "string");
    assert_eq!(one["properties"]["text"]["type"], "string");
    assert!(one.get("required").is_none(), "labels, text, or both");
}
