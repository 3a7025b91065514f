//! `--approve`, `--approve-tool` and `--approve-command`: which tool calls wait for a
//! person's approval (`shiitake-ext-approval`, `docs/ext-approval.md`).

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

/// `policy` with the `--approve-command` rules after its own (each `PATTERN=ruling` on
/// the commands `commands__exec` runs, in order, the later winning a tie).
pub fn with_commands(policy: Policy, rules: &[String]) -> Result<Policy, CliError> {
    rules.iter().try_fold(policy, |policy, rule| {
        let rule = rule
            .parse()
            .map_err(|error| CliError::Setup(format!("--approve-command {rule:?}: {error}")))?;
        policy
            .with_command(rule)
            .map_err(|error| CliError::Setup(format!("--approve-command: {error}")))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_rules_come_from_approve_command() {
        use shiitake_ext_approval::command::Command;
        let policy = with_commands(
            policy(None, &[]).unwrap(),
            &["cargo test*=allow".into(), "git push*=deny".into()],
        )
        .unwrap();
        let ruling = |line: &str| {
            policy
                .decide_call("commands__exec", false, Some(&Command::Line(line.into())))
                .ruling
        };
        assert_eq!(ruling("cargo test -p x"), Ruling::Allow);
        assert_eq!(ruling("git push origin"), Ruling::Deny);
        assert_eq!(ruling("npm install"), Ruling::Ask);
        let refused = with_commands(Policy::asks_before_edits(), &["cargo test".into()])
            .unwrap_err()
            .to_string();
        assert!(
            refused.contains("--approve-command \"cargo test\""),
            "{refused}"
        );
        let long = format!("{}=allow", "a".repeat(257));
        assert!(with_commands(Policy::asks_before_edits(), &[long]).is_err());
    }

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
