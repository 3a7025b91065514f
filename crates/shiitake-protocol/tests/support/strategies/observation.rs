//! Commands, snapshots and frames: what a watcher of a Session sees.

use proptest::collection::{btree_map, vec};
use proptest::option;
use proptest::prelude::*;
use shiitake_protocol::*;

use super::ids::*;
use super::message::message;

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

pub fn storage_wait() -> impl Strategy<Value = StorageWait> {
    (any::<u64>(), any::<u32>(), any::<u64>(), text()).prop_map(
        |(since, attempts, next_attempt_at, error_message)| StorageWait {
            since,
            attempts,
            next_attempt_at,
            error_message,
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
        option::of(storage_wait()),
        option::of(tool_output()),
    )
        .prop_map(
            |(
                queue,
                cancellation_requested,
                retry,
                active_tool,
                last_model_choice_sequence,
                storage_wait,
                tool_output,
            )| {
                SessionActivity {
                    queue,
                    cancellation_requested,
                    retry,
                    active_tool,
                    last_model_choice_sequence,
                    storage_wait,
                    tool_output,
                }
            },
        )
}

/// A running tool's latest output.
pub fn tool_output() -> impl Strategy<Value = ToolOutput> {
    ("[a-z_]{1,20}", text(), any::<u64>()).prop_map(|(tool, text, total_bytes)| ToolOutput {
        tool,
        text,
        total_bytes,
    })
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

fn footer_action() -> impl Strategy<Value = footer::FooterActionV0> {
    use footer::{FooterActionKind, FooterActionV0, SessionTarget};
    let target = ("[a-z]{1,8}", "[a-z0-9_]{1,8}")
        .prop_map(|(agent, session_id)| SessionTarget { agent, session_id });
    let kind = prop_oneof![
        "[a-z]{1,8}".prop_map(|command| FooterActionKind::Command {
            command,
            input: serde_json::json!({"action": "clear"}),
        }),
        (extension_id(), option::of(target.clone())).prop_map(|(extension_id, target)| {
            FooterActionKind::Flow {
                extension_id,
                flow: "answer_flow".into(),
                call: "answer".into(),
                preset: serde_json::json!({"askId": "ask_1"}),
                target,
            }
        }),
        target.prop_map(|target| FooterActionKind::Open { target }),
    ];
    ("\\PC{0,12}", "[a-z]{1,8}", any::<bool>(), kind).prop_map(|(label, name, primary, kind)| {
        FooterActionV0 {
            label,
            name,
            primary,
            kind,
        }
    })
}

pub fn footer() -> impl Strategy<Value = footer::SessionFooter> {
    let row = (
        (
            extension_id(),
            "[a-z0-9_]{1,8}",
            "[a-z-]{1,8}",
            "\\PC{0,24}",
        ),
        (
            prop_oneof![
                Just(footer::FooterTone::Calm),
                Just(footer::FooterTone::Attention)
            ],
            option::of(any::<u64>()),
            option::of("\\PC{0,12}"),
            option::of((any::<u64>(), any::<u64>())),
        ),
        (vec("\\PC{0,12}", 0..3), vec(footer_action(), 0..3)),
    )
        .prop_map(
            |(
                (extension_id, key, kind, text),
                (tone, since, note, progress),
                (detail, actions),
            )| {
                footer::FooterRowV0 {
                    extension_id,
                    key,
                    kind,
                    text,
                    tone,
                    since,
                    note,
                    progress: progress.map(|(done, total)| footer::FooterProgress { done, total }),
                    detail,
                    actions,
                }
            },
        );
    vec(row, 0..3)
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
        footer(),
    )
        .prop_map(
            |(
                (session_id, cursor, has_more, oldest_cursor),
                (messages, terminals),
                (compactions, sandbox_failures),
                (pending, activity, progress, extensions),
                footer,
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
                footer,
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
            (activity(), slots(), footer()),
        )
            .prop_map(
                |(
                    (delivery, cursor),
                    (pending, messages, terminals),
                    (compactions, sandbox_failures),
                    (activity, extensions, footer),
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
                    footer,
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
