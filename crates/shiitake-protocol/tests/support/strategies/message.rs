//! Transcript messages and their content blocks.

use proptest::collection::{btree_map, vec};
use proptest::option;
use proptest::prelude::*;
use shiitake_protocol::message::*;

use super::ids::*;

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
        (
            prop_oneof![
                Just(UsageSource::Reported),
                Just(UsageSource::Estimated),
                Just(UsageSource::Unknown),
            ],
            extra(),
        ),
    )
        .prop_map(
            |((i, o, cr, cw, t), (ci, co, ccr, ccw, ct), (source, extra))| Usage {
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
                source,
                extra,
            },
        )
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
