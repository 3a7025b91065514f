//! One module per capability, named for the behaviour it tests.

mod agent_admission;
mod compaction;
mod conformance;
mod durable_acceptance;
mod errors;
mod extension_grants;
mod extension_host;
mod extension_kit;
mod extension_migrations;
mod extension_observed;
mod extension_timers;
mod extension_turns;
mod extension_waits;
mod idle_owners;
mod inbox_listing;
mod kept_transcript;
mod kill_and_restart;
mod operator_lines;
mod pending_view;
mod recovery_limit;
mod recovery_replay_safe;
mod replay_limit;
mod runner_bounds;
mod sandbox_failures;
mod timer_after_restart;
mod timer_clock;
