//! The `agents.*` tools on in-process Agents over a test directory: a send waits for
//! the reply and is recorded, creation goes through the directory's admission, and
//! answering with no question waiting tells the model so; the tools' schemas carry
//! their bounds.
//!
//! One test binary: each capability is a module of `suite/`, the shared helpers are
//! `support/`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

mod suite {
    mod schemas;
    mod sending;
    mod tool_errors;
}
