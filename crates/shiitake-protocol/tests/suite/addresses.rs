//! A Session address prints and parses back to itself, for every Session id, Agent
//! name and base URL; a printed address is one of the grammar's forms.

#![allow(clippy::unwrap_used)]

use crate::support::strategies as s;
use proptest::prelude::*;
use shiitake_protocol::*;

fn origin() -> impl Strategy<Value = AddressOrigin> {
    prop_oneof![
        Just(AddressOrigin::Local),
        (
            prop_oneof![Just("http://"), Just("https://")],
            "[a-z0-9.-]{1,20}(:[0-9]{1,5})?",
            "(/[a-zA-Z0-9._~-]{1,12}){0,3}",
        )
            .prop_map(|(scheme, host, path)| {
                AddressOrigin::http(&format!("{scheme}{host}{path}")).unwrap()
            }),
    ]
}

fn agent() -> impl Strategy<Value = Option<AgentName>> {
    proptest::option::of("[a-zA-Z0-9][a-zA-Z0-9_-]{0,63}".prop_map(|n| AgentName::new(n).unwrap()))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn an_address_parses_back_to_itself(
        origin in origin(),
        agent in agent(),
        session in s::session_id(),
    ) {
        let address = SessionAddress::new(origin, agent, session);
        let text = address.to_string();
        prop_assert!(text.len() <= address::MAX_ADDRESS_BYTES);
        prop_assert!(!text.contains(' '));
        let parsed: SessionAddress = text.parse().unwrap();
        prop_assert_eq!(&parsed, &address);
        // The Session segment is one path segment: nothing after it but itself.
        let segment = text.rsplit('/').next().unwrap();
        prop_assert!(!segment.contains(['?', '#']));
        let json = serde_json::to_string(&address).unwrap();
        prop_assert_eq!(serde_json::from_str::<SessionAddress>(&json).unwrap(), address);
    }

    #[test]
    fn any_text_is_refused_or_reads_as_an_address_that_prints_the_same(text in "\\PC{0,80}") {
        if let Ok(address) = text.parse::<SessionAddress>() {
            // Parsing only accepts the forms printing writes (percent escapes may be
            // in lower case or needless): printed again, it parses to the same.
            prop_assert_eq!(address.to_string().parse::<SessionAddress>().unwrap(), address);
        }
    }
}
