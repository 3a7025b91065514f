//! What the terminal is shown: text from models and tools made inert, and the
//! colours of our own labels.
//!
//! Model output and tool results are untrusted: an escape sequence in them
//! could move the cursor, rewrite earlier lines, retitle the window or (with
//! some terminals) do worse. [`inert`] turns every control character except
//! newline and tab, and the Unicode bidirectional overrides, into visible
//! escapes (`\x1b`, `\r`, `\u{202e}`). Colours are ours alone, written with
//! `anstyle` and printed through `anstream`, which drops them for pipes,
//! `NO_COLOR` and `TERM=dumb`.

use std::borrow::Cow;
use std::fmt::Write as _;

use anstyle::{AnsiColor, Style};

/// Labels: `assistant:`, `you:`.
pub const LABEL: Style = Style::new().bold();
/// Tool calls and running tools.
pub const TOOL: Style = AnsiColor::Yellow.on_default();
/// Notices that are not the conversation: retries, resets, the session line.
pub const NOTE: Style = AnsiColor::BrightBlack.on_default();
/// A run that completed.
pub const GOOD: Style = AnsiColor::Green.on_default();
/// Failures and errors.
pub const BAD: Style = AnsiColor::Red.on_default();
/// Runs stopped by a person or a crash.
pub const WARN: Style = AnsiColor::Magenta.on_default();
/// The extensions' footer under a run.
pub const FOOTER: Style = AnsiColor::Cyan.on_default();

/// `text` in `style` (the codes are dropped later when colour is off).
pub fn paint(style: Style, text: &str) -> String {
    format!("{style}{text}{style:#}")
}

/// Whether `c` could drive the terminal or reorder what is shown.
fn is_unsafe(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t')
        || matches!(c, '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// `text` with every unsafe character written as a visible escape; borrowed when already safe.
pub fn inert(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_unsafe) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if !is_unsafe(c) {
            out.push(c);
            continue;
        }
        if c == '\r' && chars.peek() == Some(&'\n') {
            // A CRLF line end is just a line end.
            continue;
        }
        // Writing to a String cannot fail.
        let _infallible = match c {
            '\r' => write!(out, "\\r"),
            c if u32::from(c) < 0x100 => write!(out, "\\x{:02x}", u32::from(c)),
            c => write!(out, "\\u{{{:04x}}}", u32::from(c)),
        };
    }
    Cow::Owned(out)
}

/// `inert`, on one line: newlines and tabs are escaped too (tool arguments, titles).
pub fn inert_line(text: &str) -> String {
    inert(text).replace('\n', "\\n").replace('\t', "\\t")
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn escapes_become_visible_and_plain_text_is_untouched() {
        assert_eq!(
            inert("red \x1b[31mtext\x1b[0m"),
            "red \\x1b[31mtext\\x1b[0m"
        );
        assert_eq!(inert("over\rwrite\x07\x7f"), "over\\rwrite\\x07\\x7f");
        assert_eq!(inert("dos\r\nline\r"), "dos\nline\\r");
        assert_eq!(inert("\u{9b}2J"), "\\x9b2J", "C1 CSI");
        assert_eq!(inert("abc\u{202e}cba"), "abc\\u{202e}cba");
        assert!(matches!(inert("two\nlines\tok ü 日本"), Cow::Borrowed(_)));
        assert_eq!(inert_line("a\nb\tc\x1b"), "a\\nb\\tc\\x1b");
    }

    proptest! {
        #[test]
        fn nothing_unsafe_survives(text in any::<String>()) {
            let shown = inert(&text);
            prop_assert!(!shown.chars().any(is_unsafe));
            let line = inert_line(&text);
            prop_assert!(!line.chars().any(|c| c.is_control()));
        }

        #[test]
        fn safe_text_is_kept_as_is(text in "[^\\p{Cc}\\p{Cf}]*") {
            let with_lines = format!("{text}\n\t{text}");
            prop_assert_eq!(inert(&with_lines), with_lines.as_str());
        }
    }
}
