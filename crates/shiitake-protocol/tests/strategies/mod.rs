//! proptest strategies for every wire type, shared by the property tests.

#![allow(dead_code, clippy::unwrap_used)]

use proptest::collection::{btree_map, vec};
use proptest::option;
use proptest::prelude::*;
use serde_json::{Map, Value};
use shiitake_protocol::catalog::*;
use shiitake_protocol::message::*;
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

pub fn usage() -> impl Strategy<Value = Usage> {
    (
        (
            any::<u32>(),
            any::<u32>(),
            any::<u32>(),
            any::<u32>(),
            any::<u32>(),
        ),
        (
            js_number(),
            js_number(),
            js_number(),
            js_number(),
            js_number(),
        ),
        extra(),
    )
        .prop_map(|((i, o, cr, cw, t), (ci, co, ccr, ccw, ct), extra)| Usage {
            input: i.into(),
            output: o.into(),
            cache_read: cr.into(),
            cache_write: cw.into(),
            total_tokens: t.into(),
            cost: Cost {
                input: ci,
                output: co,
                cache_read: ccr,
                cache_write: ccw,
                total: ct,
                extra: Extra::new(),
            },
            extra,
        })
}

pub fn text_content() -> impl Strategy<Value = TextContent> {
    (text(), option::of(text()), extra()).prop_map(|(text, text_signature, extra)| TextContent {
        text,
        text_signature,
        extra,
    })
}

pub fn input_content() -> impl Strategy<Value = InputContent> {
    prop_oneof![
        text_content().prop_map(InputContent::Text),
        ("[A-Za-z0-9+/]{0,40}", "image/(png|jpeg)").prop_map(|(data, mime_type)| {
            InputContent::Image(ImageContent {
                data,
                mime_type,
                extra: Extra::new(),
            })
        }),
    ]
}

pub fn assistant_content() -> impl Strategy<Value = AssistantContent> {
    prop_oneof![
        text_content().prop_map(AssistantContent::Text),
        (text(), option::of(text()), option::of(any::<bool>())).prop_map(
            |(thinking, thinking_signature, redacted)| {
                AssistantContent::Thinking(ThinkingContent {
                    thinking,
                    thinking_signature,
                    redacted,
                    extra: Extra::new(),
                })
            }
        ),
        (
            "[a-z_0-9]{1,20}",
            "[a-z_.]{1,30}",
            btree_map("[a-z]{1,6}", json(), 0..4),
            option::of(text())
        )
            .prop_map(|(id, name, arguments, thought_signature)| {
                AssistantContent::ToolCall(ToolCall {
                    id,
                    name,
                    arguments: arguments.into_iter().collect(),
                    thought_signature,
                    extra: Extra::new(),
                })
            }),
    ]
}

pub fn stop_reason() -> impl Strategy<Value = StopReason> {
    prop_oneof![
        Just(StopReason::Stop),
        Just(StopReason::Length),
        Just(StopReason::ToolUse),
        Just(StopReason::Error),
        Just(StopReason::Aborted),
    ]
}

pub fn message() -> impl Strategy<Value = Message> {
    prop_oneof![
        (
            prop_oneof![
                text().prop_map(UserContent::Text),
                vec(input_content(), 0..3).prop_map(UserContent::Blocks)
            ],
            any::<u64>(),
            extra()
        )
            .prop_map(|(content, timestamp, extra)| {
                Message::User(UserMessage {
                    content,
                    timestamp,
                    extra,
                })
            }),
        (
            vec(assistant_content(), 0..4),
            ("[a-z-]{1,20}", "[a-z]{1,10}", "[a-z0-9.-]{1,20}"),
            usage(),
            stop_reason(),
            option::of(text()),
            any::<u64>(),
            extra()
        )
            .prop_map(
                |(
                    content,
                    (api, provider, model),
                    usage,
                    stop_reason,
                    error_message,
                    timestamp,
                    extra,
                )| {
                    Message::Assistant(AssistantMessage {
                        content,
                        api,
                        provider,
                        model,
                        usage,
                        stop_reason,
                        error_message,
                        timestamp,
                        extra,
                    })
                }
            ),
        (
            ("[a-z_0-9]{1,20}", "[a-z_.]{1,30}"),
            vec(input_content(), 0..3),
            option::of(json()),
            any::<bool>(),
            any::<u64>(),
            extra()
        )
            .prop_map(
                |((tool_call_id, tool_name), content, details, is_error, timestamp, extra)| {
                    // `details: null` is indistinguishable from absent on the wire.
                    let details = details.filter(|d| !d.is_null());
                    Message::ToolResult(ToolResultMessage {
                        tool_call_id,
                        tool_name,
                        content,
                        details,
                        is_error,
                        timestamp,
                        extra,
                    })
                }
            ),
    ]
}

pub fn delivery() -> impl Strategy<Value = PromptDelivery> {
    prop_oneof![Just(PromptDelivery::FollowUp), Just(PromptDelivery::Steer)]
}

pub fn session_command() -> impl Strategy<Value = SessionCommand> {
    prop_oneof![
        (request_id(), prompt_text(), delivery()).prop_map(|(request_id, text, delivery)| {
            SessionCommand::Prompt {
                request_id,
                text,
                delivery,
            }
        }),
        (command_id(), option::of(any::<bool>())).prop_map(|(command_id, only_if_pending)| {
            SessionCommand::Cancel {
                command_id,
                only_if_pending,
            }
        }),
        Just(SessionCommand::Abort),
        entry_id().prop_map(|entry_id| SessionCommand::Branch { entry_id }),
        entry_id().prop_map(|entry_id| SessionCommand::Fork { entry_id }),
        (
            request_id(),
            prop_oneof![Just(OperatorAuthor::Operator), Just(OperatorAuthor::Party)],
            prompt_text()
        )
            .prop_map(|(request_id, author, text)| SessionCommand::Operator {
                request_id,
                author,
                text
            }),
    ]
}

pub fn cancel_result() -> impl Strategy<Value = CancelResult> {
    prop_oneof![
        command_id().prop_map(|command_id| CancelResult::Accepted(Accepted { command_id })),
        command_id().prop_map(|command_id| CancelResult::TooLate(TooLate { command_id })),
    ]
}

pub fn session_message() -> impl Strategy<Value = SessionMessage> {
    (
        entry_id(),
        any::<u64>(),
        option::of(command_id()),
        message(),
    )
        .prop_map(|(id, sequence, command_id, value)| SessionMessage {
            id,
            sequence,
            command_id,
            value,
        })
}

pub fn terminal() -> impl Strategy<Value = SessionTerminal> {
    (
        command_id(),
        prop_oneof![
            Just(TerminalOutcome::Completed),
            Just(TerminalOutcome::Cancelled),
            Just(TerminalOutcome::Failed),
            Just(TerminalOutcome::Interrupted)
        ],
        any::<u64>(),
        option::of(text()),
    )
        .prop_map(
            |(command_id, outcome, sequence, diagnostic)| SessionTerminal {
                command_id,
                outcome,
                sequence,
                diagnostic,
            },
        )
}

pub fn activity() -> impl Strategy<Value = SessionActivity> {
    (
        prop_oneof![
            Just(QueueState::Idle),
            command_id().prop_map(|command_id| QueueState::Queued { command_id }),
            command_id().prop_map(|command_id| QueueState::Running { command_id }),
        ],
        any::<bool>(),
        option::of(
            (
                any::<u32>(),
                any::<u32>(),
                any::<u64>(),
                text(),
                any::<u64>(),
            )
                .prop_map(
                    |(attempt, max_attempts, delay_ms, error_message, scheduled_at)| RetryState {
                        attempt,
                        max_attempts,
                        delay_ms,
                        error_message,
                        scheduled_at,
                    },
                ),
        ),
        option::of("[a-z.]{1,30}"),
        option::of(any::<u64>()),
    )
        .prop_map(
            |(queue, cancellation_requested, retry, active_tool, last_model_choice_sequence)| {
                SessionActivity {
                    queue,
                    cancellation_requested,
                    retry,
                    active_tool,
                    last_model_choice_sequence,
                }
            },
        )
}

pub fn progress() -> impl Strategy<Value = SessionProgress> {
    (
        entry_id(),
        any::<u64>(),
        text(),
        text(),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(
            |(message_id, revision, text, thinking, text_truncated, thinking_truncated)| {
                SessionProgress {
                    message_id,
                    revision,
                    text,
                    thinking,
                    text_truncated,
                    thinking_truncated,
                }
            },
        )
}

pub fn pending() -> impl Strategy<Value = SessionPendingPrompts> {
    (
        vec(
            (command_id(), prompt_text(), delivery()).prop_map(|(command_id, text, delivery)| {
                SessionPendingPrompt {
                    command_id,
                    text,
                    delivery,
                }
            }),
            0..3,
        ),
        any::<bool>(),
    )
        .prop_map(|(prompts, has_more)| SessionPendingPrompts { prompts, has_more })
}

pub fn compaction() -> impl Strategy<Value = SessionCompactionMarker> {
    (event_id(), any::<u64>(), any::<u64>())
        .prop_map(|(id, sequence, at)| SessionCompactionMarker { id, sequence, at })
}

pub fn sandbox_failure() -> impl Strategy<Value = SandboxFailureEvent> {
    (
        event_id(),
        any::<u64>(),
        any::<u64>(),
        "[a-z.]{1,30}",
        text(),
    )
        .prop_map(
            |(id, sequence, at, capability, message)| SandboxFailureEvent {
                id,
                sequence,
                at,
                capability,
                message,
            },
        )
}

pub fn slot() -> impl Strategy<Value = ExtensionSlotV0> {
    prop_oneof![
        text().prop_map(|reason| ExtensionSlotV0::Stopped { reason }),
        json().prop_map(|value| ExtensionSlotV0::Running { value }),
    ]
}

pub fn slots() -> impl Strategy<Value = SessionExtensionSlots> {
    btree_map(extension_id(), slot(), 0..3)
}

pub fn snapshot() -> impl Strategy<Value = SessionSnapshot> {
    (
        (
            session_id(),
            option::of(cursor()),
            any::<bool>(),
            option::of(option::of(cursor())),
        ),
        (vec(session_message(), 0..3), vec(terminal(), 0..2)),
        (
            option::of(vec(compaction(), 0..2)),
            option::of(vec(sandbox_failure(), 0..2)),
        ),
        (pending(), activity(), option::of(progress()), slots()),
    )
        .prop_map(
            |(
                (session_id, cursor, has_more, oldest_cursor),
                (messages, terminals),
                (compactions, sandbox_failures),
                (pending, activity, progress, extensions),
            )| SessionSnapshot {
                session_id,
                cursor,
                has_more,
                oldest_cursor,
                messages,
                terminals,
                compactions,
                sandbox_failures,
                pending,
                activity,
                progress,
                extensions,
            },
        )
}

pub fn frame() -> impl Strategy<Value = SessionFrame> {
    prop_oneof![
        (
            (
                prop_oneof![Just(FrameDelivery::Replay), Just(FrameDelivery::Live)],
                option::of(cursor())
            ),
            (
                pending(),
                vec(session_message(), 0..3),
                vec(terminal(), 0..2)
            ),
            (
                option::of(vec(compaction(), 0..2)),
                option::of(vec(sandbox_failure(), 0..2))
            ),
            (activity(), slots()),
        )
            .prop_map(
                |(
                    (delivery, cursor),
                    (pending, messages, terminals),
                    (compactions, sandbox_failures),
                    (activity, extensions),
                )| SessionFrame::Update(UpdateFrame {
                    delivery,
                    cursor,
                    pending,
                    messages,
                    terminals,
                    compactions,
                    sandbox_failures,
                    activity,
                    extensions,
                })
            ),
        (progress(), activity()).prop_map(|(progress, activity)| SessionFrame::Progress(
            ProgressFrame { progress, activity }
        )),
        (option::of(cursor()), snapshot()).prop_map(|(cursor, baseline)| {
            SessionFrame::Reset(Box::new(ResetFrame {
                reason: ResetReason::HistoryUnavailable,
                cursor,
                baseline,
            }))
        }),
    ]
}

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

pub fn catalog() -> impl Strategy<Value = Catalog> {
    let kind = prop_oneof![
        any::<u32>().prop_map(|max_bytes| ArgumentKind::Text { max_bytes }),
        Just(ArgumentKind::Integer),
        Just(ArgumentKind::Boolean),
        (vec((text(), text()), 0..3), any::<bool>()).prop_map(|(choices, multiple)| {
            ArgumentKind::Choice {
                choices: choices
                    .into_iter()
                    .map(|(label, value)| CatalogChoice { label, value })
                    .collect(),
                multiple,
            }
        }),
    ];
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
    )
        .prop_map(
            |(name, summary, scope, call, arguments, steps)| CatalogCommand {
                name,
                summary,
                scope,
                call,
                arguments,
                steps,
            },
        );
    (extension_id(), vec(command, 0..3)).prop_map(|(extension_id, commands)| Catalog {
        format: CatalogFormat::V1,
        extension_id,
        commands,
    })
}
