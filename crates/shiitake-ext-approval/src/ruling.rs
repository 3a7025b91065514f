//! What a rule says (allow, ask, deny), why a rule cannot be read, the bounds on rules,
//! and the `*` matcher: what the rules on tools (`policy.rs`) and on commands
//! (`command.rs`) share.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// Longest pattern, in bytes (a provider tool name is at most 64).
pub const MAX_PATTERN_BYTES: usize = 128;
/// Most rules one policy holds.
pub const MAX_RULES: usize = 256;

/// What the host's policy says about one tool.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Ruling {
    /// Run it without asking.
    Allow,
    /// Ask a person first.
    Ask,
    /// Never run it.
    Deny,
}

impl Ruling {
    /// The word of a rule: `allow`, `ask`, `deny`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Allow => "allow",
            Self::Ask => "ask",
            Self::Deny => "deny",
        }
    }
}

impl fmt::Display for Ruling {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Ruling {
    type Err = PolicyError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "allow" => Ok(Self::Allow),
            "ask" => Ok(Self::Ask),
            "deny" => Ok(Self::Deny),
            other => Err(PolicyError::Ruling(other.to_owned())),
        }
    }
}

/// Why a policy or one of its rules could not be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    /// The pattern is empty.
    #[error("an empty tool pattern")]
    Empty,
    /// The pattern is longer than [`MAX_PATTERN_BYTES`].
    #[error("the tool pattern is longer than {MAX_PATTERN_BYTES} bytes")]
    TooLong,
    /// A character no tool name holds.
    #[error(
        "the tool pattern {pattern:?} holds {found:?}: a tool name is letters, digits, `_` and `-`, and `*` stands for any run of them"
    )]
    Character {
        /// The pattern.
        pattern: String,
        /// The character.
        found: char,
    },
    /// A rule without `=`.
    #[error("expected PATTERN=allow|ask|deny, got {0:?}")]
    Rule(String),
    /// A ruling other than the three.
    #[error("expected allow, ask or deny, got {0:?}")]
    Ruling(String),
    /// A command pattern longer than [`MAX_COMMAND_PATTERN_BYTES`].
    #[error("the command pattern is longer than {MAX_COMMAND_PATTERN_BYTES} bytes")]
    CommandTooLong,
    /// A control character in a command pattern.
    #[error("the command pattern holds the control character {found:?}")]
    CommandCharacter {
        /// The character.
        found: char,
    },
    /// More rules than [`MAX_RULES`].
    #[error("more than {MAX_RULES} rules")]
    TooManyRules,
}

/// Longest command pattern, in bytes.
pub const MAX_COMMAND_PATTERN_BYTES: usize = 256;

/// Matches `pattern` (with `*`) against `text` in linear time and constant space:
/// the classic greedy match that backs up to the last `*` on a mismatch.
pub(crate) fn glob(pattern: &[u8], text: &[u8]) -> bool {
    let (mut p, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        if p < pattern.len() && pattern[p] == b'*' {
            star = Some((p, t));
            p += 1;
        } else if p < pattern.len() && pattern[p] == text[t] {
            p += 1;
            t += 1;
        } else if let Some((star_p, star_t)) = star {
            // The last `*` takes one more character; try again after it.
            p = star_p + 1;
            t = star_t + 1;
            star = Some((star_p, star_t + 1));
        } else {
            return false;
        }
    }
    pattern[p..].iter().all(|b| *b == b'*')
}
