//! Markdown answers as terminal lines: what `chat` and `watch` print when stdout
//! shows colour (a terminal without `NO_COLOR`); elsewhere they print the text as the
//! model wrote it.
//!
//! `pulldown-cmark` parses CommonMark with GitHub's tables, strikethrough and task
//! lists. Headings keep their `#` marks in bold; `**bold**`, `*italics*` and
//! `~~struck~~` become those styles; lists get `•`/`◦`/`▪` or their numbers, nested
//! lists are indented; code blocks are set apart between `┌─ language` and `└─`
//! with a `│` margin, coloured by [`super::highlight`] when the language is named;
//! links are their text plus the address in parentheses (never a terminal
//! hyperlink escape); images are `[image: alt] (address)`; raw HTML is shown as
//! written. Line breaks the model wrote are kept (as the web page keeps them) and
//! nothing is re-wrapped: the terminal wraps. Every piece of text goes through
//! [`inert`] first; the only escape codes in the output are our styles.
//!
//! Bounds: containers (quotes, list items) deeper than [`MAX_INDENT_LEVELS`] add no
//! more margin, so hostile nesting cannot make a line longer than its text plus
//! that margin.

use anstyle::{AnsiColor, Effects, Style};
use pulldown_cmark::{Alignment, CodeBlockKind, Event, HeadingLevel, Options, Parser, Tag, TagEnd};
use unicode_width::UnicodeWidthStr;

use super::highlight::highlight;
use super::style::{NOTE, inert, inert_line, paint};

/// Containers past this depth add no margin or marker.
pub const MAX_INDENT_LEVELS: usize = 8;

/// Headings (with their `#` marks).
const HEADING: Style = AnsiColor::Blue.on_default().effects(Effects::BOLD);
/// Inline code.
const CODE: Style = AnsiColor::BrightCyan.on_default();
/// The margin and rules of code blocks, quote bars, link addresses.
const FRAME: Style = NOTE;

/// The Markdown this renderer reads: CommonMark, GitHub tables, strikethrough, task lists.
pub fn options() -> Options {
    Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TASKLISTS
}

/// `text` as styled terminal lines (without their newlines).
pub fn render_lines(text: &str) -> Vec<String> {
    let mut renderer = Renderer::default();
    for event in Parser::new_ext(text, options()) {
        renderer.event(event);
    }
    renderer.finish()
}

/// A container a line's margin comes from.
#[derive(Debug)]
enum Container {
    Quote,
    /// A list item: its marker (`•`, `3.`) on its first line, as many spaces after.
    Item {
        marker: String,
        used: bool,
    },
}

/// An inline style in effect.
#[derive(Clone, Copy, Debug)]
enum Inline {
    Strong,
    Emphasis,
    Strike,
    Link,
    Heading,
}

/// A table being read: its rows of rendered cells, the head first.
#[derive(Debug, Default)]
struct Table {
    alignments: Vec<Alignment>,
    rows: Vec<Vec<String>>,
    row: Vec<String>,
    cell: String,
}

#[derive(Debug, Default)]
struct Renderer {
    lines: Vec<String>,
    /// The line being written, without its margin.
    line: String,
    containers: Vec<Container>,
    inline: Vec<Inline>,
    /// The next number of each open list (`None`: a bullet list).
    lists: Vec<Option<u64>>,
    /// Each open link's address and the plain text shown for it so far.
    links: Vec<(String, String)>,
    /// The code block being read: its language and text.
    code: Option<(String, String)>,
    table: Option<Table>,
    /// The image being read: its address and alt text.
    image: Option<(String, String)>,
    /// A block ended here: the next one at this level is set apart by a blank line.
    gap: bool,
}

impl Renderer {
    fn event(&mut self, event: Event<'_>) {
        match event {
            Event::Start(tag) => self.start(tag),
            Event::End(tag) => self.end(tag),
            Event::Text(text) => self.text(&text),
            Event::Code(code) => self.code_span(&code),
            Event::Html(html) | Event::InlineHtml(html) => self.text(&html),
            Event::InlineMath(math) | Event::DisplayMath(math) => self.text(&math),
            Event::FootnoteReference(name) => self.text(&format!("[^{name}]")),
            Event::SoftBreak | Event::HardBreak => self.line_break(),
            Event::Rule => {
                self.block_start();
                self.line.push_str(&paint(FRAME, &"─".repeat(40)));
                self.end_block();
            }
            Event::TaskListMarker(done) => self.text(if done { "[x] " } else { "[ ] " }),
        }
    }

    fn start(&mut self, tag: Tag<'_>) {
        match tag {
            Tag::Paragraph | Tag::HtmlBlock => self.block_start(),
            Tag::Heading { level, .. } => {
                self.block_start();
                self.inline.push(Inline::Heading);
                let marks = "#".repeat(heading_level(level));
                self.styled(HEADING, &format!("{marks} "));
            }
            Tag::BlockQuote(_) => {
                self.block_start();
                self.containers.push(Container::Quote);
                self.gap = false;
            }
            Tag::CodeBlock(kind) => {
                self.block_start();
                let language = match kind {
                    CodeBlockKind::Fenced(info) => {
                        info.split_whitespace().next().unwrap_or("").to_owned()
                    }
                    CodeBlockKind::Indented => String::new(),
                };
                self.code = Some((language, String::new()));
            }
            Tag::List(start) => {
                self.block_start();
                self.lists.push(start);
            }
            Tag::Item => {
                self.flush();
                let marker = match self.lists.last_mut() {
                    Some(Some(number)) => {
                        let marker = format!("{number}.");
                        *number = number.saturating_add(1);
                        marker
                    }
                    _ => ["•", "◦", "▪"][self.lists.len().saturating_sub(1) % 3].to_owned(),
                };
                self.containers.push(Container::Item {
                    marker,
                    used: false,
                });
                self.gap = false;
            }
            Tag::Table(alignments) => {
                self.block_start();
                self.table = Some(Table {
                    alignments,
                    ..Table::default()
                });
            }
            Tag::Emphasis => self.inline.push(Inline::Emphasis),
            Tag::Strong => self.inline.push(Inline::Strong),
            Tag::Strikethrough => self.inline.push(Inline::Strike),
            Tag::Link { dest_url, .. } => {
                self.inline.push(Inline::Link);
                self.links.push((dest_url.to_string(), String::new()));
            }
            Tag::Image { dest_url, .. } => self.image = Some((dest_url.to_string(), String::new())),
            // Not enabled by `options`, or nothing to show for them.
            _ => {}
        }
    }

    fn end(&mut self, tag: TagEnd) {
        match tag {
            TagEnd::Paragraph | TagEnd::HtmlBlock => self.end_block(),
            TagEnd::Heading(_) => {
                self.inline.pop();
                self.end_block();
            }
            TagEnd::BlockQuote(_) => {
                self.flush();
                self.containers.pop();
                self.gap = true;
            }
            TagEnd::CodeBlock => self.code_block(),
            TagEnd::List(_) => {
                self.lists.pop();
                self.gap = true;
            }
            TagEnd::Item => {
                // An empty item still shows its marker.
                let unused = matches!(
                    self.containers.last(),
                    Some(Container::Item { used: false, .. })
                );
                if !self.line.is_empty() || unused {
                    self.push_line();
                }
                self.containers.pop();
            }
            TagEnd::TableCell => {
                if let Some(table) = &mut self.table {
                    let cell = std::mem::take(&mut table.cell);
                    table.row.push(cell);
                }
            }
            TagEnd::TableHead | TagEnd::TableRow => {
                if let Some(table) = &mut self.table {
                    let row = std::mem::take(&mut table.row);
                    table.rows.push(row);
                }
            }
            TagEnd::Table => self.table(),
            TagEnd::Emphasis | TagEnd::Strong | TagEnd::Strikethrough => {
                self.inline.pop();
            }
            TagEnd::Link => {
                self.inline.pop();
                if let Some((address, text)) = self.links.pop()
                    && !same_address(&text, &address)
                {
                    self.styled(FRAME, &format!(" ({})", inert_line(&address)));
                }
            }
            TagEnd::Image => {
                if let Some((address, alt)) = self.image.take() {
                    let alt = if alt.is_empty() {
                        "image".to_owned()
                    } else {
                        alt
                    };
                    let shown = format!("[image: {}] ({})", inert_line(&alt), inert_line(&address));
                    self.styled(FRAME, &shown);
                }
            }
            _ => {}
        }
    }

    /// Text in the current styles (split at newlines: raw HTML blocks carry them).
    fn text(&mut self, text: &str) {
        if let Some((_, code)) = &mut self.code {
            code.push_str(text);
            return;
        }
        if let Some((_, alt)) = &mut self.image {
            alt.push_str(text);
            return;
        }
        for (_, shown) in &mut self.links {
            shown.push_str(text);
        }
        let style = self.style();
        let mut parts = text.split('\n').peekable();
        while let Some(part) = parts.next() {
            if !part.is_empty() {
                self.styled(style, &inert(part));
            }
            if parts.peek().is_some() {
                self.line_break();
            }
        }
    }

    /// `` `code` `` in its colour (or plain in an image's alt text).
    fn code_span(&mut self, code: &str) {
        if let Some((_, alt)) = &mut self.image {
            alt.push_str(code);
            return;
        }
        for (_, shown) in &mut self.links {
            shown.push_str(code);
        }
        self.styled(CODE, &inert_line(code));
    }

    /// Writes already inert `text` in `style` where text goes now (a table cell or the line).
    fn styled(&mut self, style: Style, text: &str) {
        let painted = paint(style, text);
        match &mut self.table {
            Some(table) => table.cell.push_str(&painted),
            None => self.line.push_str(&painted),
        }
    }

    fn style(&self) -> Style {
        let mut effects = Effects::new();
        let mut colour = None;
        for inline in &self.inline {
            match inline {
                Inline::Strong => effects |= Effects::BOLD,
                Inline::Emphasis => effects |= Effects::ITALIC,
                Inline::Strike => effects |= Effects::STRIKETHROUGH,
                Inline::Link => effects |= Effects::UNDERLINE,
                Inline::Heading => {
                    effects |= Effects::BOLD;
                    colour = HEADING.get_fg_color();
                }
            }
        }
        Style::new().effects(effects).fg_color(colour)
    }

    fn line_break(&mut self) {
        match &mut self.table {
            Some(table) => table.cell.push(' '),
            None => self.push_line(),
        }
    }

    /// Ends the line being written, with its margin.
    fn push_line(&mut self) {
        let mut line = self.margin(true);
        if self.line.is_empty() {
            line.truncate(line.trim_end().len());
        }
        line.push_str(&self.line);
        self.lines.push(line);
        self.line.clear();
    }

    /// The margin of the next line: quote bars and item markers (then their width in spaces).
    fn margin(&mut self, consume: bool) -> String {
        let mut margin = String::new();
        for (depth, container) in self.containers.iter_mut().enumerate() {
            if depth >= MAX_INDENT_LEVELS {
                // Too deep to show: its marker counts as shown, so it adds no line of its own.
                if let Container::Item { used, .. } = container {
                    *used |= consume;
                }
                continue;
            }
            match container {
                Container::Quote => margin.push_str(&paint(FRAME, "│ ")),
                Container::Item { marker, used } => {
                    if *used {
                        margin.push_str(&" ".repeat(marker.width() + 1));
                    } else {
                        margin.push_str(marker);
                        margin.push(' ');
                        *used = consume;
                    }
                }
            }
        }
        margin
    }

    /// A line the item that holds it has not shown yet is written first; then a blank
    /// line when a block ended at this level (outside list items, which stay tight).
    fn block_start(&mut self) {
        self.flush();
        let in_item = matches!(self.containers.last(), Some(Container::Item { .. }));
        if self.gap && !in_item {
            let quotes = self
                .containers
                .iter()
                .take(MAX_INDENT_LEVELS)
                .filter(|container| matches!(container, Container::Quote))
                .count();
            let bars = "│ ".repeat(quotes);
            self.lines.push(if quotes == 0 {
                bars
            } else {
                paint(FRAME, bars.trim_end())
            });
        }
        self.gap = false;
    }

    fn flush(&mut self) {
        if !self.line.is_empty() {
            self.push_line();
        }
    }

    fn end_block(&mut self) {
        self.flush();
        self.gap = true;
    }

    /// `┌─ rust`, each line after `│ ` (coloured when the language is known), `└─`.
    fn code_block(&mut self) {
        let Some((language, code)) = self.code.take() else {
            return;
        };
        let language = inert_line(&language);
        let head = if language.is_empty() {
            "┌─".to_owned()
        } else {
            format!("┌─ {language}")
        };
        self.line.push_str(&paint(FRAME, &head));
        self.push_line();
        let code = inert(&code);
        let body = highlight(&language, &code)
            .unwrap_or_else(|| code.lines().map(str::to_owned).collect());
        for line in body {
            self.line.push_str(&paint(FRAME, "│ "));
            self.line.push_str(&line);
            self.push_line();
        }
        self.line.push_str(&paint(FRAME, "└─"));
        self.end_block();
    }

    /// Columns padded to their widest cell and aligned, the head in bold over a rule.
    fn table(&mut self) {
        let Some(table) = self.table.take() else {
            return;
        };
        let columns = table.rows.iter().map(Vec::len).max().unwrap_or(0);
        let width = |cell: &str| anstream::adapter::strip_str(cell).to_string().width();
        let widths: Vec<usize> = (0..columns)
            .map(|at| {
                table
                    .rows
                    .iter()
                    .filter_map(|row| row.get(at))
                    .map(|cell| width(cell))
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        for (index, row) in table.rows.iter().enumerate() {
            let cells: Vec<String> = (0..columns)
                .map(|at| {
                    let cell = row.get(at).map_or("", String::as_str);
                    let room = widths[at].saturating_sub(width(cell));
                    let cell = if index == 0 {
                        paint(Style::new().bold(), cell)
                    } else {
                        cell.to_owned()
                    };
                    match table.alignments.get(at) {
                        Some(Alignment::Right) => format!("{}{cell}", " ".repeat(room)),
                        Some(Alignment::Center) => {
                            format!(
                                "{}{cell}{}",
                                " ".repeat(room / 2),
                                " ".repeat(room - room / 2)
                            )
                        }
                        _ => format!("{cell}{}", " ".repeat(room)),
                    }
                })
                .collect();
            self.line
                .push_str(cells.join(&paint(FRAME, " │ ")).trim_end());
            self.push_line();
            if index == 0 {
                let rule: Vec<String> = widths.iter().map(|width| "─".repeat(*width)).collect();
                self.line.push_str(&paint(FRAME, &rule.join("─┼─")));
                self.push_line();
            }
        }
        self.end_block();
    }

    fn finish(mut self) -> Vec<String> {
        // An unclosed code block or table (the parser closes them, but be sure).
        if self.code.is_some() {
            self.code_block();
        }
        self.flush();
        self.lines
    }
}

fn heading_level(level: HeadingLevel) -> usize {
    match level {
        HeadingLevel::H1 => 1,
        HeadingLevel::H2 => 2,
        HeadingLevel::H3 => 3,
        HeadingLevel::H4 => 4,
        HeadingLevel::H5 => 5,
        HeadingLevel::H6 => 6,
    }
}

/// Whether a link's text already is its address (`<https://x.org>`, `<me@x.org>`).
fn same_address(text: &str, address: &str) -> bool {
    let bare = |value: &str| {
        let value = value.trim();
        let value = ["https://", "http://", "mailto:"]
            .iter()
            .find_map(|scheme| value.strip_prefix(scheme))
            .unwrap_or(value);
        value.trim_end_matches('/').to_lowercase()
    };
    bare(text) == bare(address)
}

#[cfg(test)]
#[path = "markdown_tests.rs"]
mod tests;
