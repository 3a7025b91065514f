//! A shell line split into its simple commands, for rules that judge commands, not
//! only tools (`command.rs`).
//!
//! Only what can be read without running anything is read: words (unquoted,
//! `'single'`, `"double"` with `\` escapes, `\`-escaped characters), joined by `;`,
//! newlines, `&&`, `||`, `|` and `&`, and redirections to `/dev/null` or another
//! descriptor (`2>&1`), which write nothing. Anything else is [`Unreadable`] and is
//! never allowed by a command rule: an expansion (`$x`, `$(…)`, backticks), which can
//! run or become anything; a redirection to a file, which writes it; a subshell or a
//! group (`(…)`, `{ …; }`), a compound command (`if`, `for`, `while`, `case`, …), a
//! negation, a function; an assignment before a command (`LD_PRELOAD=… ls`); a glob or
//! a `~` in the command's name; a comment; an empty command between separators; an
//! unterminated quote.

use std::fmt;

/// One simple command: its words, quotes removed.
pub type Words = Vec<String>;

/// Why a line could not be read as simple commands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unreadable(pub String);

impl fmt::Display for Unreadable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

fn unreadable<T>(why: impl Into<String>) -> Result<T, Unreadable> {
    Err(Unreadable(why.into()))
}

/// Words that begin a compound command, a negation or a function in `sh`.
const KEYWORDS: &[&str] = &[
    "if", "then", "else", "elif", "fi", "for", "while", "until", "do", "done", "case", "esac",
    "in", "function", "select", "!", "[[", "]]", "time", "coproc",
];

/// The simple commands of `line`, in order.
pub fn split(line: &str) -> Result<Vec<Words>, Unreadable> {
    let mut reader = Reader {
        chars: line.chars().collect(),
        at: 0,
        commands: Vec::new(),
        words: Vec::new(),
        word: None,
        quoted: false,
    };
    reader.read()?;
    Ok(reader.commands)
}

struct Reader {
    chars: Vec<char>,
    at: usize,
    commands: Vec<Words>,
    /// The words of the command being read.
    words: Words,
    /// The word being read; `Some("")` after an empty quoted word (`''`).
    word: Option<String>,
    /// Whether the word being read has a quoted or escaped part.
    quoted: bool,
}

impl Reader {
    fn peek(&self, ahead: usize) -> Option<char> {
        self.chars.get(self.at + ahead).copied()
    }

    fn push(&mut self, c: char) {
        self.word.get_or_insert_with(String::new).push(c);
    }

    fn read(&mut self) -> Result<(), Unreadable> {
        while let Some(c) = self.peek(0) {
            self.at += 1;
            match c {
                ' ' | '\t' => self.end_word()?,
                '\n' | ';' => self.end_command(c)?,
                '&' | '|' => {
                    if self.peek(0) == Some(c) {
                        self.at += 1;
                    }
                    self.end_command(c)?;
                }
                '\'' => self.single()?,
                '"' => self.double()?,
                '\\' => match self.peek(0) {
                    Some('\n') => self.at += 1,
                    Some(next) => {
                        self.at += 1;
                        self.quoted = true;
                        self.push(next);
                    }
                    None => return unreadable("a line ending in `\\`"),
                },
                '$' => return unreadable("an expansion (`$`)"),
                '`' => return unreadable("a command substitution (backticks)"),
                '(' | ')' => return unreadable("a subshell (`(`…`)`)"),
                '>' | '<' => self.redirection(c)?,
                '#' if self.word.is_none() => return unreadable("a comment (`#`)"),
                other => self.push(other),
            }
        }
        self.end_command('\n')?;
        if self.commands.is_empty() {
            return unreadable("no command");
        }
        Ok(())
    }

    /// `'…'`: every character as it is, up to the next `'`.
    fn single(&mut self) -> Result<(), Unreadable> {
        self.quoted = true;
        self.word.get_or_insert_with(String::new);
        loop {
            match self.peek(0) {
                None => return unreadable("an unterminated `'`"),
                Some('\'') => {
                    self.at += 1;
                    return Ok(());
                }
                Some(c) => {
                    self.at += 1;
                    self.push(c);
                }
            }
        }
    }

    /// `"…"`: `\` escapes `"`, `\`, `$`, backtick and a newline; an unescaped `$` or
    /// backtick expands, so the line is unreadable.
    fn double(&mut self) -> Result<(), Unreadable> {
        self.quoted = true;
        self.word.get_or_insert_with(String::new);
        loop {
            match self.peek(0) {
                None => return unreadable("an unterminated `\"`"),
                Some('"') => {
                    self.at += 1;
                    return Ok(());
                }
                Some('$') => return unreadable("an expansion (`$`) in double quotes"),
                Some('`') => return unreadable("a command substitution in double quotes"),
                Some('\\') => {
                    self.at += 1;
                    match self.peek(0) {
                        Some(c @ ('"' | '\\' | '$' | '`')) => {
                            self.at += 1;
                            self.push(c);
                        }
                        Some('\n') => self.at += 1,
                        _ => self.push('\\'),
                    }
                }
                Some(c) => {
                    self.at += 1;
                    self.push(c);
                }
            }
        }
    }

    /// `[n]>target`, `[n]>>target`, `[n]<target`: only `&n` (another descriptor) and
    /// `/dev/null` write nothing and read nothing of the Computer's.
    fn redirection(&mut self, c: char) -> Result<(), Unreadable> {
        // A descriptor number just before it belongs to the redirection, not the words.
        if let Some(word) = &self.word {
            if !self.quoted && !word.is_empty() && word.chars().all(|d| d.is_ascii_digit()) {
                self.word = None;
            } else {
                self.end_word()?;
            }
        }
        if c == '>' && matches!(self.peek(0), Some('>' | '|')) {
            self.at += 1;
        }
        if self.peek(0) == Some('&') {
            self.at += 1;
            let start = self.at;
            while self.peek(0).is_some_and(|d| d.is_ascii_digit() || d == '-') {
                self.at += 1;
            }
            let ends = self
                .peek(0)
                .is_none_or(|d| matches!(d, ' ' | '\t' | '\n' | ';' | '&' | '|'));
            if self.at == start || !ends {
                return unreadable("a redirection to a file (`>&`)");
            }
            return Ok(());
        }
        while matches!(self.peek(0), Some(' ' | '\t')) {
            self.at += 1;
        }
        let start = self.at;
        while self
            .peek(0)
            .is_some_and(|d| !matches!(d, ' ' | '\t' | '\n' | ';' | '&' | '|' | '<' | '>'))
        {
            self.at += 1;
        }
        let target: String = self.chars[start..self.at].iter().collect();
        if target == "/dev/null" {
            Ok(())
        } else {
            unreadable(format!("a redirection to `{target}`"))
        }
    }

    fn end_word(&mut self) -> Result<(), Unreadable> {
        let Some(word) = self.word.take() else {
            return Ok(());
        };
        let quoted = std::mem::take(&mut self.quoted);
        if self.words.is_empty() && !quoted {
            if KEYWORDS.contains(&word.as_str()) || word == "{" || word == "}" {
                return unreadable(format!("a compound command (`{word}`)"));
            }
            if word.contains('=') {
                return unreadable(format!("an assignment before a command (`{word}`)"));
            }
            if word.contains(['*', '?', '[', '~']) {
                return unreadable(format!("a pattern as the command's name (`{word}`)"));
            }
        }
        self.words.push(word);
        Ok(())
    }

    fn end_command(&mut self, separator: char) -> Result<(), Unreadable> {
        self.end_word()?;
        let words = std::mem::take(&mut self.words);
        if words.is_empty() {
            // A blank line, or nothing after the last separator, is fine; an empty command
            // between separators is not.
            let at_end = self.chars[self.at..].iter().all(|c| c.is_whitespace());
            if separator == '\n' && (at_end || self.commands.is_empty()) {
                return Ok(());
            }
            if separator == ';' && at_end && !self.commands.is_empty() {
                return Ok(());
            }
            return unreadable(format!("an empty command before `{separator}`"));
        }
        self.commands.push(words);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn words(line: &str) -> Vec<Vec<&'static str>> {
        split(line)
            .unwrap_or_else(|error| panic!("{line:?}: {error}"))
            .into_iter()
            .map(|command| {
                command
                    .into_iter()
                    .map(|word| &*Box::leak(word.into_boxed_str()))
                    .collect()
            })
            .collect()
    }

    #[test]
    fn simple_commands_are_read_with_their_quotes_removed() {
        assert_eq!(words("ls -la"), [vec!["ls", "-la"]]);
        assert_eq!(
            words("git status; cargo test --all && echo 'all good' || echo \"bad \\\"x\\\"\""),
            [
                vec!["git", "status"],
                vec!["cargo", "test", "--all"],
                vec!["echo", "all good"],
                vec!["echo", "bad \"x\""],
            ]
        );
        assert_eq!(
            words("cat a | wc -l &"),
            [vec!["cat", "a"], vec!["wc", "-l"]]
        );
        assert_eq!(words("echo ''"), [vec!["echo", ""]]);
        assert_eq!(words("echo a\\ b"), [vec!["echo", "a b"]]);
        assert_eq!(words("cargo test 2>&1"), [vec!["cargo", "test"]]);
        assert_eq!(words("make >/dev/null 2> /dev/null"), [vec!["make"]]);
        assert_eq!(words("ls;\n"), [vec!["ls"]]);
        assert_eq!(words("ls *.rs"), [vec!["ls", "*.rs"]]);
    }

    #[test]
    fn what_cannot_be_read_without_running_it_is_unreadable() {
        for line in [
            "echo $(rm -rf x)",
            "echo `id`",
            "echo $HOME",
            "echo \"$HOME\"",
            "cat a > b",
            "cat a >> b",
            "sort < input",
            "ls >&2x",
            "(rm x)",
            "{ rm x; }",
            "if true; then rm x; fi",
            "for f in *; do rm $f; done",
            "! ls",
            "LD_PRELOAD=/x.so ls",
            "*.sh",
            "~/bin/tool",
            "# nothing",
            "ls;; rm x",
            "; ls",
            "ls && && rm",
            "echo 'open",
            "echo \"open",
            "echo \\",
            "",
            "   ",
        ] {
            assert!(
                split(line).is_err(),
                "{line:?} was read as {:?}",
                split(line)
            );
        }
    }

    /// A word of the safe alphabet, and how it is written: plain, in single or in
    /// double quotes, or with each character escaped.
    fn written_word() -> impl Strategy<Value = (String, String)> {
        ("[a-z0-9._/-]{1,8}", 0..4u8).prop_map(|(word, style)| {
            let written = match style {
                0 => word.clone(),
                1 => format!("'{word}'"),
                2 => format!("\"{word}\""),
                _ => word.chars().map(|c| format!("\\{c}")).collect(),
            };
            (word, written)
        })
    }

    fn command() -> impl Strategy<Value = (Vec<String>, String)> {
        // The name is plain letters, so it is never a keyword or an assignment.
        (
            "[a-z]{1,6}x",
            proptest::collection::vec(written_word(), 0..4),
        )
            .prop_map(|(name, args)| {
                let mut words = vec![name.clone()];
                let mut written = name;
                for (word, form) in args {
                    words.push(word);
                    written.push(' ');
                    written.push_str(&form);
                }
                (words, written)
            })
    }

    proptest! {
        #[test]
        fn a_line_of_simple_commands_splits_into_them(
            commands in proptest::collection::vec(command(), 1..5),
            separators in proptest::collection::vec(
                prop_oneof![Just("; "), Just(" && "), Just(" || "), Just(" | "), Just("\n"), Just(" & ")],
                5,
            ),
        ) {
            let mut line = String::new();
            for (index, (_, written)) in commands.iter().enumerate() {
                if index > 0 {
                    line.push_str(separators[index - 1]);
                }
                line.push_str(written);
            }
            let expected: Vec<Vec<String>> = commands.into_iter().map(|(words, _)| words).collect();
            prop_assert_eq!(split(&line), Ok(expected));
        }

        #[test]
        fn an_unquoted_substitution_anywhere_is_unreadable(
            (_, before) in command(),
            (_, after) in command(),
            inserted in prop_oneof![Just("$(rm x)"), Just("`rm x`"), Just("$X"), Just("> out")],
        ) {
            let line = format!("{before} {inserted} {after}");
            prop_assert!(split(&line).is_err(), "{line:?}");
        }

        #[test]
        fn any_line_is_read_or_refused_without_a_panic(line in "\\PC{0,64}") {
            let _ = split(&line);
        }
    }
}
