//! The host's policy: per tool name or pattern, allow, ask or deny.
//!
//! A rule is `PATTERN=allow|ask|deny`, where a pattern is a provider tool name
//! (`files__apply_patch`) in which `*` stands for any run of characters, `__` included
//! (`env__mcp__notes__*`, `*__files__edit`). The rule that decides a tool is the most
//! specific one that matches it: a name without `*` beats any pattern; among patterns,
//! the one with more characters besides `*`; among equals, the one given last. A tool
//! no rule matches is allowed when it is marked safe to repeat (read-only tools are),
//! and otherwise gets the policy's default.
//!
//! ```
//! use shiitake_ext_approval::policy::{Policy, Ruling};
//!
//! let policy = Policy::parse(Ruling::Ask, ["env__mcp__notes__*=allow", "files__read=deny"])?;
//! assert_eq!(policy.decide("env__mcp__notes__create", false).ruling, Ruling::Allow);
//! assert_eq!(policy.decide("files__read", true).ruling, Ruling::Deny);
//! assert_eq!(policy.decide("files__grep", true).ruling, Ruling::Allow); // safe to repeat
//! assert_eq!(policy.decide("env__computers__box__run", false).ruling, Ruling::Ask);
//! # Ok::<(), shiitake_ext_approval::policy::PolicyError>(())
//! ```

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::ruling::glob;
pub use crate::ruling::{MAX_PATTERN_BYTES, MAX_RULES, PolicyError, Ruling};

/// A tool name in which `*` stands for any run of characters.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Pattern(String);

impl Pattern {
    /// Reads a pattern: 1 to [`MAX_PATTERN_BYTES`] bytes of letters, digits, `_`, `-`
    /// and `*`.
    pub fn new(text: &str) -> Result<Self, PolicyError> {
        if text.is_empty() {
            return Err(PolicyError::Empty);
        }
        if text.len() > MAX_PATTERN_BYTES {
            return Err(PolicyError::TooLong);
        }
        if let Some(found) = text
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '*')))
        {
            return Err(PolicyError::Character {
                pattern: text.to_owned(),
                found,
            });
        }
        Ok(Self(text.to_owned()))
    }

    /// The pattern as written.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether it names one tool (no `*`).
    pub fn is_exact(&self) -> bool {
        !self.0.contains('*')
    }

    /// How many of its characters are not `*`: the more, the more specific.
    pub fn literal_len(&self) -> usize {
        self.0.bytes().filter(|b| *b != b'*').count()
    }

    /// Whether `tool` matches: each `*` takes any run of characters, `__` included.
    pub fn matches(&self, tool: &str) -> bool {
        glob(self.0.as_bytes(), tool.as_bytes())
    }
}

impl TryFrom<String> for Pattern {
    type Error = PolicyError;

    fn try_from(text: String) -> Result<Self, Self::Error> {
        Self::new(&text)
    }
}

impl From<Pattern> for String {
    fn from(pattern: Pattern) -> Self {
        pattern.0
    }
}

impl fmt::Display for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// One rule of a policy: `PATTERN=ruling`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Rule {
    /// Which tools.
    pub pattern: Pattern,
    /// What for them.
    pub ruling: Ruling,
}

impl FromStr for Rule {
    type Err = PolicyError;

    /// Reads `PATTERN=allow|ask|deny`, as `serve --approve-tool` takes it.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let (pattern, ruling) = text
            .split_once('=')
            .ok_or_else(|| PolicyError::Rule(text.to_owned()))?;
        Ok(Self {
            pattern: Pattern::new(pattern.trim())?,
            ruling: ruling.trim().parse()?,
        })
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}={}", self.pattern, self.ruling)
    }
}

/// Why a tool got its ruling: what a person is shown beside the question.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Because {
    /// The rule with this pattern decided.
    Rule {
        /// The rule's pattern.
        pattern: Pattern,
    },
    /// No rule matched and the tool is marked safe to repeat.
    SafeToRepeat,
    /// No rule matched: the policy's default for tools with side effects.
    Default,
    /// A command rule decided the call's command (`command.rs`).
    Command {
        /// The simple command it decided.
        command: String,
        /// The rule's pattern.
        pattern: crate::command::CommandPattern,
    },
    /// Every command of the call only reads (the built-in list).
    ReadOnly {
        /// The command line.
        command: String,
    },
    /// The call's command cannot be read without running it, so no command rule allows it.
    Unreadable {
        /// What could not be read.
        reason: String,
    },
}

/// A policy's answer for one tool.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decided {
    /// Allow, ask or deny.
    pub ruling: Ruling,
    /// Which rule, or which default.
    pub because: Because,
}

impl Decided {
    /// Why, in words: `the host asks before files__apply_patch (files__*=ask)`.
    pub fn why(&self, tool: &str) -> String {
        let verb = match self.ruling {
            Ruling::Allow => "allows",
            Ruling::Ask => "asks before",
            Ruling::Deny => "does not allow",
        };
        match &self.because {
            Because::Rule { pattern } if pattern.as_str() == tool => {
                format!("the host {verb} {tool}")
            }
            Because::Rule { pattern } => {
                format!("the host {verb} {tool} ({pattern}={})", self.ruling)
            }
            Because::SafeToRepeat => format!("{tool} is marked safe to repeat"),
            Because::Default => {
                format!("the host {verb} every tool not marked safe to repeat")
            }
            Because::Command { command, pattern } => {
                format!("the host {verb} `{command}` ({pattern}={})", self.ruling)
            }
            Because::ReadOnly { command } => format!("`{command}` only reads"),
            Because::Unreadable { reason } => {
                format!("the command holds {reason}, which cannot be judged without running it")
            }
        }
    }
}

/// The host's rules and its default for tools with side effects.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Policy {
    /// The rules, in the order given (a later one wins a tie).
    pub rules: Vec<Rule>,
    /// What a tool no rule matches gets, unless it is safe to repeat.
    pub default: Ruling,
    /// The rules on commands (`command.rs`), in the order given.
    #[serde(default)]
    pub commands: Vec<crate::command::CommandRule>,
}

impl Default for Policy {
    /// The Local default: [`Policy::asks_before_edits`].
    fn default() -> Self {
        Self::asks_before_edits()
    }
}

/// The file tools that change files, as Home and Knapsack name them, on the workspace
/// (`files__*`) and on another Computer (`*__files__*`), and Home's command tool, which
/// can change anything in a Computer's root (docs/commands.md).
const EDIT_PATTERNS: [&str; 5] = [
    "files__edit",
    "files__apply_patch",
    "*__files__edit",
    "*__files__apply_patch",
    "commands__exec",
];

impl Policy {
    /// A policy of `default` and no rules.
    pub fn new(default: Ruling) -> Self {
        Self {
            rules: Vec::new(),
            default,
            commands: Vec::new(),
        }
    }

    /// Asks before the file tools that change files and before commands, and allows
    /// everything else: what `shiitake serve` does unless told otherwise.
    pub fn asks_before_edits() -> Self {
        Self {
            rules: EDIT_PATTERNS
                .iter()
                .map(|pattern| Rule {
                    pattern: Pattern(pattern.to_string()),
                    ruling: Ruling::Ask,
                })
                .collect(),
            default: Ruling::Allow,
            commands: Vec::new(),
        }
    }

    /// `default` and the rules read from `rules` (each `PATTERN=ruling`), in order.
    pub fn parse<'a>(
        default: Ruling,
        rules: impl IntoIterator<Item = &'a str>,
    ) -> Result<Self, PolicyError> {
        let mut policy = Self::new(default);
        for rule in rules {
            policy = policy.with(rule.parse()?)?;
        }
        Ok(policy)
    }

    /// This policy with `rule` after its rules (so it wins a tie).
    pub fn with(mut self, rule: Rule) -> Result<Self, PolicyError> {
        if self.rules.len() >= MAX_RULES {
            return Err(PolicyError::TooManyRules);
        }
        self.rules.push(rule);
        Ok(self)
    }

    /// The ruling for `tool`; `safe_to_repeat` when the tool is marked replay-safe.
    pub fn decide(&self, tool: &str, safe_to_repeat: bool) -> Decided {
        let best = self
            .rules
            .iter()
            .filter(|rule| rule.pattern.matches(tool))
            // `max_by_key` keeps the last of equals: a later rule wins a tie.
            .max_by_key(|rule| (rule.pattern.is_exact(), rule.pattern.literal_len()));
        match best {
            Some(rule) => Decided {
                ruling: rule.ruling,
                because: Because::Rule {
                    pattern: rule.pattern.clone(),
                },
            },
            None if safe_to_repeat => Decided {
                ruling: Ruling::Allow,
                because: Because::SafeToRepeat,
            },
            None => Decided {
                ruling: self.default,
                because: Because::Default,
            },
        }
    }

    /// This policy with the command rule `rule` after its command rules.
    pub fn with_command(mut self, rule: crate::command::CommandRule) -> Result<Self, PolicyError> {
        if self.commands.len() >= MAX_RULES {
            return Err(PolicyError::TooManyRules);
        }
        self.commands.push(rule);
        Ok(self)
    }

    /// The ruling for a call of `tool` carrying `command`: for a tool that runs
    /// commands ([`crate::command::COMMAND_TOOLS`]) the command rules judge each of its
    /// simple commands (`command.rs`), and the tool's own ruling decides what they do
    /// not; a tool rule that denies the tool outright still denies. Any other call is
    /// [`decide`](Self::decide)'s.
    pub fn decide_call(
        &self,
        tool: &str,
        safe_to_repeat: bool,
        command: Option<&crate::command::Command>,
    ) -> Decided {
        use crate::command::{COMMAND_TOOLS, Judged, judge};
        let by_tool = self.decide(tool, safe_to_repeat);
        let Some(command) = command.filter(|_| COMMAND_TOOLS.contains(&tool)) else {
            return by_tool;
        };
        if by_tool.ruling == Ruling::Deny && matches!(by_tool.because, Because::Rule { .. }) {
            return by_tool;
        }
        match judge(&self.commands, command) {
            Judged::Ruled {
                ruling,
                command: shown,
                pattern,
            } => Decided {
                ruling,
                because: match pattern {
                    Some(pattern) => Because::Command {
                        command: shown,
                        pattern,
                    },
                    None => Because::ReadOnly {
                        command: command.to_string(),
                    },
                },
            },
            Judged::Unjudged { strictest, .. } => match strictest {
                Some((ruling, shown, pattern)) if ruling > by_tool.ruling => Decided {
                    ruling,
                    because: Because::Command {
                        command: shown,
                        pattern,
                    },
                },
                _ => by_tool,
            },
            Judged::Unreadable(reason) => {
                // With a command denied by rule, a line that hides what it runs asks.
                let floor = if self.commands.iter().any(|rule| rule.ruling == Ruling::Deny) {
                    Ruling::Ask
                } else {
                    Ruling::Allow
                };
                Decided {
                    ruling: by_tool.ruling.max(floor),
                    because: Because::Unreadable { reason },
                }
            }
        }
    }

    /// `default ask; files__edit=ask, …`: the policy in one line, for a start-up line.
    pub fn describe(&self) -> String {
        let rules: Vec<String> = self
            .rules
            .iter()
            .map(Rule::to_string)
            .chain(self.commands.iter().map(|rule| format!("command {rule}")))
            .collect();
        if rules.is_empty() {
            format!(
                "{} before every tool not marked safe to repeat",
                self.default
            )
        } else {
            format!(
                "{} before every tool not marked safe to repeat, except {}",
                self.default,
                rules.join(", ")
            )
        }
    }
}

#[cfg(test)]
mod tests;
