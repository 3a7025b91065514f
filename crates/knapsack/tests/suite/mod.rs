//! One module per capability, named for the behaviour it tests.

mod commands;
mod computers;
mod edit_errors;
mod files_module;
mod grep_memory;
mod jobs;
mod mcp_background;
mod mcp_run;
mod mcp_servers;
mod patch_atomic;
mod patch_grammar;
mod path_confinement;
mod path_escape_corpus;
mod read_limits;
mod sandbox;
mod search_visibility;
mod ui_host;
