//! The Skills contract: what clients compile against without the core
//! (`default-features = false`): identity, bounds, the `/skills` listing and
//! the `skill.load` input and output.

use serde::{Deserialize, Serialize};
use shiitake_protocol::{apply, contract_commands, extension_contract, tool_input};

/// The extension's identity.
pub const EXTENSION_ID: &str = "botanical-session-skills";
/// The namespace of its tool: the model calls `skill.load`.
pub const NAMESPACE: &str = "skill";
/// The file that makes a folder a skill.
pub const SKILL_FILE: &str = "SKILL.md";
/// Longest skill name, in characters (the Agent Skills and codex-rs bound).
pub const MAX_NAME_CHARS: usize = 64;
/// Longest description, in characters (the Agent Skills and codex-rs bound).
pub const MAX_DESCRIPTION_CHARS: usize = 1024;
/// `skill.load` returns at most this many bytes of UTF-8 (Knapsack's read bound).
pub const LOAD_LIMIT_BYTES: usize = 128 * 1024;
/// The whole prompt section stays within this many bytes (core's section bound), so the
/// host never cuts it in the middle of a line.
pub const PROMPT_SECTION_BYTES: usize = 4096;
/// Each description is cut to this many bytes in the prompt section (the listing keeps it whole).
pub const PROMPT_DESCRIPTION_BYTES: usize = 256;
/// At most this many folders of one root are considered; the rest are reported, not read.
pub const MAX_FOLDERS_PER_ROOT: usize = 256;

extension_contract! {
    /// The Skills extension as clients see it: no projection, one command.
    pub SkillsContract = EXTENSION_ID, projection ()
}

/// `/skills`: every skill the host supplied, and every folder that is not one and why.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListSkills {}

contract_commands!(SkillsContract { ListSkills => "list" in SessionScope -> SkillsList });

/// What `/skills` shows: usable skills in name order, then the problems in discovery order.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SkillsList {
    /// The skills the model sees and can load.
    pub skills: Vec<SkillSummary>,
    /// Folders (or roots) that gave no skill, each with the reason.
    pub problems: Vec<SkillProblem>,
}

/// One usable skill.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SkillSummary {
    /// Its name, unique across roots; `skill.load` takes it.
    pub name: String,
    /// What it does and when to use it, on one line.
    pub description: String,
    /// The root it came from, as the host named it.
    pub root: String,
    /// Its folder inside the root.
    pub folder: String,
}

/// A root or folder that gave no skill.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SkillProblem {
    /// The root, as the host named it.
    pub root: String,
    /// The folder inside the root; absent when the whole root is concerned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub folder: Option<String>,
    /// Why it gave no skill.
    pub problem: Problem,
}

/// Why a root or folder gave no skill; the rules are in `docs/ext-skills.md`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Problem {
    /// The root is missing or cannot be listed.
    #[error("the root cannot be read: {message}")]
    RootUnreadable {
        /// The system's message.
        message: String,
    },
    /// The root holds more folders than [`MAX_FOLDERS_PER_ROOT`]; the rest were not read.
    #[error("the root holds more than {limit} folders; the rest were not read")]
    RootTruncated {
        /// The bound.
        limit: usize,
    },
    /// The folder's name is not UTF-8, so it cannot be addressed.
    #[error("the folder name is not UTF-8")]
    FolderNameNotUtf8,
    /// The folder has no `SKILL.md`.
    #[error("the folder has no SKILL.md")]
    MissingSkillFile,
    /// `SKILL.md` exists but cannot be read as text inside the folder.
    #[error("SKILL.md cannot be read: {message}")]
    UnreadableSkillFile {
        /// Why (a symlink out of the folder, not UTF-8, a directory ...).
        message: String,
    },
    /// `SKILL.md` does not start with a `---` line.
    #[error("SKILL.md has no front matter (it must start with a --- line)")]
    NoFrontMatter,
    /// The front matter has no closing `---` line (within the first 128 KiB).
    #[error("the front matter of SKILL.md is not closed by a --- line")]
    UnterminatedFrontMatter,
    /// The front matter is not YAML, or not a mapping.
    #[error("the front matter does not parse: {message}")]
    FrontMatterDoesNotParse {
        /// The parser's message.
        message: String,
    },
    /// `name` breaks a rule.
    #[error("invalid name: {rule}")]
    InvalidName {
        /// The name as written, when it was text.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
        /// The rule it breaks.
        rule: NameRule,
    },
    /// `description` breaks a rule.
    #[error("invalid description of `{name}`: {rule}")]
    InvalidDescription {
        /// The skill's name.
        name: String,
        /// The rule it breaks.
        rule: DescriptionRule,
    },
    /// Another folder (earlier root, or earlier folder of the same root) has the name.
    #[error("the name `{name}` is already used by {kept}")]
    DuplicateName {
        /// The name.
        name: String,
        /// The root and folder of the skill that keeps it.
        kept: String,
    },
}

/// The rules a skill name follows (Agent Skills, as Claude Code and codex-rs read them).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[serde(rename_all = "snake_case")]
pub enum NameRule {
    /// `name` is absent.
    #[error("the front matter has no name")]
    Missing,
    /// `name` is not a string.
    #[error("the name is not text")]
    NotText,
    /// `name` is empty.
    #[error("the name is empty")]
    Empty,
    /// `name` is longer than [`MAX_NAME_CHARS`].
    #[error("the name is longer than 64 characters")]
    TooLong,
    /// `name` has a character other than `a-z`, `0-9` and `-`.
    #[error("the name may hold only a-z, 0-9 and -")]
    Character,
    /// `name` starts or ends with `-`, or holds `--`.
    #[error("the name may not start or end with - nor hold --")]
    Hyphen,
}

/// The rules a description follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[serde(rename_all = "snake_case")]
pub enum DescriptionRule {
    /// `description` is absent.
    #[error("the front matter has no description")]
    Missing,
    /// `description` is not a string.
    #[error("the description is not text")]
    NotText,
    /// `description` is empty or only whitespace.
    #[error("the description is empty")]
    Empty,
    /// `description` is longer than [`MAX_DESCRIPTION_CHARS`] (after joining its lines).
    #[error("the description is longer than 1024 characters")]
    TooLong,
    /// `description` holds a control character.
    #[error("the description holds a control character")]
    ControlCharacter,
    /// `description` holds markup (`<tag>`), which could pose as prompt structure.
    #[error("the description holds markup (<...>)")]
    Markup,
}

/// `skill.load`: the body of a skill's `SKILL.md`, or a file beside it.
#[apply(tool_input!)]
#[derive(Clone, Debug, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct LoadInput {
    /// The skill's name.
    #[cfg_attr(
        feature = "runtime",
        schemars(
            length(min = 1, max = MAX_NAME_CHARS),
            description = "The skill's name, as listed in the Skills section."
        )
    )]
    pub name: String,
    /// A file inside the skill's folder; absent for the body of `SKILL.md`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "runtime",
        schemars(
            with = "String",
            length(min = 1, max = knapsack::limits::PATH_LIMIT_BYTES),
            description = "A file inside the skill's folder, relative to it; omit for the instructions."
        )
    )]
    pub path: Option<String>,
}

/// What `skill.load` returns.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LoadOutput {
    /// The skill.
    pub name: String,
    /// The file read, relative to the skill's folder.
    pub path: String,
    /// The text: the body without front matter for `SKILL.md`, else the file.
    pub content: String,
    /// True when the file is larger than [`LOAD_LIMIT_BYTES`] and `content` stops there.
    pub truncated: bool,
    /// With the body: the other files of the skill's folder (at most 256), to load by path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub files: Option<Vec<String>>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn problems_encode_with_their_kind() {
        let problem = SkillProblem {
            root: "/skills".into(),
            folder: Some("pdf".into()),
            problem: Problem::InvalidName {
                name: Some("PDF".into()),
                rule: NameRule::Character,
            },
        };
        let value = serde_json::to_value(&problem).unwrap();
        assert_eq!(
            value,
            json!({"root": "/skills", "folder": "pdf",
                   "problem": {"kind": "invalid_name", "name": "PDF", "rule": "character"}})
        );
        assert_eq!(
            serde_json::from_value::<SkillProblem>(value).unwrap(),
            problem
        );
    }

    #[test]
    fn load_input_refuses_unknown_fields() {
        assert!(serde_json::from_value::<LoadInput>(json!({"name": "a", "offset": 1})).is_err());
        assert_eq!(
            serde_json::from_value::<LoadInput>(json!({"name": "a"})).unwrap(),
            LoadInput {
                name: "a".into(),
                path: None
            }
        );
    }
}
