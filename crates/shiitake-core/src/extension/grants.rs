//! What the host allows an extension to use.

use std::collections::BTreeSet;
use std::fmt;

/// One capability the host can grant an extension.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Grant {
    /// Read and write its namespaced collections.
    State,
    /// Use the file port the host hands it, and offer the tools over that port to runs
    /// (its tool module is offered with `files` alone when the host handed a port).
    Files,
    /// Add a prompt section to runs.
    Prompt,
    /// Publish a projection in snapshots and frames.
    Projection,
    /// Receive human and program commands.
    Commands,
    /// Set and clear durable timers.
    Timers,
    /// Admit prompts through the accepted-command door.
    Admissions,
    /// Offer model-facing tools to runs.
    Tools,
    /// Raise and clear attention.
    Attention,
    /// Decide before each tool call of a run whether it runs, and hold it for a
    /// decision (`Extension::gate`).
    Gate,
}

impl fmt::Display for Grant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Grant::State => "state",
            Grant::Files => "files",
            Grant::Prompt => "prompt",
            Grant::Projection => "projection",
            Grant::Commands => "commands",
            Grant::Timers => "timers",
            Grant::Admissions => "admissions",
            Grant::Tools => "tools",
            Grant::Attention => "attention",
            Grant::Gate => "gate",
        })
    }
}

/// The set of grants of one extension; nothing is granted by default.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Grants(BTreeSet<Grant>);

impl Grants {
    /// No grant at all.
    pub fn none() -> Self {
        Self::default()
    }

    /// Every grant but `gate`: a gate holds every tool call of a run, so a host grants
    /// it by name (`Grants::all().with(Grant::Gate)`), never by accident.
    pub fn all() -> Self {
        use Grant::*;
        [
            State, Files, Prompt, Projection, Commands, Timers, Admissions, Tools, Attention,
        ]
        .into_iter()
        .collect()
    }

    /// These grants plus `grant`.
    #[must_use]
    pub fn with(mut self, grant: Grant) -> Self {
        self.0.insert(grant);
        self
    }

    /// These grants without `grant`.
    #[must_use]
    pub fn without(mut self, grant: Grant) -> Self {
        self.0.remove(&grant);
        self
    }

    /// Whether `grant` is held.
    pub fn has(&self, grant: Grant) -> bool {
        self.0.contains(&grant)
    }
}

impl FromIterator<Grant> for Grants {
    fn from_iter<I: IntoIterator<Item = Grant>>(iter: I) -> Self {
        Self(iter.into_iter().collect())
    }
}
