//! `--approve` and `--approve-tool`: which tool calls wait for a person's approval
//! (`shiitake-ext-approval`, `docs/ext-approval.md`).

use shiitake_ext_approval::policy::{Policy, Ruling};

use crate::error::CliError;

/// `--approve`: what happens before a tool not marked safe to repeat runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Approve {
    /// A person decides first.
    Ask,
    /// It runs without asking.
    Allow,
}

/// The policy of `--approve` and the `--approve-tool` rules (each `PATTERN=ruling`, in
/// order, the later winning a tie). Without `--approve`, the Local default: ask before
/// the file tools that edit, allow the rest; the rules then come after those.
pub fn policy(approve: Option<Approve>, rules: &[String]) -> Result<Policy, CliError> {
    let base = match approve {
        None => Policy::asks_before_edits(),
        Some(Approve::Ask) => Policy::new(Ruling::Ask),
        Some(Approve::Allow) => Policy::new(Ruling::Allow),
    };
    rules.iter().try_fold(base, |policy, rule| {
        let rule = rule
            .parse()
            .map_err(|error| CliError::Setup(format!("--approve-tool {rule:?}: {error}")))?;
        policy
            .with(rule)
            .map_err(|error| CliError::Setup(format!("--approve-tool: {error}")))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flags_make_the_policy() {
        let default = policy(None, &[]).unwrap();
        assert_eq!(default, Policy::asks_before_edits());
        assert_eq!(default.decide("files__edit", false).ruling, Ruling::Ask);
        assert_eq!(
            default.decide("env__mcp__notes__add", false).ruling,
            Ruling::Allow
        );
        let asks = policy(Some(Approve::Ask), &["env__mcp__notes__*=allow".into()]).unwrap();
        assert_eq!(
            asks.decide("env__mcp__notes__add", false).ruling,
            Ruling::Allow
        );
        assert_eq!(
            asks.decide("env__computers__box__run", false).ruling,
            Ruling::Ask
        );
        assert_eq!(asks.decide("files__read", true).ruling, Ruling::Allow);
        let allows = policy(Some(Approve::Allow), &[]).unwrap();
        assert_eq!(allows.decide("files__edit", false).ruling, Ruling::Allow);
        let refused = policy(None, &["files__edit".into()])
            .unwrap_err()
            .to_string();
        assert!(
            refused.contains("--approve-tool \"files__edit\""),
            "{refused}"
        );
    }
}
