//! Code blocks coloured by their language, for a terminal that shows colour.
//!
//! syntect's bundled syntaxes and themes (no others are loaded), parsed with its
//! pure-Rust regex engine. Only foreground colours are used (the person's
//! background stays theirs), written as 24-bit colour where the terminal says it
//! has it (`COLORTERM=truecolor` or `24bit`) and as the nearest of the 256 colours
//! elsewhere. The text given is already inert ([`super::style::inert`]): only the
//! colour codes added here are ours.

use std::sync::LazyLock;

use anstyle::{Ansi256Color, Color, RgbColor, Style};
use syntect::easy::HighlightLines;
use syntect::highlighting::{Theme, ThemeSet};
use syntect::parsing::SyntaxSet;

/// The bundled syntaxes, read once, when a named code block first shows.
static SYNTAXES: LazyLock<SyntaxSet> = LazyLock::new(SyntaxSet::load_defaults_newlines);
/// The theme; `base16-ocean.dark`'s foregrounds read on dark and light backgrounds alike.
static THEME: LazyLock<Option<Theme>> = LazyLock::new(|| {
    let mut themes = ThemeSet::load_defaults();
    themes.themes.remove("base16-ocean.dark")
});
/// Whether the terminal takes 24-bit colour.
static TRUECOLOR: LazyLock<bool> = LazyLock::new(|| {
    std::env::var("COLORTERM").is_ok_and(|value| value == "truecolor" || value == "24bit")
});

/// Loads the syntaxes and the theme on a thread of their own (about 0.4 s in a debug
/// build), so the first named code block does not hold up the answer.
pub fn warm_up() {
    std::thread::spawn(|| {
        LazyLock::force(&SYNTAXES);
        LazyLock::force(&THEME);
    });
}

/// Colours a code block's lines: one styled string per line of `code` (without its
/// newline), or `None` when `language` names no bundled syntax.
pub fn highlight(language: &str, code: &str) -> Option<Vec<String>> {
    let syntax = SYNTAXES.find_syntax_by_token(language)?;
    let theme = THEME.as_ref()?;
    let mut lines = HighlightLines::new(syntax, theme);
    let mut out = Vec::new();
    for line in syntect::util::LinesWithEndings::from(code) {
        // A syntax that fails on a line leaves that block uncoloured, never half-coloured.
        let regions = lines.highlight_line(line, &SYNTAXES).ok()?;
        let mut shown = String::new();
        for (style, text) in regions {
            let text = text.trim_end_matches(['\n', '\r']);
            if text.is_empty() {
                continue;
            }
            let colour = colour(style.foreground.r, style.foreground.g, style.foreground.b);
            let painted = Style::new().fg_color(Some(colour));
            shown.push_str(&format!("{painted}{text}{painted:#}"));
        }
        out.push(shown);
    }
    Some(out)
}

fn colour(r: u8, g: u8, b: u8) -> Color {
    if *TRUECOLOR {
        Color::Rgb(RgbColor(r, g, b))
    } else {
        Color::Ansi256(Ansi256Color(nearest_256(r, g, b)))
    }
}

/// The nearest colour of the xterm 256-colour palette: the 6×6×6 cube or the grey ramp.
fn nearest_256(r: u8, g: u8, b: u8) -> u8 {
    const LEVELS: [u8; 6] = [0, 95, 135, 175, 215, 255];
    let step = |value: u8| -> usize {
        LEVELS
            .iter()
            .enumerate()
            .min_by_key(|(_, level)| level.abs_diff(value))
            .map_or(0, |(at, _)| at)
    };
    let (ri, gi, bi) = (step(r), step(g), step(b));
    let distance = |(x, y, z): (u8, u8, u8)| {
        let d = |a: u8, b: u8| u32::from(a.abs_diff(b)).pow(2);
        d(x, r) + d(y, g) + d(z, b)
    };
    let cube = (LEVELS[ri], LEVELS[gi], LEVELS[bi]);
    // Grey ramp 232..=255: 8, 18, …, 238.
    let average = (u32::from(r) + u32::from(g) + u32::from(b)) / 3;
    let grey_step = (average.saturating_sub(3) / 10).min(23);
    let grey_level = u8::try_from(8 + grey_step * 10).unwrap_or(238);
    let grey = (grey_level, grey_level, grey_level);
    // The cube index fits in 16..=231 and the grey index in 232..=255.
    let cube_index = 16 + 36 * ri + 6 * gi + bi;
    if distance(grey) < distance(cube) {
        232 + u8::try_from(grey_step).unwrap_or(23)
    } else {
        u8::try_from(cube_index).unwrap_or(231)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_named_language_is_coloured_and_an_unknown_one_is_not() {
        let lines = highlight("rust", "fn main() {\n    let x = 1;\n}\n").unwrap();
        assert_eq!(lines.len(), 3);
        assert!(lines[0].contains("\x1b["), "coloured: {:?}", lines[0]);
        assert_eq!(
            anstream::adapter::strip_str(&lines.join("\n")).to_string(),
            "fn main() {\n    let x = 1;\n}"
        );
        assert_eq!(highlight("no-such-language", "x\n"), None);
        // The last line needs no newline.
        assert_eq!(highlight("py", "print(1)").map(|l| l.len()), Some(1));
    }

    #[test]
    fn the_256_colour_palette_is_matched_at_its_corners_and_greys() {
        assert_eq!(nearest_256(0, 0, 0), 16);
        assert_eq!(nearest_256(255, 255, 255), 231);
        assert_eq!(nearest_256(255, 0, 0), 196);
        assert_eq!(nearest_256(128, 128, 128), 244);
        assert_eq!(nearest_256(8, 8, 8), 232);
    }
}
