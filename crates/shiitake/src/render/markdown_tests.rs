//! The terminal rendering of Markdown, compared line by line without colour, and
//! the styles where they matter.

use super::*;

fn plain(text: &str) -> String {
    let lines = render_lines(text);
    anstream::adapter::strip_str(&lines.join("\n")).to_string()
}

#[test]
fn prose_keeps_its_words_and_gains_styles() {
    assert_eq!(
        plain("The file says **hello world**."),
        "The file says hello world."
    );
    let styled = render_lines("The file says **hello world**.").join("\n");
    assert!(styled.contains("\x1b[1mhello world\x1b[0m"), "{styled:?}");
    assert_eq!(plain("*it* _it_ ~~gone~~ `code`"), "it it gone code");
    let styled = render_lines("*it* ~~gone~~ `code`").join("\n");
    assert!(styled.contains("\x1b[3mit"), "italic: {styled:?}");
    assert!(styled.contains("\x1b[9mgone"), "struck: {styled:?}");
    assert!(styled.contains("\x1b[96mcode"), "inline code: {styled:?}");
    assert_eq!(
        plain("a\nb  \nc"),
        "a\nb\nc",
        "the model's line breaks stay"
    );
}

#[test]
fn headings_lists_quotes_and_rules() {
    assert_eq!(
        plain("# Title\n\n## Part\n\nText"),
        "# Title\n\n## Part\n\nText"
    );
    assert_eq!(
        plain("- one\n- two\n  - nested\n    - deeper\n\n3. three\n4. four"),
        "• one\n• two\n  ◦ nested\n    ▪ deeper\n\n3. three\n4. four"
    );
    assert_eq!(
        plain("- a\n\n  more of a\n- b"),
        "• a\n  more of a\n• b",
        "a loose list prints as a tight one"
    );
    assert_eq!(plain("- [x] done\n- [ ] open"), "• [x] done\n• [ ] open");
    assert_eq!(
        plain("> quoted\n>\n> more\n\nafter"),
        "│ quoted\n│\n│ more\n\nafter"
    );
    assert_eq!(
        plain("above\n\n---\n\nbelow"),
        format!("above\n\n{}\n\nbelow", "─".repeat(40))
    );
    assert_eq!(plain("-\n- x"), "•\n• x", "an empty item shows its marker");
}

#[test]
fn code_blocks_are_set_apart_and_coloured_when_named() {
    let text = "Run:\n\n```rust\nfn main() {\n    println!(\"hi\");\n}\n```\n\nDone.";
    assert_eq!(
        plain(text),
        "Run:\n\n┌─ rust\n│ fn main() {\n│     println!(\"hi\");\n│ }\n└─\n\nDone."
    );
    let styled = render_lines(text).join("\n");
    assert!(styled.contains("\x1b[38;"), "highlighted: {styled:?}");
    let unnamed = render_lines("```\nplain code\n```").join("\n");
    assert_eq!(
        anstream::adapter::strip_str(&unnamed).to_string(),
        "┌─\n│ plain code\n└─"
    );
    assert!(
        !unnamed.contains("\x1b[38;"),
        "no language, no colour: {unnamed:?}"
    );
    assert_eq!(
        plain("```py\nprint(1)"),
        "┌─ py\n│ print(1)\n└─",
        "an unfinished fence is code"
    );
    assert_eq!(
        plain("- item\n\n  ```sh\n  ls\n  ```"),
        "• item\n  ┌─ sh\n  │ ls\n  └─"
    );
}

#[test]
fn links_show_their_address_and_images_are_text() {
    assert_eq!(
        plain("[docs](https://example.com/docs), <https://example.com> and <me@example.com>"),
        "docs (https://example.com/docs), https://example.com and me@example.com"
    );
    assert_eq!(
        plain("[https://bank.example](https://evil.example/login)"),
        "https://bank.example (https://evil.example/login)"
    );
    assert_eq!(
        plain("![a chart](http://127.0.0.1:9/chart.png)"),
        "[image: a chart] (http://127.0.0.1:9/chart.png)"
    );
    let styled = render_lines("[docs](https://example.com/docs)").join("");
    assert!(
        styled.contains("\x1b[4mdocs"),
        "link text underlined: {styled:?}"
    );
    assert!(
        !styled.contains("\x1b]8;"),
        "never a terminal hyperlink: {styled:?}"
    );
}

#[test]
fn tables_are_aligned_columns() {
    assert_eq!(
        plain(
            "| name | size | note |\n|:-----|-----:|:----:|\n| a.txt | 12 | x |\n| bb.txt | 3 | **yes** |"
        ),
        "name   │ size │ note\n───────┼──────┼─────\na.txt  │   12 │  x\nbb.txt │    3 │ yes"
    );
}

#[test]
fn untrusted_text_cannot_drive_the_terminal() {
    assert_eq!(
        plain("<script>alert(1)</script>"),
        "<script>alert(1)</script>"
    );
    let shown =
        render_lines("\x1b[2J\x1b]0;title\x07 **bold**\n\n```\n\x1b[31mred\n```").join("\n");
    assert_eq!(
        anstream::adapter::strip_str(&shown).to_string(),
        "\\x1b[2J\\x1b]0;title\\x07 bold\n\n┌─\n│ \\x1b[31mred\n└─"
    );
    // Our escapes only: every ESC starts one of our SGR sequences.
    for (at, _) in shown.match_indices('\x1b') {
        assert_eq!(shown.as_bytes().get(at + 1), Some(&b'['), "{shown:?}");
        let end = shown[at..].find('m').unwrap();
        assert!(
            shown[at + 2..at + end]
                .bytes()
                .all(|b| b.is_ascii_digit() || b == b';'),
            "{shown:?}"
        );
    }
}

#[test]
fn hostile_nesting_and_long_lines_stay_bounded() {
    let deep = format!("{}deep", "- ".repeat(10_000));
    assert_eq!(
        plain(&deep),
        "• ◦ ▪ • ◦ ▪ • ◦ deep",
        "at most MAX_INDENT_LEVELS markers"
    );
    let quotes = format!("{}deep", "> ".repeat(10_000));
    assert_eq!(
        plain(&quotes),
        format!("{}deep", "│ ".repeat(MAX_INDENT_LEVELS))
    );
    // The bound at its edge and one past: the 8th level indents, the 9th does not.
    let nested = |levels: usize| -> String {
        (0..levels)
            .map(|level| format!("{}- l{level}\n", "  ".repeat(level)))
            .collect()
    };
    let lines = |text: &str| plain(text).lines().last().unwrap_or("").to_owned();
    assert_eq!(
        lines(&nested(MAX_INDENT_LEVELS)),
        format!("{}◦ l7", " ".repeat(14))
    );
    assert_eq!(
        lines(&nested(MAX_INDENT_LEVELS + 1)),
        format!("{}l8", " ".repeat(16))
    );
    let long = "word ".repeat(200_000);
    assert_eq!(plain(&long), long.trim_end());
}
