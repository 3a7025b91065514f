//! A streamed answer rendered as Markdown without garbling: lines are printed only
//! once nothing that can still arrive would change them.
//!
//! The text grows frame by frame. Only complete lines (up to the last newline) are
//! read; the half-received line is held. The complete part is split into top-level
//! blocks (`pulldown-cmark`'s offsets): every block but the last is finished, so it
//! is rendered and printed. Of the last block, what is already final is printed:
//!
//! - a heading or a rule: all of it;
//! - a paragraph, table or quote followed by a blank line: all of it (a blank line
//!   ends them);
//! - a fenced code block: every line but its closing `└─` (a code line never
//!   changes once its newline came; highlighting runs top to bottom);
//! - a list: its items but the last (items are rendered the same whether the list
//!   turns out tight or loose);
//! - anything else (a paragraph still growing, an indented code block, raw HTML):
//!   nothing yet.
//!
//! When the message commits, [`MarkdownStream::finish`] prints the rest. Each
//! top-level block is rendered on its own, with one blank line between blocks (as
//! [`render_lines`] sets them apart), so a reference-style link whose definition is
//! in another block shows as written.

use std::ops::Range;

use pulldown_cmark::{Event, Parser, Tag};

use super::markdown::{options, render_lines};

/// What a top-level block is, as far as what of it is final.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Heading,
    Rule,
    /// Paragraphs, tables, quotes: final after a blank line.
    EndsAtBlank,
    FencedCode,
    /// A list; the start of its last item.
    List {
        last_item: usize,
    },
    Other,
}

/// One top-level block of a text: its byte range and kind.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Block {
    range: Range<usize>,
    kind: Kind,
}

/// The top-level blocks of `text`, in order.
fn blocks(text: &str) -> Vec<Block> {
    let mut out: Vec<Block> = Vec::new();
    let mut depth = 0usize;
    for (event, range) in Parser::new_ext(text, options()).into_offset_iter() {
        match event {
            Event::Start(tag) => {
                if depth == 0 {
                    let kind = match tag {
                        Tag::Heading { .. } => Kind::Heading,
                        Tag::Paragraph | Tag::Table(_) | Tag::BlockQuote(_) => Kind::EndsAtBlank,
                        Tag::CodeBlock(pulldown_cmark::CodeBlockKind::Fenced(_)) => {
                            Kind::FencedCode
                        }
                        Tag::List(_) => Kind::List {
                            last_item: range.start,
                        },
                        _ => Kind::Other,
                    };
                    out.push(Block {
                        range: range.clone(),
                        kind,
                    });
                } else if depth == 1
                    && matches!(tag, Tag::Item)
                    && let Some(Block {
                        kind: Kind::List { last_item },
                        ..
                    }) = out.last_mut()
                {
                    *last_item = range.start;
                }
                depth += 1;
            }
            Event::End(_) => depth = depth.saturating_sub(1),
            Event::Rule if depth == 0 => out.push(Block {
                range,
                kind: Kind::Rule,
            }),
            _ => {}
        }
    }
    out
}

/// The Markdown of one message as it streams; [`Self::advance`] and [`Self::finish`]
/// return the lines to print now.
#[derive(Debug, Default)]
pub struct MarkdownStream {
    /// Where the block that is not wholly printed starts, in the message's text.
    settled: usize,
    /// Lines of that block already printed.
    printed: usize,
    /// Whether any block was printed (the next one is set apart by a blank line).
    started: bool,
    /// Complete text already looked at (a frame without a new line is skipped).
    seen: usize,
}

impl MarkdownStream {
    /// The message's text so far is `text` (it extends what came before): the lines now final.
    pub fn advance(&mut self, text: &str) -> Vec<String> {
        let complete = text.rfind('\n').map_or(0, |at| at + 1);
        if complete <= self.seen || complete < self.settled {
            return Vec::new();
        }
        self.seen = complete;
        let pending = &text[self.settled..complete];
        let found = blocks(pending);
        let Some((last, closed)) = found.split_last() else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for block in closed {
            let lines = render_lines(&pending[block.range.clone()]);
            self.emit(lines.len(), &lines, &mut out);
            self.printed = 0;
        }
        // From here on the last block is the one not wholly printed.
        let source = &pending[last.range.clone()];
        // What follows the last block is blank lines (a later block would be the last):
        // one whole line after it, besides the end of its own, ends a paragraph.
        let after = &pending[last.range.end..];
        let after = if source.ends_with('\n') {
            after
        } else {
            after.strip_prefix('\n').unwrap_or(after)
        };
        let ends_at_blank = after.contains('\n');
        let stable = match last.kind {
            Kind::Heading | Kind::Rule => render_lines(source),
            Kind::EndsAtBlank if ends_at_blank => render_lines(source),
            Kind::FencedCode => {
                let mut lines = render_lines(source);
                lines.pop();
                lines
            }
            Kind::List { last_item } if last_item > last.range.start => {
                render_lines(&pending[last.range.start..last_item])
            }
            _ => Vec::new(),
        };
        self.settled += last.range.start;
        self.emit(stable.len(), &stable, &mut out);
        out
    }

    /// The message is complete with `text` (which extends what came before): the rest.
    pub fn finish(&mut self, text: &str) -> Vec<String> {
        let pending = text.get(self.settled..).unwrap_or("");
        let mut out = Vec::new();
        for block in blocks(pending) {
            let lines = render_lines(&pending[block.range]);
            self.emit(lines.len(), &lines, &mut out);
            self.printed = 0;
        }
        *self = Self::default();
        out
    }

    /// Appends `lines[self.printed..upto]` to `out`, after a blank line when this block
    /// starts printing and another came before it.
    fn emit(&mut self, upto: usize, lines: &[String], out: &mut Vec<String>) {
        if upto <= self.printed {
            return;
        }
        if self.printed == 0 && self.started {
            out.push(String::new());
        }
        out.extend(lines[self.printed..upto].iter().cloned());
        self.printed = upto;
        self.started = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn plain(lines: &[String]) -> String {
        lines
            .iter()
            .map(|line| anstream::adapter::strip_str(line).to_string() + "\n")
            .collect()
    }

    /// Everything printed when `text` arrives in pieces cut at `cuts`, then commits.
    fn streamed(text: &str, cuts: &[usize]) -> Vec<String> {
        let mut stream = MarkdownStream::default();
        let mut out = Vec::new();
        for &cut in cuts {
            let mut cut = cut.min(text.len());
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            out.extend(stream.advance(&text[..cut]));
        }
        out.extend(stream.finish(text));
        out
    }

    const ANSWER: &str = "# Notes\n\nThe file says **hello**.\nSecond line.\n\n\
        - one\n- two\n  - nested\n- three\n\n\
        ```rust\nfn main() {}\nlet x = 1;\n```\n\n\
        | a | b |\n|---|---|\n| 1 | 2 |\n\n> quoted\n\n---\n\nThe end.";

    #[test]
    fn streamed_lines_are_the_whole_rendering() {
        let whole = render_lines(ANSWER);
        for step in [1, 2, 3, 7, 16, 1000] {
            let cuts: Vec<usize> = (0..ANSWER.len()).step_by(step).collect();
            assert_eq!(
                plain(&streamed(ANSWER, &cuts)),
                plain(&whole),
                "step {step}"
            );
        }
    }

    #[test]
    fn a_half_received_line_is_held_and_final_parts_show_early() {
        let mut stream = MarkdownStream::default();
        assert_eq!(
            stream.advance("# Head"),
            Vec::<String>::new(),
            "no newline yet"
        );
        assert_eq!(plain(&stream.advance("# Heading\nA para")), "# Heading\n");
        assert_eq!(
            plain(&stream.advance("# Heading\nA paragraph\n")),
            "",
            "a paragraph may go on"
        );
        assert_eq!(
            plain(&stream.advance("# Heading\nA paragraph\n\n")),
            "\nA paragraph\n"
        );
        let code = "# Heading\nA paragraph\n\n```py\nprint(1)\nprint(2";
        assert_eq!(
            plain(&stream.advance(code)),
            "\n┌─ py\n│ print(1)\n",
            "open fence: code lines"
        );
        let list = format!("{code})\n```\n- a\n- b\n");
        assert_eq!(
            plain(&stream.advance(&list)),
            "│ print(2)\n└─\n\n• a\n",
            "the list's last item waits"
        );
        assert_eq!(plain(&stream.finish(&format!("{list}- c"))), "• b\n• c\n");
    }

    #[test]
    fn a_frame_without_a_new_line_renders_nothing_again() {
        let mut stream = MarkdownStream::default();
        assert_eq!(plain(&stream.advance("# A\nb")), "# A\n");
        assert_eq!(stream.advance("# A\nbc"), Vec::<String>::new());
        assert_eq!(stream.seen, 4);
    }

    proptest! {
        #[test]
        fn any_cutting_prints_what_rendering_at_once_prints(
            picks in proptest::collection::vec(0..ANSWER.len(), 0..12)
        ) {
            let mut cuts = picks;
            cuts.sort_unstable();
            prop_assert_eq!(plain(&streamed(ANSWER, &cuts)), plain(&render_lines(ANSWER)));
        }
    }
}
