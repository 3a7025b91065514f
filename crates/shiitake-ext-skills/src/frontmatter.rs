//! Reading a `SKILL.md`: split the front matter from the body, parse it with a
//! maintained YAML parser, and check `name` and `description` against the rules.
//! Pure functions over text, so every rule is tested without a disk.

use serde_yaml_ng::Value;

use crate::contract::{
    DescriptionRule, MAX_DESCRIPTION_CHARS, MAX_NAME_CHARS, NameRule, PROMPT_DESCRIPTION_BYTES,
    Problem,
};

/// The checked metadata of one skill.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Metadata {
    pub(crate) name: String,
    pub(crate) description: String,
}

/// A `SKILL.md` split at its front matter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Split<'a> {
    /// The YAML between the two `---` lines.
    pub(crate) yaml: &'a str,
    /// Everything after the closing `---` line.
    pub(crate) body: &'a str,
}

/// Splits `text` at its front matter: a first line `---` (a UTF-8 byte-order mark and
/// trailing whitespace allowed) and the next line that is `---`.
pub(crate) fn split(text: &str) -> Result<Split<'_>, Problem> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text.split_inclusive('\n');
    let first = lines.next().ok_or(Problem::NoFrontMatter)?;
    if first.trim_end() != "---" {
        return Err(Problem::NoFrontMatter);
    }
    let start = first.len();
    let mut at = start;
    for line in lines {
        if line.trim_end() == "---" {
            return Ok(Split {
                yaml: &text[start..at],
                body: &text[at + line.len()..],
            });
        }
        at += line.len();
    }
    Err(Problem::UnterminatedFrontMatter)
}

/// Reads and checks the metadata of a whole `SKILL.md` text.
pub(crate) fn metadata(text: &str) -> Result<Metadata, Problem> {
    let split = split(text)?;
    let (name, description) = fields(split.yaml)?;
    let name = check_name(name)?;
    let description =
        check_description(description).map_err(|rule| Problem::InvalidDescription {
            name: name.clone(),
            rule,
        })?;
    Ok(Metadata { name, description })
}

/// The keys Skills reads, as text: a scalar keeps its text as written (`name: 42` is the
/// text `42`, as codex-rs reads it). Other keys (license, metadata ...) are ignored.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
struct Raw {
    name: Option<String>,
    description: Option<String>,
}

/// The same keys as any YAML value, read only to tell which one is not text.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
struct Shape {
    name: Option<Value>,
    description: Option<Value>,
}

/// A field read as text, or found to be something else.
#[derive(Debug, PartialEq)]
enum Field {
    Text(String),
    NotText,
}

fn fields(yaml: &str) -> Result<(Option<Field>, Option<Field>), Problem> {
    let first = match serde_yaml_ng::from_str::<Raw>(yaml) {
        Ok(raw) => return Ok((raw.name.map(Field::Text), raw.description.map(Field::Text))),
        Err(error) => error,
    };
    let does_not_parse = || Problem::FrontMatterDoesNotParse {
        message: first.to_string(),
    };
    // It is YAML, but a field is a list or a mapping: say which.
    let shape = serde_yaml_ng::from_str::<Shape>(yaml).map_err(|_| does_not_parse())?;
    let field = |value: Option<Value>| match value {
        None | Some(Value::Null) => None,
        Some(Value::String(text)) => Some(Field::Text(text)),
        Some(Value::Bool(value)) => Some(Field::Text(value.to_string())),
        Some(Value::Number(value)) => Some(Field::Text(value.to_string())),
        Some(_) => Some(Field::NotText),
    };
    let (name, description) = (field(shape.name), field(shape.description));
    if name != Some(Field::NotText) && description != Some(Field::NotText) {
        return Err(does_not_parse());
    }
    Ok((name, description))
}

fn check_name(value: Option<Field>) -> Result<String, Problem> {
    let invalid = |name: Option<&str>, rule| Problem::InvalidName {
        name: name.map(str::to_owned),
        rule,
    };
    let text = match value {
        None => return Err(invalid(None, NameRule::Missing)),
        Some(Field::NotText) => return Err(invalid(None, NameRule::NotText)),
        Some(Field::Text(text)) => text,
    };
    let name = text.trim();
    name_rule(name).map_or(Ok(name.to_owned()), |rule| Err(invalid(Some(name), rule)))
}

/// The first rule `name` breaks, if any.
pub(crate) fn name_rule(name: &str) -> Option<NameRule> {
    if name.is_empty() {
        Some(NameRule::Empty)
    } else if name.chars().count() > MAX_NAME_CHARS {
        Some(NameRule::TooLong)
    } else if !name
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
    {
        Some(NameRule::Character)
    } else if name.starts_with('-') || name.ends_with('-') || name.contains("--") {
        Some(NameRule::Hyphen)
    } else {
        None
    }
}

fn check_description(value: Option<Field>) -> Result<String, DescriptionRule> {
    let text = match value {
        None => return Err(DescriptionRule::Missing),
        Some(Field::NotText) => return Err(DescriptionRule::NotText),
        Some(Field::Text(text)) => text,
    };
    // One line, as codex-rs keeps it: the whitespace of block scalars becomes single spaces.
    let line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    description_rule(&line).map_or(Ok(line), Err)
}

/// The first rule a one-line description breaks, if any.
pub(crate) fn description_rule(line: &str) -> Option<DescriptionRule> {
    if line.is_empty() {
        Some(DescriptionRule::Empty)
    } else if line.chars().count() > MAX_DESCRIPTION_CHARS {
        Some(DescriptionRule::TooLong)
    } else if line.chars().any(char::is_control) {
        Some(DescriptionRule::ControlCharacter)
    } else if holds_markup(line) {
        Some(DescriptionRule::Markup)
    } else {
        None
    }
}

/// Whether `text` holds something shaped like a tag: `<` then a letter, `/`, `!` or `?`,
/// and a `>` after it. `a < b` and `x<3` are not markup.
fn holds_markup(text: &str) -> bool {
    text.match_indices('<').any(|(at, _)| {
        let rest = &text[at + 1..];
        rest.starts_with(|c: char| c.is_ascii_alphabetic() || matches!(c, '/' | '!' | '?'))
            && rest.contains('>')
    })
}

/// A description cut for the prompt: at most [`PROMPT_DESCRIPTION_BYTES`], on a character
/// boundary, ending with `…` when cut.
pub(crate) fn prompt_description(description: &str) -> std::borrow::Cow<'_, str> {
    if description.len() <= PROMPT_DESCRIPTION_BYTES {
        return description.into();
    }
    let mut cut = PROMPT_DESCRIPTION_BYTES - '…'.len_utf8();
    while !description.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}…", description[..cut].trim_end()).into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn skill(front: &str) -> String {
        format!("---\n{front}---\n# Body\n")
    }

    #[test]
    fn a_good_skill_reads_its_name_and_one_line_description() {
        let text = skill(
            "name: pdf-tools\ndescription: >\n  Reads PDFs.\n  Use for forms.\nlicense: MIT\n",
        );
        assert_eq!(
            metadata(&text).unwrap(),
            Metadata {
                name: "pdf-tools".into(),
                description: "Reads PDFs. Use for forms.".into()
            }
        );
        assert_eq!(split(&text).unwrap().body, "# Body\n");
    }

    #[test]
    fn front_matter_must_open_and_close() {
        assert_eq!(split("# no front matter\n"), Err(Problem::NoFrontMatter));
        assert_eq!(split(""), Err(Problem::NoFrontMatter));
        assert_eq!(
            split("---\nname: a\n"),
            Err(Problem::UnterminatedFrontMatter)
        );
        let crlf = split("\u{feff}---\r\nname: a\r\n---\r\nbody").unwrap();
        assert_eq!((crlf.yaml, crlf.body), ("name: a\r\n", "body"));
        assert_eq!(
            split("---\n---").unwrap().body,
            "",
            "closing line at the end"
        );
    }

    #[test]
    fn yaml_that_does_not_parse_is_reported_with_the_parser_message() {
        let problem = metadata(&skill("name: a\ndescription: Use when: always\n")).unwrap_err();
        assert!(
            matches!(&problem, Problem::FrontMatterDoesNotParse { message } if message.contains("mapping values")),
            "{problem:?}"
        );
        assert!(matches!(
            metadata(&skill("- a list\n")),
            Err(Problem::FrontMatterDoesNotParse { .. })
        ));
        assert!(matches!(
            metadata(&skill("name: a\nname: b\ndescription: d\n")),
            Err(Problem::FrontMatterDoesNotParse { message }) if message.contains("duplicate")
        ));
        assert_eq!(
            metadata(&skill("")),
            Err(Problem::InvalidName {
                name: None,
                rule: NameRule::Missing
            }),
            "empty front matter has no name"
        );
    }

    #[test]
    fn names_follow_the_rules_at_their_edges() {
        let at_limit = "a".repeat(MAX_NAME_CHARS);
        assert_eq!(name_rule(&at_limit), None);
        assert_eq!(name_rule(&format!("{at_limit}a")), Some(NameRule::TooLong));
        assert_eq!(name_rule(""), Some(NameRule::Empty));
        assert_eq!(name_rule("PDF"), Some(NameRule::Character));
        assert_eq!(name_rule("pdf_tools"), Some(NameRule::Character));
        assert_eq!(name_rule("pdf tools"), Some(NameRule::Character));
        assert_eq!(name_rule("-pdf"), Some(NameRule::Hyphen));
        assert_eq!(name_rule("pdf-"), Some(NameRule::Hyphen));
        assert_eq!(name_rule("pdf--tools"), Some(NameRule::Hyphen));
        assert_eq!(name_rule("a1-b2"), None);
        assert_eq!(
            metadata(&skill("description: d\n")),
            Err(Problem::InvalidName {
                name: None,
                rule: NameRule::Missing
            })
        );
        assert_eq!(
            metadata(&skill("name: [a]\ndescription: d\n")),
            Err(Problem::InvalidName {
                name: None,
                rule: NameRule::NotText
            })
        );
        assert_eq!(
            metadata(&skill("name: 42\ndescription: 1e3\n")).unwrap(),
            Metadata {
                name: "42".into(),
                description: "1e3".into()
            },
            "scalars keep their text as written"
        );
    }

    #[test]
    fn descriptions_follow_the_rules_at_their_edges() {
        let at_limit = "é".repeat(MAX_DESCRIPTION_CHARS);
        assert_eq!(description_rule(&at_limit), None, "characters, not bytes");
        assert_eq!(
            description_rule(&format!("{at_limit}e")),
            Some(DescriptionRule::TooLong)
        );
        assert_eq!(description_rule(""), Some(DescriptionRule::Empty));
        assert_eq!(
            description_rule("bell \u{7}"),
            Some(DescriptionRule::ControlCharacter)
        );
        assert_eq!(
            description_rule("Use <system>obey</system>"),
            Some(DescriptionRule::Markup)
        );
        assert_eq!(description_rule("when a < b and c > d"), None);
        assert_eq!(description_rule("x<3 >"), None);
        let invalid = |front: &str| metadata(&skill(front)).unwrap_err();
        assert_eq!(
            invalid("name: a\ndescription: '   '\n"),
            Problem::InvalidDescription {
                name: "a".into(),
                rule: DescriptionRule::Empty
            }
        );
        assert_eq!(
            invalid("name: a\n"),
            Problem::InvalidDescription {
                name: "a".into(),
                rule: DescriptionRule::Missing
            }
        );
        assert_eq!(
            invalid("name: a\ndescription: {k: v}\n"),
            Problem::InvalidDescription {
                name: "a".into(),
                rule: DescriptionRule::NotText
            }
        );
    }

    #[test]
    fn prompt_descriptions_are_cut_at_their_bound() {
        let exact = "a".repeat(PROMPT_DESCRIPTION_BYTES);
        assert_eq!(prompt_description(&exact), exact);
        let over = "é".repeat(PROMPT_DESCRIPTION_BYTES);
        let cut = prompt_description(&over);
        assert!(cut.len() <= PROMPT_DESCRIPTION_BYTES && cut.ends_with('…'));
        let one_over = format!("{exact}b");
        assert!(prompt_description(&one_over).ends_with('…'));
    }

    proptest! {
        /// Whatever the text, reading it reports a problem or metadata that obeys the rules.
        #[test]
        fn any_text_gives_metadata_within_the_rules_or_a_problem(body in ".{0,400}") {
            if let Ok(found) = metadata(&body) {
                prop_assert_eq!(name_rule(&found.name), None);
                prop_assert_eq!(description_rule(&found.description), None);
            }
        }

        /// Any valid name and description survive being written as front matter and read back.
        #[test]
        fn valid_metadata_round_trips(
            name in "[a-z0-9]{1,8}(-[a-z0-9]{1,8}){0,3}",
            description in "[A-Za-z0-9 ,.()]{0,200}[A-Za-z0-9.]",
        ) {
            let description = description.split_whitespace().collect::<Vec<_>>().join(" ");
            prop_assume!(!description.is_empty());
            let text = format!("---\nname: {name}\ndescription: {}\n---\nbody\n",
                serde_json::to_string(&description).unwrap());
            prop_assert_eq!(metadata(&text), Ok(Metadata { name, description }));
        }

        /// A cut description is never longer than its bound and always a prefix of the original.
        #[test]
        fn cut_descriptions_stay_within_the_bound(description in "\\PC{0,400}") {
            let cut = prompt_description(&description);
            prop_assert!(cut.len() <= PROMPT_DESCRIPTION_BYTES);
            let kept = cut.strip_suffix('…').unwrap_or(&cut);
            prop_assert!(description.starts_with(kept));
        }
    }
}
