//! Usage as each decoder reads it from recorded streams (`tests/recorded/`), served
//! byte for byte by a real HTTP server: the counts a provider reports, and `unknown`
//! (never a false zero) when it reports none.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use shiitake_model::{
    Anthropic, AnthropicConfig, Model, ModelOptions, OpenAiCompatible, OpenAiConfig,
};
use shiitake_protocol::message::{AssistantMessage, Usage, UsageSource};

use crate::support::check::{ask, call};
use crate::support::server::{Part, Reply, TestServer};

fn recorded(file: &str) -> Reply {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/recorded")
        .join(file);
    let body = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    Reply::sse(vec![Part::Data(body)])
}

async fn play(
    model_for: impl FnOnce(&TestServer) -> Box<dyn Model>,
    file: &str,
) -> AssistantMessage {
    let server = TestServer::start(vec![recorded(file)]).await;
    let model = model_for(&server);
    let (_, message) = call(&*model, ask("hi"), ModelOptions::default())
        .await
        .unwrap();
    message
}

fn v1(server: &TestServer) -> String {
    format!("{}/v1", server.base)
}

fn openai_compatible(server: &TestServer) -> Box<dyn Model> {
    Box::new(OpenAiCompatible::new(OpenAiConfig::new(v1(server), "m")).unwrap())
}

fn usage(input: u64, output: u64, cache_read: u64, cache_write: u64) -> Usage {
    Usage {
        input,
        output,
        cache_read,
        cache_write,
        total_tokens: input + output + cache_read + cache_write,
        ..Usage::default()
    }
}

#[tokio::test]
async fn openai_usage_chunk_counts_cached_prompt_tokens_as_cache_reads() {
    let message = play(
        |server| {
            let mut config = OpenAiConfig::openai("gpt-4o-mini", "sk");
            config.base_url = v1(server);
            Box::new(OpenAiCompatible::new(config).unwrap())
        },
        "openai_usage.sse",
    )
    .await;
    assert_eq!(message.text(), "Hello!");
    assert_eq!(message.usage, usage(93, 2, 1024, 0));
    assert_eq!(message.usage.total_tokens, 1119);
}

#[tokio::test]
async fn anthropic_usage_adds_message_start_and_message_delta() {
    let message = play(
        |server| {
            Box::new(
                Anthropic::new(
                    AnthropicConfig::new("claude-sonnet-4-5", "k").base_url(&server.base),
                )
                .unwrap(),
            )
        },
        "anthropic_usage.sse",
    )
    .await;
    assert_eq!(message.text(), "Hello!");
    assert_eq!(message.usage, usage(25, 15, 1800, 0));
}

#[tokio::test]
async fn the_bundled_server_reports_usage_with_its_reused_prefix_for_text_and_calls() {
    let text = play(openai_compatible, "bundled_text.sse").await;
    assert_eq!(text.text(), "Hello there, welcome to my little corner");
    assert_eq!(text.usage, usage(9, 8, 14, 0));
    let call = play(openai_compatible, "bundled_tool_call.sse").await;
    assert_eq!(
        call.tool_calls().next().map(|c| c.name.as_str()),
        Some("files__read")
    );
    assert_eq!(call.usage, usage(141, 8, 11, 0));
}

#[tokio::test]
async fn a_server_that_streams_no_usage_records_it_as_unknown() {
    let message = play(openai_compatible, "llama_cpp_python_no_usage.sse").await;
    assert_eq!(message.text(), "Hello there. I'm here to help");
    assert_eq!(message.usage, Usage::unknown());
    assert_eq!(message.usage.source, UsageSource::Unknown);
}
