//! One module per capability, named for the behaviour it tests.

mod abort_streaming;
mod anthropic_stream;
mod behaviour;
mod openai_stream;
mod real_local_model;
mod recorded_usage;
mod retry_classification;
mod scripted;
mod select_spec;
mod tool_streaming_replay;
