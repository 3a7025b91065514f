//! One module per capability, named for the behaviour it tests.

mod auth;
mod browser_routes;
mod conformance;
mod connection_limits;
mod errors_and_bounds;
mod hub_nodes;
mod hub_tenants;
mod server_limits;
mod sse_resume;
mod strict_answers;
mod tenant_logins;
mod tenant_scoping;
mod transport_seam;
mod web_footer_rows;
mod web_login;
mod web_markdown;
mod web_page;
mod web_subagents;
mod web_tool_output;
