//! Shared test helpers: a recording SSE test server, wire encoders that turn a
//! scripted turn into OpenAI or Anthropic SSE, and an event-grammar checker.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

pub mod check;
pub mod server;
pub mod wire;
