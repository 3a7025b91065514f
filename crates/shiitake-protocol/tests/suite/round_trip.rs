//! `decode(encode(x)) == x` for every wire type, over generated values.

#![allow(clippy::unwrap_used)] // test support code outside #[test] functions

use crate::support::strategies as s;
use proptest::prelude::*;
use serde::Serialize;
use serde::de::DeserializeOwned;
use shiitake_protocol::*;

fn round_trips<T: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug>(value: &T) {
    let encoded = serde_json::to_string(value).unwrap();
    let decoded: T = serde_json::from_str(&encoded)
        .unwrap_or_else(|error| panic!("{encoded} does not decode: {error}"));
    assert_eq!(&decoded, value, "{encoded}");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn message(value in s::message()) { round_trips(&value) }

    #[test]
    fn session_command(value in s::session_command()) { round_trips(&value) }

    #[test]
    fn cancel_result(value in s::cancel_result()) { round_trips(&value) }

    #[test]
    fn accepted(command_id in s::command_id()) {
        round_trips(&Accepted { command_id: command_id.clone() });
        round_trips(&TooLate { command_id: command_id.clone() });
        round_trips(&ForkedSession { session_id: SessionId::new(command_id.as_str()).unwrap() });
    }

    #[test]
    fn session_message(value in s::session_message()) { round_trips(&value) }

    #[test]
    fn terminal(value in s::terminal()) { round_trips(&value) }

    #[test]
    fn activity_and_progress(activity in s::activity(), progress in s::progress()) {
        round_trips(&activity);
        round_trips(&progress);
    }

    #[test]
    fn pending_and_markers(
        pending in s::pending(),
        compaction in s::compaction(),
        sandbox in s::sandbox_failure(),
    ) {
        round_trips(&pending);
        round_trips(&compaction);
        round_trips(&sandbox);
    }

    #[test]
    fn snapshot(value in s::snapshot()) { round_trips(&value) }

    #[test]
    fn frame(value in s::frame()) { round_trips(&value) }

    #[test]
    fn summary_page(value in s::summary_page()) {
        round_trips(&value);
        let encoded = serde_json::to_string(&value).unwrap();
        prop_assert_eq!(parse_session_summary_page(&encoded).unwrap(), value);
    }

    #[test]
    fn error(value in s::error()) {
        round_trips(&value);
        let encoded = serde_json::to_string(&value).unwrap();
        prop_assert_eq!(parse_shiitake_error(&encoded).unwrap(), value);
    }

    #[test]
    fn extension_types(slots in s::slots(), status in s::extension_status()) {
        round_trips(&slots);
        round_trips(&status);
    }

    #[test]
    fn model_preference(value in s::model_preference()) { round_trips(&value) }

    #[test]
    fn catalog(value in s::catalog()) { round_trips(&value) }

    #[test]
    fn flow_step(value in s::flow_step()) { round_trips(&value) }

    #[test]
    fn options(after in proptest::option::of(s::cursor()), before in proptest::option::of(s::cursor()),
               limit in proptest::option::of(1u32..=PageLimit::MAX), flag in proptest::option::of(any::<bool>())) {
        round_trips(&SubscribeOptions { include_sandbox_failures: flag, after });
        round_trips(&ReadOptions {
            include_sandbox_failures: flag,
            limit: limit.map(|l| PageLimit::new(l).unwrap()),
            before,
        });
    }
}
