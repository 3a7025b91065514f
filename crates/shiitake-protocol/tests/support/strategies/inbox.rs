//! Summaries, errors, preferences, extension status and catalogs.

use proptest::collection::vec;
use proptest::option;
use proptest::prelude::*;
use shiitake_protocol::catalog::*;
use shiitake_protocol::*;

use super::ids::*;

pub fn inbox_state() -> impl Strategy<Value = SessionInboxState> {
    prop_oneof![
        Just(SessionInboxState::NeedsYou),
        Just(SessionInboxState::Running),
        Just(SessionInboxState::Errored),
        Just(SessionInboxState::Done),
    ]
}

pub fn summary() -> impl Strategy<Value = SessionSummary> {
    (
        any::<u64>(),
        any::<u64>(),
        option::of(any::<u64>()),
        text(),
        inbox_state(),
    )
        .prop_map(
            |(created_at, last_activity_at, settled_at, title, state)| SessionSummary {
                created_at,
                last_activity_at,
                settled_at,
                title,
                state,
            },
        )
}

pub fn summary_page() -> impl Strategy<Value = SessionSummaryPage> {
    (
        vec(
            prop_oneof![
                (session_id(), summary()).prop_map(|(session_id, summary)| {
                    SessionSummaryRow::Available {
                        session_id,
                        summary,
                    }
                }),
                session_id().prop_map(|session_id| SessionSummaryRow::Unavailable { session_id }),
            ],
            0..4,
        ),
        option::of(cursor()),
    )
        .prop_map(|(sessions, next)| SessionSummaryPage { sessions, next })
}

pub fn error() -> impl Strategy<Value = ShiitakeError> {
    (
        prop_oneof![
            Just(ErrorCode::NotFound),
            Just(ErrorCode::Conflict),
            Just(ErrorCode::Invalid),
            Just(ErrorCode::TooLarge),
            Just(ErrorCode::Unavailable),
            Just(ErrorCode::Stopped),
            Just(ErrorCode::NotGranted),
            Just(ErrorCode::Internal),
        ],
        text(),
    )
        .prop_map(|(code, message)| ShiitakeError::new(code, message))
}

pub fn model_preference() -> impl Strategy<Value = ModelPreference> {
    (
        "[a-z-]{1,20}:[a-z0-9.-]{1,30}",
        option::of(prop_oneof![
            Just(ReasoningLevel::Minimal),
            Just(ReasoningLevel::Low),
            Just(ReasoningLevel::Medium),
            Just(ReasoningLevel::High),
            Just(ReasoningLevel::Xhigh),
        ]),
    )
        .prop_map(|(model, reasoning)| ModelPreference {
            model: ModelSpec::new(model).unwrap(),
            reasoning,
        })
}

pub fn extension_status() -> impl Strategy<Value = ExtensionStatusV0> {
    (
        extension_id(),
        "[a-z]{1,10}",
        "[a-z0-9-]{1,20}",
        option::of(text()),
    )
        .prop_map(
            |(extension_id, namespace, revision, reason)| ExtensionStatusV0 {
                extension_id,
                namespace,
                revision,
                state: match reason {
                    Some(reason) => ExtensionRunState::Stopped { reason },
                    None => ExtensionRunState::Running,
                },
            },
        )
}

pub fn argument_kind() -> impl Strategy<Value = ArgumentKind> {
    prop_oneof![
        any::<u32>().prop_map(|max_bytes| ArgumentKind::Text { max_bytes }),
        Just(ArgumentKind::Integer),
        Just(ArgumentKind::Boolean),
        (vec((text(), text()), 0..3), any::<bool>(), any::<bool>()).prop_map(
            |(choices, multiple, free_text)| {
                ArgumentKind::Choice {
                    choices: choices
                        .into_iter()
                        .map(|(label, value)| CatalogChoice { label, value })
                        .collect(),
                    multiple,
                    free_text,
                }
            }
        ),
    ]
}

pub fn flow_step() -> impl Strategy<Value = FlowStep> {
    prop_oneof![
        ("[a-z0-9]{1,10}", text(), argument_kind()).prop_map(|(argument, prompt, kind)| {
            FlowStep::Ask {
                argument,
                prompt,
                kind,
            }
        }),
        (text(), text()).prop_map(|(summary, value)| FlowStep::Confirm {
            summary,
            input: serde_json::json!({"text": value}),
        }),
        text().prop_map(|message| FlowStep::Unavailable { message }),
    ]
}

pub fn catalog() -> impl Strategy<Value = Catalog> {
    let kind = argument_kind();
    let argument = ("[a-z]{1,10}", text(), kind, any::<bool>()).prop_map(
        |(name, description, kind, required)| CatalogArgument {
            name,
            description,
            kind,
            required,
        },
    );
    let step =
        ("[a-z]{1,10}", text()).prop_map(|(argument, prompt)| CatalogStep { argument, prompt });
    let command = (
        "[a-z]{1,10}",
        text(),
        prop_oneof![Just(CatalogScope::Session), Just(CatalogScope::Agent)],
        "[a-z_]{1,10}",
        vec(argument, 0..3),
        vec(step, 0..3),
        proptest::option::of("[a-z_]{1,10}"),
    )
        .prop_map(
            |(name, summary, scope, call, arguments, steps, flow)| CatalogCommand {
                name,
                summary,
                scope,
                call,
                arguments,
                steps,
                flow,
            },
        );
    (extension_id(), vec(command, 0..3)).prop_map(|(extension_id, commands)| Catalog {
        format: CatalogFormat::V1,
        extension_id,
        commands,
    })
}
