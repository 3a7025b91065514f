//! One behavioural test suite for every implementation of `AgentApi` / `SessionApi`.
//!
//! The in-process Agent of `shiitake-core` and the HTTP client of
//! `shiitake-client` must behave the same. Each implementation provides a
//! [`Fixture`] (a fresh Agent whose model plays a script, with the standard
//! [`TestTools`]) and expands [`conformance_tests!`] in one of its test files;
//! every test of [`suite`] then runs against it.
//!
//! This crate is test support: a failed expectation panics. [`flaky_store`] puts a
//! switch in front of a real store, for the tests of what a failing store does.

#![allow(clippy::unwrap_used, clippy::expect_used)]

pub mod extension;
pub mod flaky_store;
pub mod suite;
pub mod support;
pub mod tools;

use async_trait::async_trait;
use shiitake_model::{Script, ScriptedModel};
use shiitake_protocol::AgentApi;

pub use tools::TestTools;

/// A fresh Agent for one test.
#[async_trait]
pub trait Fixture: Sized + Send + Sync + 'static {
    /// The implementation under test.
    type Agent: AgentApi;

    /// Starts an Agent on a new database whose model plays `script` and whose
    /// tools are [`tools::catalog`].
    async fn start(script: Script) -> Self;

    /// The Agent.
    fn agent(&self) -> &Self::Agent;

    /// The scripted model, to see what the runner sent it.
    fn model(&self) -> &ScriptedModel;

    /// The counters of the test tools.
    fn tools(&self) -> &TestTools;
}

/// Expands to one `#[tokio::test]` per test of the suite, run against `$fixture`.
///
/// With `if $ready`, each test first evaluates `$ready` (a `bool`) and returns
/// at once when it is false: for fixtures that need a service the environment
/// may not provide (a PostgreSQL). `$ready` asks `shiitake-test-services`, which
/// prints the `SKIPPED` line, or fails the test when `SHIITAKE_REQUIRE_SERVICES=1`.
#[macro_export]
macro_rules! conformance_tests {
    ($fixture:ty) => {
        $crate::conformance_tests!($fixture, if true);
    };
    ($fixture:ty, if $ready:expr) => {
        $crate::conformance_tests!(@each $fixture, $ready;
            agent::create_is_idempotent,
            agent::unknown_sessions_are_not_found,
            agent::delete_removes_a_session,
            agent::list_orders_running_before_settled,
            agent::an_address_leads_back_to_its_session,
            commands::a_prompt_runs_to_completion,
            commands::an_exact_retry_returns_the_original_acceptance,
            commands::a_changed_retry_is_a_conflict,
            commands::cancel_of_unknown_or_settled_is_too_late,
            commands::cancel_of_a_pending_prompt_settles_it,
            commands::only_if_pending_is_too_late_for_running_work,
            commands::cancel_and_abort_reach_a_running_tool,
            commands::model_preference_is_kept,
            queue::follow_ups_run_in_acceptance_order,
            queue::a_steer_enters_at_the_next_boundary,
            queue::tools_run_and_their_results_reach_the_model,
            queue::retryable_failures_back_off_then_succeed,
            queue::a_failing_model_ends_the_run_failed,
            lineage::operator_lines_need_no_run,
            lineage::branch_selects_an_earlier_leaf,
            lineage::fork_copies_one_lineage,
            observe::subscribe_replays_strictly_after_a_cursor,
            observe::an_unknown_cursor_gets_one_reset,
            observe::watch_has_no_gap_and_no_duplicate,
            observe::read_pages_backwards,
            extensions::catalogs_list_the_human_command_flows,
            extensions::a_flow_runs_its_command_with_a_request_id,
            extensions::the_tools_list_says_what_a_run_sees,
        );
    };
    (@each $fixture:ty, $ready:expr; $($module:ident :: $name:ident),+ $(,)?) => {
        $(
            #[tokio::test]
            async fn $name() {
                if !$ready {
                    return;
                }
                $crate::suite::$module::$name::<$fixture>().await;
            }
        )+
    };
}
