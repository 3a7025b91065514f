//! How an Agent behaves: its model, prompt, timeouts, retries and bounds.

use std::sync::Arc;
use std::time::Duration;

use shiitake_model::{Model, ModelEnv};
use shiitake_protocol::ModelPreference;

use crate::clock::{Clock, SystemClock};
use crate::offer::OfferedTools;

/// Chooses the model for a run from the Session's preference.
pub trait ModelResolver: Send + Sync {
    /// The model to use, or a diagnostic a person can act on.
    fn resolve(&self, preference: Option<&ModelPreference>) -> Result<Arc<dyn Model>, String>;

    /// Whether a Session may choose `preference`, checked when it is set: `Err` with the
    /// reason is answered `not_granted`. The default permits every preference; a host whose
    /// callers are not all trusted with its files and keys narrows it to an allowlist.
    fn permits(&self, preference: &ModelPreference) -> Result<(), String> {
        let _ = preference;
        Ok(())
    }
}

/// Always the same model, whatever the preference (tests, benchmarks, single-model hosts).
pub struct FixedModel(pub Arc<dyn Model>);

impl ModelResolver for FixedModel {
    fn resolve(&self, _: Option<&ModelPreference>) -> Result<Arc<dyn Model>, String> {
        Ok(self.0.clone())
    }
}

/// Resolves selection strings (`openai:gpt-4o`, ...) with keys from the environment.
pub struct SpecResolver {
    /// Used when the Session states no preference.
    pub default_spec: Option<String>,
    /// API keys and base URLs.
    pub env: ModelEnv,
}

impl ModelResolver for SpecResolver {
    fn resolve(&self, preference: Option<&ModelPreference>) -> Result<Arc<dyn Model>, String> {
        let spec = preference
            .map(|p| p.model.as_str().to_owned())
            .or_else(|| self.default_spec.clone());
        let Some(spec) = spec else {
            return Err("no model is configured: start with --model or set SHIITAKE_MODEL \
                        (for example openai:gpt-4o-mini, or openai-compatible:http://127.0.0.1:8090/v1#smollm2?profile=small \
                        for the bundled local model; see docs/models.md)"
                .to_owned());
        };
        shiitake_model::select(&spec, &self.env).map_err(|error| error.to_string())
    }
}

/// Backoff for model calls that failed retryably before streaming.
#[derive(Clone, Debug, PartialEq)]
pub struct RetryPolicy {
    /// Attempts in all, the first included; the run fails after the last.
    pub max_attempts: u32,
    /// Wait before the second attempt; doubles each time.
    pub initial_delay: Duration,
    /// Longest wait between attempts (a provider's `Retry-After` may ask for more, up to this).
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: 5,
            initial_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(30),
        }
    }
}

impl RetryPolicy {
    /// The wait before attempt `next_attempt` (2 for the first retry).
    pub fn delay(&self, next_attempt: u32, retry_after: Option<Duration>) -> Duration {
        let exponent = next_attempt.saturating_sub(2).min(20);
        let backoff = self.initial_delay.saturating_mul(1 << exponent);
        retry_after
            .unwrap_or(backoff)
            .max(backoff)
            .min(self.max_delay)
    }
}

/// The default system prompt of small models: two sentences (measured with the bundled
/// SmolLM2-135M in docs/models.md: longer ones make it wander from a tool's result).
pub const SMALL_SYSTEM_PROMPT: &str =
    "You are a helpful assistant. Answer in one or two sentences.";

/// Everything an Agent needs besides its store and tools.
#[derive(Clone)]
pub struct AgentConfig {
    /// The Agent's name in its host's directory (`None`: the host did not name it): the
    /// Agent segment of its Sessions' addresses (`local:/v1/agents/{name}/...`) and
    /// the `agent` field of its owners' log spans (the tenant, on a Hub).
    pub name: Option<shiitake_protocol::AgentName>,
    /// Chooses each run's model.
    pub models: Arc<dyn ModelResolver>,
    /// The system prompt of every run whose model is of the full profile.
    pub system_prompt: String,
    /// The system prompt of runs whose model is small (`?profile=small`): short, since
    /// a small model reads all of it before every answer.
    pub small_system_prompt: String,
    /// Which tools runs offer, by the profile of their model: everything to full
    /// models, the compact set (files, question) to small ones.
    pub offered_tools: OfferedTools,
    /// How long an owner with nothing to do stays in memory.
    pub owner_idle: Duration,
    /// Backoff for retryable model failures.
    pub retry: RetryPolicy,
    /// Deadline of one tool call.
    pub tool_timeout: Duration,
    /// Most model calls in one run; a run that needs more fails.
    pub max_model_calls: u32,
    /// Times a run is resumed after crashes before it settles as interrupted.
    pub max_recoveries: u32,
    /// Bytes of streamed text (and of thinking) kept in progress frames.
    pub progress_limit_bytes: usize,
    /// Pending prompts listed in snapshots and frames.
    pub pending_view_limit: usize,
    /// Most prompts waiting in one Session's queue (the running one not counted); one
    /// more is refused `too_large`, while an exact retry of an accepted one still answers.
    pub max_queued_prompts: usize,
    /// When to summarise older messages; `None` never compacts.
    pub compaction: Option<CompactionPolicy>,
    /// The time of timers and extension transactions ([`SystemClock`] by default;
    /// a [`ManualClock`](crate::clock::ManualClock) for tests on a paused clock).
    pub clock: Arc<dyn Clock>,
}

impl AgentConfig {
    /// Defaults around the given model resolver.
    pub fn new(models: Arc<dyn ModelResolver>) -> Self {
        Self {
            name: None,
            models,
            system_prompt:
                "You are a helpful assistant. Use the tools you are given when they help."
                    .to_owned(),
            small_system_prompt: SMALL_SYSTEM_PROMPT.to_owned(),
            offered_tools: OfferedTools::default(),
            owner_idle: Duration::from_secs(30),
            retry: RetryPolicy::default(),
            tool_timeout: Duration::from_secs(120),
            max_model_calls: 64,
            max_recoveries: 3,
            progress_limit_bytes: 16 * 1024,
            pending_view_limit: 20,
            max_queued_prompts: 100,
            compaction: Some(CompactionPolicy::default()),
            clock: Arc::new(SystemClock),
        }
    }
}

impl std::fmt::Debug for AgentConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentConfig")
            .field("name", &self.name)
            .field("owner_idle", &self.owner_idle)
            .field("retry", &self.retry)
            .field("tool_timeout", &self.tool_timeout)
            .field("max_model_calls", &self.max_model_calls)
            .field("offered_tools", &self.offered_tools)
            .finish_non_exhaustive()
    }
}

/// When and how much to compact.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompactionPolicy {
    /// Estimated tokens of context above which older messages are summarised.
    pub budget_tokens: usize,
    /// Most recent messages always kept verbatim.
    pub keep_recent: usize,
}

impl Default for CompactionPolicy {
    fn default() -> Self {
        Self {
            budget_tokens: 96_000,
            keep_recent: 8,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_and_is_capped() {
        let policy = RetryPolicy {
            max_attempts: 10,
            initial_delay: Duration::from_millis(100),
            max_delay: Duration::from_secs(1),
        };
        let delays: Vec<_> = (2..=7)
            .map(|attempt| policy.delay(attempt, None).as_millis())
            .collect();
        assert_eq!(delays, vec![100, 200, 400, 800, 1000, 1000]);
    }

    #[test]
    fn retry_after_is_honoured_within_the_cap() {
        let policy = RetryPolicy::default();
        assert_eq!(
            policy.delay(2, Some(Duration::from_secs(3))),
            Duration::from_secs(3)
        );
        assert_eq!(
            policy.delay(2, Some(Duration::from_secs(300))),
            policy.max_delay
        );
        assert_eq!(policy.delay(2, Some(Duration::ZERO)), policy.initial_delay);
    }
}
