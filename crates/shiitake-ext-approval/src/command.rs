//! Rules on the commands a Computer runs (`commands__exec`), beside the rules on tools:
//! `cargo test*=allow`, `git push*=ask`, `rm -rf*=deny`.
//!
//! A command pattern is matched against each simple command of the call (its words
//! joined by single spaces: `shell.rs` splits a shell line; an argv is its words), `*`
//! standing for any run of characters. The rule that decides a simple command is the
//! most specific that matches, as for tools: a pattern without `*` beats any other,
//! then the one with more characters besides `*`, then the one given last. A simple
//! command no rule matches is allowed when it is on the built-in list of commands that
//! only read ([`read_only`]); otherwise the tool's own ruling decides it. A line is
//! as strict as its strictest simple command: `git status; rm -rf x` is not allowed by
//! `git status*=allow`. A line that cannot be read without running it (an expansion, a
//! redirection to a file, a subshell: `shell.rs`) is never allowed by a command rule.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

pub use crate::ruling::MAX_COMMAND_PATTERN_BYTES;
use crate::ruling::{PolicyError, Ruling, glob};
use crate::shell::{self, Words};

/// The tools whose calls carry a command (`command`, a shell line, or `argv`).
pub const COMMAND_TOOLS: [&str; 1] = ["commands__exec"];

/// A command line in which `*` stands for any run of characters.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct CommandPattern(String);

impl CommandPattern {
    /// Reads a pattern: 1 to [`MAX_COMMAND_PATTERN_BYTES`] bytes, no control character.
    pub fn new(text: &str) -> Result<Self, PolicyError> {
        if text.is_empty() {
            return Err(PolicyError::Empty);
        }
        if text.len() > MAX_COMMAND_PATTERN_BYTES {
            return Err(PolicyError::CommandTooLong);
        }
        if let Some(found) = text.chars().find(|c| c.is_control()) {
            return Err(PolicyError::CommandCharacter { found });
        }
        Ok(Self(text.to_owned()))
    }

    /// The pattern as written.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    fn is_exact(&self) -> bool {
        !self.0.contains('*')
    }

    fn literal_len(&self) -> usize {
        self.0.bytes().filter(|b| *b != b'*').count()
    }

    /// Whether the simple command `words` matches.
    pub fn matches(&self, words: &[String]) -> bool {
        glob(self.0.as_bytes(), words.join(" ").as_bytes())
    }
}

impl TryFrom<String> for CommandPattern {
    type Error = PolicyError;

    fn try_from(text: String) -> Result<Self, Self::Error> {
        Self::new(&text)
    }
}

impl From<CommandPattern> for String {
    fn from(pattern: CommandPattern) -> Self {
        pattern.0
    }
}

impl fmt::Display for CommandPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// One command rule: `PATTERN=ruling`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CommandRule {
    /// Which commands.
    pub pattern: CommandPattern,
    /// What for them.
    pub ruling: Ruling,
}

impl FromStr for CommandRule {
    type Err = PolicyError;

    /// Reads `PATTERN=allow|ask|deny`, as `serve --approve-command` takes it; the ruling
    /// is after the last `=` (a pattern may hold one: `make V=1*=allow`).
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let (pattern, ruling) = text
            .rsplit_once('=')
            .ok_or_else(|| PolicyError::Rule(text.to_owned()))?;
        Ok(Self {
            pattern: CommandPattern::new(pattern.trim())?,
            ruling: ruling.trim().parse()?,
        })
    }
}

impl fmt::Display for CommandRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}={}", self.pattern, self.ruling)
    }
}

/// The command a call carries.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Command {
    /// A shell line.
    Line(String),
    /// A program and its arguments.
    Argv(Vec<String>),
}

impl Command {
    /// The command in a call's arguments (`command` or `argv`), if it has one.
    pub fn from_arguments(arguments: &Map<String, Value>) -> Option<Self> {
        if let Some(Value::String(line)) = arguments.get("command") {
            return Some(Self::Line(line.clone()));
        }
        let argv = arguments.get("argv")?.as_array()?;
        argv.iter()
            .map(|word| word.as_str().map(str::to_owned))
            .collect::<Option<Vec<_>>>()
            .map(Self::Argv)
    }

    /// Its simple commands.
    fn simple(&self) -> Result<Vec<Words>, shell::Unreadable> {
        match self {
            Self::Line(line) => shell::split(line),
            Self::Argv(argv) if argv.is_empty() => Err(shell::Unreadable("an empty argv".into())),
            Self::Argv(argv) => Ok(vec![argv.clone()]),
        }
    }
}

impl fmt::Display for Command {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Line(line) => f.write_str(line),
            Self::Argv(argv) => f.write_str(&argv.join(" ")),
        }
    }
}

/// Commands that only read, allowed without a rule: the program, and for `git` its
/// subcommand. An argument that makes one of them write (`--output`) takes it off.
const READ_ONLY: &[&str] = &[
    "ls", "pwd", "cat", "head", "tail", "wc", "echo", "true", "false", "stat", "file", "which",
    "whoami", "date", "uname", "id", "du", "df", "grep", "basename", "dirname", "realpath",
    "printf", "diff", "cmp", "env", "tree",
];

/// `git` subcommands that only read.
const GIT_READ_ONLY: &[&str] = &["status", "diff", "log", "show", "blame", "rev-parse"];

/// Whether the simple command `words` is on the built-in list of commands that only read.
pub fn read_only(words: &[String]) -> bool {
    let Some(program) = words.first() else {
        return false;
    };
    let writes = |word: &String| word.starts_with("--output") || word.starts_with("--ext-diff");
    if program == "git" {
        return words
            .get(1)
            .is_some_and(|sub| GIT_READ_ONLY.contains(&sub.as_str()))
            && !words.iter().any(writes);
    }
    // `env` with arguments runs a command; alone it prints.
    if program == "env" {
        return words.len() == 1;
    }
    READ_ONLY.contains(&program.as_str())
}

/// What "allow for this Session" of `command` allows: each of its simple commands
/// exactly, its words joined by single spaces; a line that cannot be read, the line
/// itself. Never a prefix: `cargo test --lib` allowed leaves `cargo test --all` asking
/// (a host rule, `cargo test*=allow`, is for prefixes).
pub fn session_commands(command: &Command) -> Vec<String> {
    match command.simple() {
        Ok(simple) if !simple.is_empty() => {
            let mut shown: Vec<String> = simple.iter().map(|words| words.join(" ")).collect();
            shown.sort();
            shown.dedup();
            shown
        }
        _ => vec![command.to_string()],
    }
}

/// Whether a Session that allowed the commands `allowed` ([`session_commands`]) runs
/// `command` without asking: every simple command of it is allowed there, allowed by a
/// rule of `rules`, or only reads; an unreadable line only when it was allowed itself.
pub fn allowed_by_session(
    rules: &[CommandRule],
    allowed: &std::collections::BTreeSet<String>,
    command: &Command,
) -> bool {
    match command.simple() {
        Ok(simple) if !simple.is_empty() => simple.iter().all(|words| {
            allowed.contains(&words.join(" "))
                || best_rule(rules, words)
                    .map_or_else(|| read_only(words), |rule| rule.ruling == Ruling::Allow)
        }),
        _ => allowed.contains(&command.to_string()),
    }
}

/// The most specific rule of `rules` matching the simple command `words` (exact beats
/// `*`, then more characters; a later rule wins a tie).
fn best_rule<'a>(rules: &'a [CommandRule], words: &[String]) -> Option<&'a CommandRule> {
    rules
        .iter()
        .filter(|rule| rule.pattern.matches(words))
        .max_by_key(|rule| (rule.pattern.is_exact(), rule.pattern.literal_len()))
}

/// What the command rules say of one call's command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Judged {
    /// Every simple command was judged, by a rule or the read-only list: the strictest
    /// ruling, the command that had it, and the rule (`None`: the read-only list).
    Ruled {
        /// The strictest ruling.
        ruling: Ruling,
        /// The simple command that had it.
        command: String,
        /// The rule that gave it; `None` when the command only reads.
        pattern: Option<CommandPattern>,
    },
    /// Some simple command no rule judged: the tool's own ruling decides it; `denied`
    /// is a command of the line a rule denies, if any.
    Unjudged {
        /// A simple command that no rule or list judged.
        command: String,
        /// The strictest ruling the rules gave the others, with its command and rule.
        strictest: Option<(Ruling, String, CommandPattern)>,
    },
    /// The line cannot be read without running it.
    Unreadable(String),
}

/// Judges `command` by `rules` (in the order given; a later rule wins a tie).
pub fn judge(rules: &[CommandRule], command: &Command) -> Judged {
    let simple = match command.simple() {
        Ok(simple) => simple,
        Err(unreadable) => return Judged::Unreadable(unreadable.0),
    };
    let mut strictest: Option<(Ruling, String, Option<CommandPattern>)> = None;
    let mut unjudged: Option<String> = None;
    for words in &simple {
        let shown = words.join(" ");
        let (ruling, pattern) = match best_rule(rules, words) {
            Some(rule) => (rule.ruling, Some(rule.pattern.clone())),
            None if read_only(words) => (Ruling::Allow, None),
            None => {
                unjudged.get_or_insert(shown);
                continue;
            }
        };
        if strictest.as_ref().is_none_or(|(known, ..)| ruling > *known) {
            strictest = Some((ruling, shown, pattern));
        }
    }
    match (unjudged, strictest) {
        (None, Some((ruling, command, pattern))) => Judged::Ruled {
            ruling,
            command,
            pattern,
        },
        (Some(command), strictest) => Judged::Unjudged {
            command,
            strictest: strictest.and_then(|(ruling, shown, pattern)| {
                pattern.map(|pattern| (ruling, shown, pattern))
            }),
        },
        (None, None) => Judged::Unreadable("no command".to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn rules(texts: &[&str]) -> Vec<CommandRule> {
        texts.iter().map(|text| text.parse().unwrap()).collect()
    }

    fn line(text: &str) -> Command {
        Command::Line(text.to_owned())
    }

    fn ruling(rules: &[CommandRule], text: &str) -> Option<Ruling> {
        match judge(rules, &line(text)) {
            Judged::Ruled { ruling, .. } => Some(ruling),
            _ => None,
        }
    }

    #[test]
    fn the_most_specific_rule_decides_each_command_and_the_strictest_the_line() {
        let rules = rules(&[
            "cargo test*=allow",
            "git push*=ask",
            "rm -rf*=deny",
            "cargo test --release=deny",
        ]);
        assert_eq!(ruling(&rules, "cargo test --all"), Some(Ruling::Allow));
        assert_eq!(ruling(&rules, "cargo test --release"), Some(Ruling::Deny));
        assert_eq!(ruling(&rules, "git push origin main"), Some(Ruling::Ask));
        assert_eq!(ruling(&rules, "cargo test && git push"), Some(Ruling::Ask));
        assert_eq!(
            ruling(&rules, "git status; rm -rf target"),
            Some(Ruling::Deny)
        );
        // Quotes do not hide a command from its rule.
        assert_eq!(ruling(&rules, "'rm' '-rf' x"), Some(Ruling::Deny));
        // Only reads: allowed without a rule.
        assert_eq!(ruling(&rules, "ls -la; git diff HEAD"), Some(Ruling::Allow));
        assert_eq!(
            judge(&rules, &line("git status; make install")),
            Judged::Unjudged {
                command: "make install".to_owned(),
                strictest: None,
            }
        );
        assert!(matches!(
            judge(&rules, &line("cargo test $(rm -rf /)")),
            Judged::Unreadable(_)
        ));
        assert_eq!(
            judge(
                &rules,
                &Command::Argv(vec!["rm".into(), "-rf".into(), "/".into()])
            ),
            Judged::Ruled {
                ruling: Ruling::Deny,
                command: "rm -rf /".to_owned(),
                pattern: Some(CommandPattern::new("rm -rf*").unwrap()),
            }
        );
    }

    #[test]
    fn the_read_only_list_does_not_take_a_command_that_writes() {
        let words = |text: &str| shell::split(text).unwrap().remove(0);
        assert!(read_only(&words("git status")));
        assert!(read_only(&words("git diff HEAD~1")));
        assert!(!read_only(&words("git diff --output=patch")));
        assert!(!read_only(&words("git push")));
        assert!(!read_only(&words("git")));
        assert!(!read_only(&words("env rm -rf x")));
        assert!(read_only(&words("env")));
        assert!(!read_only(&words("rm x")));
    }

    #[test]
    fn command_patterns_are_bounded_at_their_edge_and_one_past() {
        let at = "a".repeat(MAX_COMMAND_PATTERN_BYTES);
        assert!(CommandPattern::new(&at).is_ok());
        assert_eq!(
            CommandPattern::new(&format!("{at}a")),
            Err(PolicyError::CommandTooLong)
        );
        assert_eq!(CommandPattern::new(""), Err(PolicyError::Empty));
        assert_eq!(
            CommandPattern::new("ls\n"),
            Err(PolicyError::CommandCharacter { found: '\n' })
        );
        let rule: CommandRule = "make V=1*=allow".parse().unwrap();
        assert_eq!(rule.pattern.as_str(), "make V=1*");
        assert!("no ruling".parse::<CommandRule>().is_err());
        assert!("ls=maybe".parse::<CommandRule>().is_err());
    }

    proptest! {
        #[test]
        fn a_prefix_rule_matches_exactly_the_commands_that_begin_with_it(
            prefix in "[a-z]{1,5}( [a-z-]{1,5}){0,2}",
            words in proptest::collection::vec("[a-z-]{1,5}", 1..5),
        ) {
            let rule: CommandRule = format!("{prefix}*=allow").parse().unwrap();
            let joined = words.join(" ");
            prop_assert_eq!(rule.pattern.matches(&words), joined.starts_with(&prefix));
        }

        #[test]
        fn a_denied_command_denies_every_line_it_is_in(
            before in proptest::collection::vec("[a-z]{1,5}x", 0..3),
            after in proptest::collection::vec("[a-z]{1,5}x", 0..3),
            separator in prop_oneof![Just("; "), Just(" && "), Just(" || "), Just(" | ")],
        ) {
            let rules = rules(&["*=allow", "rm -rf*=deny"]);
            let mut parts: Vec<String> = before;
            parts.push("rm -rf target".to_owned());
            parts.extend(after);
            let text = parts.join(separator);
            prop_assert_eq!(ruling(&rules, &text), Some(Ruling::Deny), "{}", text);
        }

        #[test]
        fn a_session_allows_a_line_exactly_when_it_allowed_each_of_its_commands(
            commands in proptest::collection::vec("[a-z]{1,4}x( [a-z0-9-]{1,4}){0,2}", 1..5),
            allowed_mask in proptest::collection::vec(any::<bool>(), 5),
            separator in prop_oneof![Just("; "), Just(" && "), Just(" || "), Just(" | "), Just("\n")],
        ) {
            // Every allowed command, taken from a line that had it, allows it again.
            let line = Command::Line(commands.join(separator));
            let every: std::collections::BTreeSet<String> =
                session_commands(&line).into_iter().collect();
            prop_assert!(allowed_by_session(&[], &every, &line));
            // With some left out, the line runs only when every one of its commands is in.
            let allowed: std::collections::BTreeSet<String> = commands
                .iter()
                .zip(&allowed_mask)
                .filter(|(_, keep)| **keep)
                .map(|(command, _)| command.clone())
                .collect();
            let all_in = commands.iter().all(|command| allowed.contains(command));
            prop_assert_eq!(allowed_by_session(&[], &allowed, &line), all_in);
        }
    }
}
