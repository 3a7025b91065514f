//! Guest identifiers, module paths and operation paths.
//!
//! Every name the model sees is built from **guest identifiers**: lower snake
//! case words, `[a-z][a-z0-9]*(_[a-z0-9]+)*`, at most
//! [`MAX_IDENTIFIER_LEN`] bytes. No identifier starts or ends with `_` or holds
//! `__`, which is what makes the provider tool-name flattening
//! ([`crate::tool_name`]) reversible. Foreign names (MCP tool names, Computer
//! names) enter the grammar through [`to_guest_identifier`], and a set of them
//! through [`map_foreign_names`], which reports collisions instead of merging.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize};

/// Longest guest identifier, in bytes (all identifiers are ASCII).
pub const MAX_IDENTIFIER_LEN: usize = 64;
/// Most segments a module path may have (`env.mcp.notes` has three).
pub const MAX_MODULE_SEGMENTS: usize = 8;
/// Longest module path, in bytes, dots included.
pub const MAX_MODULE_PATH_LEN: usize = 128;

/// Why a name is not (or cannot become) a guest identifier or path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    /// The text breaks the identifier grammar; `reason` says which rule.
    #[error("`{name}` is not a guest identifier: {reason}")]
    InvalidIdentifier {
        /// The offending text.
        name: String,
        /// The rule it breaks.
        reason: &'static str,
    },
    /// The text is not a valid module or operation path.
    #[error("`{path}` is not a valid path: {reason}")]
    InvalidPath {
        /// The offending text.
        path: String,
        /// The rule it breaks.
        reason: &'static str,
    },
    /// A foreign name has no letter or digit left to map.
    #[error("foreign name `{original}` has no letters or digits to map")]
    Unmappable {
        /// The foreign name as advertised.
        original: String,
    },
    /// A foreign name maps to an identifier longer than [`MAX_IDENTIFIER_LEN`].
    #[error("foreign name `{original}` maps to `{mapped}`, longer than {MAX_IDENTIFIER_LEN} bytes")]
    TooLong {
        /// The foreign name as advertised.
        original: String,
        /// What it mapped to.
        mapped: String,
    },
    /// Two different names map to the same identifier.
    #[error("`{first}` and `{second}` both map to `{mapped}`")]
    Collision {
        /// The name seen first.
        first: String,
        /// The name seen second.
        second: String,
        /// The identifier both map to.
        mapped: String,
    },
}

/// Checks `text` against the guest identifier grammar, naming the broken rule.
fn check_identifier(text: &str) -> Result<(), &'static str> {
    let bytes = text.as_bytes();
    let Some(first) = bytes.first() else {
        return Err("it is empty");
    };
    if bytes.len() > MAX_IDENTIFIER_LEN {
        return Err("it is longer than 64 bytes");
    }
    if !first.is_ascii_lowercase() {
        return Err("it must start with a lowercase ASCII letter");
    }
    if bytes.last() == Some(&b'_') {
        return Err("it must not end with `_`");
    }
    if text.contains("__") {
        return Err("it must not contain `__`");
    }
    if !bytes
        .iter()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'_')
    {
        return Err("only `a-z`, `0-9` and `_` are allowed");
    }
    Ok(())
}

/// Whether `text` is a guest identifier; the cheap predicate behind the newtypes.
pub fn is_guest_identifier(text: &str) -> bool {
    check_identifier(text).is_ok()
}

/// An operation's name inside its module, such as `read` or `create_note`.
///
/// Always a guest identifier, so it can be a segment of a flattened tool name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct OperationName(String);

impl OperationName {
    /// Validates `name` against the guest identifier grammar.
    pub fn new(name: impl Into<String>) -> Result<Self, NameError> {
        let name = name.into();
        match check_identifier(&name) {
            Ok(()) => Ok(Self(name)),
            Err(reason) => Err(NameError::InvalidIdentifier { name, reason }),
        }
    }

    /// The identifier text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Where a module lives, such as `files`, `ui` or `env.mcp.notes`.
///
/// One to [`MAX_MODULE_SEGMENTS`] guest identifiers joined by `.`, at most
/// [`MAX_MODULE_PATH_LEN`] bytes.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct ModulePath(String);

impl ModulePath {
    /// Parses a dotted module path, validating every segment.
    pub fn new(path: impl Into<String>) -> Result<Self, NameError> {
        let path = path.into();
        let invalid = |reason| NameError::InvalidPath {
            path: path.clone(),
            reason,
        };
        if path.len() > MAX_MODULE_PATH_LEN {
            return Err(invalid("a module path is at most 128 bytes"));
        }
        let mut segments = 0;
        for segment in path.split('.') {
            segments += 1;
            check_identifier(segment).map_err(invalid)?;
        }
        if segments > MAX_MODULE_SEGMENTS {
            return Err(invalid("a module path has at most 8 segments"));
        }
        Ok(Self(path))
    }

    /// Builds a path from identifiers already checked, e.g. `env` + `mcp` + a mapped server name.
    pub fn from_segments<'a>(
        segments: impl IntoIterator<Item = &'a str>,
    ) -> Result<Self, NameError> {
        Self::new(segments.into_iter().collect::<Vec<_>>().join("."))
    }

    /// The dotted text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The segments in order.
    pub fn segments(&self) -> impl Iterator<Item = &str> {
        self.0.split('.')
    }

    /// The path of `name` inside this module.
    pub fn operation(&self, name: &OperationName) -> OperationPath {
        OperationPath {
            module: self.clone(),
            name: name.clone(),
        }
    }
}

/// The full path of an operation, `<module>.<name>` (e.g. `env.mcp.notes.create_note`).
///
/// This is the key of `describe` and `execute`; the last segment is the name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct OperationPath {
    module: ModulePath,
    name: OperationName,
}

impl OperationPath {
    /// Joins a module path and an operation name.
    pub fn new(module: ModulePath, name: OperationName) -> Self {
        Self { module, name }
    }

    /// Parses `module.name`; the last segment is the name.
    pub fn parse(text: &str) -> Result<Self, NameError> {
        let Some((module, name)) = text.rsplit_once('.') else {
            return Err(NameError::InvalidPath {
                path: text.to_owned(),
                reason: "an operation path is `<module>.<name>`",
            });
        };
        Ok(Self {
            module: ModulePath::new(module)?,
            name: OperationName::new(name)?,
        })
    }

    /// The module part.
    pub fn module(&self) -> &ModulePath {
        &self.module
    }

    /// The operation name part.
    pub fn name(&self) -> &OperationName {
        &self.name
    }

    /// All segments, module first.
    pub fn segments(&self) -> impl Iterator<Item = &str> {
        self.module
            .segments()
            .chain(std::iter::once(self.name.as_str()))
    }
}

macro_rules! text_impls {
    ($ty:ty, $ctor:expr) => {
        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
        impl FromStr for $ty {
            type Err = NameError;
            fn from_str(s: &str) -> Result<Self, NameError> {
                $ctor(s)
            }
        }
        impl<'de> Deserialize<'de> for $ty {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let text = String::deserialize(d)?;
                $ctor(text.as_str()).map_err(serde::de::Error::custom)
            }
        }
    };
}
text_impls!(OperationName, OperationName::new);
text_impls!(ModulePath, ModulePath::new);

impl fmt::Display for OperationPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.module, self.name)
    }
}

impl FromStr for OperationPath {
    type Err = NameError;
    fn from_str(s: &str) -> Result<Self, NameError> {
        Self::parse(s)
    }
}

impl Serialize for OperationPath {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for OperationPath {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        Self::parse(&text).map_err(serde::de::Error::custom)
    }
}

/// Maps a foreign name onto the guest identifier grammar.
///
/// Rules, in order: ASCII letters and digits are kept and lowercased; an
/// uppercase letter after a lowercase letter or digit, or before a lowercase
/// letter in a run of capitals, starts a word (`createNote`, `HTTPServer` →
/// `create_note`, `http_server`); any other ASCII character or non-alphanumeric
/// character separates words (`create-note` → `create_note`); a non-ASCII
/// letter or digit becomes its own word `u<hex code point>` (`café` →
/// `caf_u00e9`); words are joined by `_`; a leading digit gets the word `n`
/// (`3d-print` → `n_3d_print`). A name already in the grammar maps to itself.
pub fn to_guest_identifier(original: &str) -> Result<OperationName, NameError> {
    let chars: Vec<char> = original.chars().collect();
    let mut words: Vec<String> = Vec::new();
    let mut current = String::new();
    for (i, &c) in chars.iter().enumerate() {
        if c.is_ascii_uppercase() {
            let prev = i.checked_sub(1).and_then(|p| chars.get(p)).copied();
            let next = chars.get(i + 1).copied();
            let after_lower = prev.is_some_and(|p| p.is_ascii_lowercase() || p.is_ascii_digit());
            let acronym_end = prev.is_some_and(|p| p.is_ascii_uppercase())
                && next.is_some_and(|n| n.is_ascii_lowercase());
            if !current.is_empty() && (after_lower || acronym_end) {
                words.push(std::mem::take(&mut current));
            }
            current.push(c.to_ascii_lowercase());
        } else if c.is_ascii_lowercase() || c.is_ascii_digit() {
            current.push(c);
        } else {
            if !current.is_empty() {
                words.push(std::mem::take(&mut current));
            }
            if !c.is_ascii() && c.is_alphanumeric() {
                words.push(format!("u{:04x}", u32::from(c)));
            }
        }
    }
    if !current.is_empty() {
        words.push(current);
    }
    let Some(first) = words.first() else {
        return Err(NameError::Unmappable {
            original: original.to_owned(),
        });
    };
    if first.starts_with(|c: char| c.is_ascii_digit()) {
        words.insert(0, "n".to_owned());
    }
    let mapped = words.join("_");
    if mapped.len() > MAX_IDENTIFIER_LEN {
        return Err(NameError::TooLong {
            original: original.to_owned(),
            mapped,
        });
    }
    OperationName::new(mapped)
}

/// Maps a set of foreign names, failing on the first two that map to the same identifier.
///
/// The result maps each identifier back to its original name, which a source
/// needs to call the foreign tool. An exact duplicate original is a collision too.
pub fn map_foreign_names<'a>(
    originals: impl IntoIterator<Item = &'a str>,
) -> Result<BTreeMap<OperationName, String>, NameError> {
    let mut mapped: BTreeMap<OperationName, String> = BTreeMap::new();
    for original in originals {
        let name = to_guest_identifier(original)?;
        if let Some(first) = mapped.get(&name) {
            return Err(NameError::Collision {
                first: first.clone(),
                second: original.to_owned(),
                mapped: name.0,
            });
        }
        mapped.insert(name, original.to_owned());
    }
    Ok(mapped)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mapped(original: &str) -> String {
        match to_guest_identifier(original) {
            Ok(name) => name.0,
            Err(e) => format!("error: {e}"),
        }
    }

    #[test]
    fn maps_foreign_names() {
        let cases = [
            ("create-note", "create_note"),
            ("create_note", "create_note"),
            ("CreateNote", "create_note"),
            ("createNote", "create_note"),
            ("HTTPServer", "http_server"),
            ("getV2Item", "get_v2_item"),
            ("3d-print", "n_3d_print"),
            ("café", "caf_u00e9"),
            ("notes.list all", "notes_list_all"),
            ("__init__", "init"),
        ];
        let got: Vec<_> = cases.iter().map(|(o, _)| (*o, mapped(o))).collect();
        let want: Vec<_> = cases.iter().map(|(o, m)| (*o, m.to_string())).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn rejects_unmappable_and_long_names() {
        assert_eq!(
            to_guest_identifier("--!"),
            Err(NameError::Unmappable {
                original: "--!".into()
            })
        );
        let long = "a".repeat(65);
        assert!(matches!(
            to_guest_identifier(&long),
            Err(NameError::TooLong { .. })
        ));
    }

    #[test]
    fn identifier_grammar() {
        for ok in ["a", "files", "create_note", "v2", "a_1", &"x".repeat(64)] {
            assert!(is_guest_identifier(ok), "{ok}");
        }
        for bad in [
            "",
            "_a",
            "a_",
            "a__b",
            "A",
            "1a",
            "a-b",
            "é",
            &"x".repeat(65),
        ] {
            assert!(!is_guest_identifier(bad), "{bad}");
        }
    }

    #[test]
    fn parses_paths() -> Result<(), NameError> {
        let path = OperationPath::parse("env.mcp.notes.create_note")?;
        assert_eq!(path.module().as_str(), "env.mcp.notes");
        assert_eq!(path.name().as_str(), "create_note");
        assert_eq!(path.to_string(), "env.mcp.notes.create_note");
        assert!(OperationPath::parse("files").is_err());
        assert!(ModulePath::new("a.b.c.d.e.f.g.h.i").is_err());
        assert!(ModulePath::new("env..mcp").is_err());
        Ok(())
    }

    #[test]
    fn module_path_limits_are_inclusive() {
        // Both segments are valid identifiers, so only the total length decides.
        let at_limit = format!("{}.{}", "a".repeat(64), "b".repeat(63));
        assert_eq!(at_limit.len(), MAX_MODULE_PATH_LEN);
        assert!(ModulePath::new(at_limit.as_str()).is_ok(), "{at_limit}");
        let past_limit = format!("{}.{}", "a".repeat(64), "b".repeat(64));
        assert_eq!(
            ModulePath::new(past_limit.as_str()),
            Err(NameError::InvalidPath {
                path: past_limit,
                reason: "a module path is at most 128 bytes",
            })
        );
        assert!(ModulePath::new("a.b.c.d.e.f.g.h").is_ok(), "8 segments");
    }
}
