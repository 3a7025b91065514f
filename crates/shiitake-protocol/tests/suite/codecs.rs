//! The `parse_*` codecs decode good input and give typed errors for bad input.

use shiitake_protocol::*;

#[test]
fn parse_accepted_decodes_an_acceptance() {
    let accepted = parse_accepted(r#"{"status":"accepted","commandId":"c-1"}"#).unwrap();
    assert_eq!(
        accepted,
        Accepted {
            command_id: CommandId::new("c-1").unwrap()
        }
    );
}

#[test]
fn parse_cancel_result_decodes_both_outcomes() {
    let too_late = parse_cancel_result(r#"{"status":"too_late","commandId":"c-1"}"#).unwrap();
    assert_eq!(
        too_late,
        CancelResult::TooLate(TooLate {
            command_id: CommandId::new("c-1").unwrap()
        })
    );
    let accepted = parse_cancel_result(r#"{"status":"accepted","commandId":"c-1"}"#).unwrap();
    assert!(matches!(accepted, CancelResult::Accepted(_)));
}

#[test]
fn parse_shiitake_error_refuses_unknown_codes() {
    let error = parse_shiitake_error(r#"{"code":"not_found","message":"no Session s-1"}"#).unwrap();
    assert_eq!(error, ShiitakeError::not_found("no Session s-1"));
    let bad = parse_shiitake_error(r#"{"code":"teapot","message":"x"}"#).unwrap_err();
    assert_eq!(bad.what, "ShiitakeError");
    assert!(bad.to_string().contains("teapot"), "{bad}");
}

#[test]
fn malformed_input_reports_where() {
    let error = parse_session_summary_page("{\n  \"sessions\": [\n    {\"sessionId\": 5}\n  ]\n}")
        .unwrap_err();
    assert_eq!(error.what, "SessionSummaryPage");
    assert_eq!(error.line(), 3);
    let error = parse_accepted("not json").unwrap_err();
    assert_eq!((error.line(), error.column()), (1, 2));
    assert_eq!(ShiitakeError::from(error).code, ErrorCode::Invalid);
}

#[test]
fn every_error_code_has_its_wire_string() {
    let codes = [
        (ErrorCode::NotFound, "not_found"),
        (ErrorCode::Conflict, "conflict"),
        (ErrorCode::Invalid, "invalid"),
        (ErrorCode::TooLarge, "too_large"),
        (ErrorCode::Unavailable, "unavailable"),
        (ErrorCode::Stopped, "stopped"),
        (ErrorCode::NotGranted, "not_granted"),
        (ErrorCode::Internal, "internal"),
    ];
    for (code, wire) in codes {
        assert_eq!(code.as_str(), wire);
        assert_eq!(
            serde_json::to_value(code).unwrap(),
            serde_json::Value::from(wire)
        );
    }
}

#[allow(clippy::unwrap_used)] // test support outside a #[test] function
fn decode_code(input: &str) -> ErrorCode {
    codec::decode_bounded("the body", || serde_json::from_str::<SessionCommand>(input))
        .unwrap_err()
        .code
}

#[test]
fn decode_failures_say_too_large_for_length_bounds_only() {
    let too_long_id = format!(
        r#"{{"type":"fork","entryId":"{}"}}"#,
        "e".repeat(BoundedId::MAX_BYTES + 1)
    );
    assert_eq!(decode_code(&too_long_id), ErrorCode::TooLarge);
    assert_eq!(
        decode_code(r#"{"type":"fork","entryId":"a b"}"#),
        ErrorCode::Invalid
    );
    assert_eq!(decode_code(r#"{"type":"jump"}"#), ErrorCode::Invalid);
    // The refusal's wording, echoed back inside another error, is not a length refusal.
    assert_eq!(
        decode_code(r#"{"type":"is 999 bytes, more than the 1-byte limit"}"#),
        ErrorCode::Invalid
    );
    // A length refusal in one decode does not leak into the next on the same thread.
    assert_eq!(decode_code(&too_long_id), ErrorCode::TooLarge);
    assert_eq!(decode_code(r#"{"type":"jump"}"#), ErrorCode::Invalid);
    let decoded = codec::decode_bounded("the body", || {
        serde_json::from_str::<SessionCommand>(r#"{"type":"fork","entryId":"e1"}"#)
    });
    assert!(decoded.is_ok(), "{decoded:?}");
}
