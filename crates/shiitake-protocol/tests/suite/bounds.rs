//! Every documented bound holds at its edge: accepted at the limit, refused one past it.

use serde_json::json;
use shiitake_protocol::*;

fn prompt_with(request_id: &str, text: &str) -> Result<SessionCommand, serde_json::Error> {
    serde_json::from_value(json!({
        "type": "prompt", "requestId": request_id, "text": text, "delivery": "followUp"
    }))
}

#[test]
fn identifiers_hold_at_most_128_bytes() {
    let at_limit = "r".repeat(BoundedId::MAX_BYTES);
    let past_limit = "r".repeat(BoundedId::MAX_BYTES + 1);
    assert!(prompt_with(&at_limit, "hi").is_ok());
    let error = prompt_with(&past_limit, "hi").unwrap_err().to_string();
    assert!(
        error.contains("129 bytes, more than the 128-byte limit"),
        "{error}"
    );
    assert_eq!(
        RequestId::new(past_limit),
        Err(BoundError::TooLong {
            what: "identifier",
            len: 129,
            max: 128
        })
    );
}

#[test]
fn identifiers_are_visible_ascii_and_not_empty() {
    assert!(prompt_with("", "hi").is_err());
    assert_eq!(
        CommandId::new("a b"),
        Err(BoundError::BadCharacter {
            what: "identifier",
            found: ' ',
            at: 1
        })
    );
    assert!(CommandId::new("a\u{7f}").is_err());
    assert!(CommandId::new("é").is_err());
    assert!(CommandId::new("!~").is_ok());
}

#[test]
fn prompt_text_holds_at_most_128_kib_of_utf8() {
    let at_limit = "a".repeat(PromptText::MAX_BYTES);
    assert!(prompt_with("r", &at_limit).is_ok());
    let past_limit = "a".repeat(PromptText::MAX_BYTES + 1);
    assert!(prompt_with("r", &past_limit).is_err());
    // The bound counts bytes, not characters: 43,690 three-byte characters fit, one more does not.
    let wide = "漢".repeat(PromptText::MAX_BYTES / 3);
    assert!(PromptText::new(wide.clone()).is_ok());
    assert!(PromptText::new(wide + "漢").is_err());
}

#[test]
fn prompt_text_is_not_blank() {
    assert!(prompt_with("r", "").is_err());
    assert!(prompt_with("r", " \n\t").is_err());
    assert!(prompt_with("r", " x ").is_ok());
}

#[test]
fn operator_text_has_the_prompt_bound() {
    let command = |text: String| {
        serde_json::from_value::<SessionCommand>(json!({
            "type": "operator", "requestId": "r", "author": "party", "text": text
        }))
    };
    assert!(command("a".repeat(PromptText::MAX_BYTES)).is_ok());
    assert!(command("a".repeat(PromptText::MAX_BYTES + 1)).is_err());
}

#[test]
fn cursors_hold_at_most_256_bytes() {
    let options =
        |after: String| serde_json::from_value::<SubscribeOptions>(json!({ "after": after }));
    assert!(options("c".repeat(Cursor::MAX_BYTES)).is_ok());
    assert!(options("c".repeat(Cursor::MAX_BYTES + 1)).is_err());
    assert!(options(String::new()).is_err());
}

#[test]
fn page_limit_is_between_1_and_200() {
    let read = |limit: u64| serde_json::from_value::<ReadOptions>(json!({ "limit": limit }));
    assert!(read(0).is_err());
    assert_eq!(read(1).unwrap().limit.map(PageLimit::get), Some(1));
    assert_eq!(read(200).unwrap().limit.map(PageLimit::get), Some(200));
    assert!(read(201).is_err());
    assert!(read(u64::MAX).is_err());
    assert_eq!(PageLimit::default().get(), 50);
}

#[test]
fn model_spec_holds_at_most_512_bytes() {
    let preference =
        |model: String| serde_json::from_value::<ModelPreference>(json!({ "model": model }));
    assert!(preference(format!("openai:{}", "m".repeat(ModelSpec::MAX_BYTES - 7))).is_ok());
    assert!(preference(format!("openai:{}", "m".repeat(ModelSpec::MAX_BYTES - 6))).is_err());
    assert!(preference("openai:\nx".to_owned()).is_err());
    assert!(preference(" ".to_owned()).is_err());
}

#[test]
fn bound_errors_become_canonical_errors() {
    let too_long =
        ShiitakeError::from(PromptText::new("a".repeat(PromptText::MAX_BYTES + 1)).unwrap_err());
    assert_eq!(too_long.code, ErrorCode::TooLarge);
    let blank = ShiitakeError::from(PromptText::new("  ").unwrap_err());
    assert_eq!(blank.code, ErrorCode::Invalid);
}
