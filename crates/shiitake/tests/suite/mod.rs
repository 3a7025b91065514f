//! One module per capability, named for the behaviour it tests.

mod acp_editor;
mod approval_chat;
mod chat_ctrl_c;
mod chat_e2e;
mod chat_markdown;
mod chat_shows_what_happened;
mod footer_rows;
mod kill_and_restart;
mod log_colour;
mod real_local_model;
mod scripted_place;
mod serve_commands;
mod serve_database;
mod serve_disk_full;
mod serve_hardening;
mod serve_hub;
mod serve_hub_computers;
mod serve_hub_goals;
mod serve_mcp;
mod serve_operations;
mod serve_roster;
mod serve_slow_clients;
mod serve_tenants;
mod slash_flows;
mod small_model_tools;
mod soak;
