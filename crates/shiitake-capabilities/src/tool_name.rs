//! Provider tool names: how an operation path becomes a name a model API accepts.
//!
//! OpenAI and Anthropic accept tool names matching `^[a-zA-Z0-9_-]{1,64}$`: no
//! dots. An operation path is flattened by joining its segments with `__`
//! (`env.mcp.notes.create_note` → `env__mcp__notes__create_note`). Guest
//! identifiers never contain `__` nor start or end with `_`, so a flattened
//! name of at most 64 bytes splits back into exactly one path
//! ([`unflatten`]).
//!
//! A flattened name longer than 64 bytes is shortened to its first 53 bytes,
//! then `___`, then 8 hex digits of an FNV-1a hash of the dotted path. `___`
//! never occurs in a plain flattened name, so hashed and plain names never
//! meet; a hashed name maps back only through the catalog's table, which
//! reports the (unlikely) case of two paths with the same hashed name.

use std::borrow::Borrow;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::names::{ModulePath, OperationName, OperationPath};

/// Longest tool name the provider APIs accept.
pub const MAX_TOOL_NAME_LEN: usize = 64;
/// Separator between path segments in a tool name.
pub const SEGMENT_SEPARATOR: &str = "__";
/// Marker between a shortened prefix and its hash.
pub const HASH_MARKER: &str = "___";
const HASH_HEX_LEN: usize = 8;
const HASHED_PREFIX_LEN: usize = MAX_TOOL_NAME_LEN - HASH_MARKER.len() - HASH_HEX_LEN;

/// A tool name as the model sees it, matching `^[a-zA-Z0-9_-]{1,64}$`.
///
/// A newtype so a provider name is never confused with a dotted operation path.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ToolName(String);

impl ToolName {
    /// The provider-facing text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether this name was shortened with a hash (and so maps back only through a catalog).
    pub fn is_hashed(&self) -> bool {
        self.0.contains(HASH_MARKER)
    }
}

impl Borrow<str> for ToolName {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ToolName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Whether `text` is acceptable to the provider APIs as a tool name.
pub fn is_provider_tool_name(text: &str) -> bool {
    (1..=MAX_TOOL_NAME_LEN).contains(&text.len())
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Flattens an operation path into its provider tool name (see the module doc).
pub fn flatten(path: &OperationPath) -> ToolName {
    let plain = path.segments().collect::<Vec<_>>().join(SEGMENT_SEPARATOR);
    if plain.len() <= MAX_TOOL_NAME_LEN {
        return ToolName(plain);
    }
    // All bytes are ASCII, so any byte index is a char boundary.
    let prefix = plain.get(..HASHED_PREFIX_LEN).unwrap_or(&plain);
    let hash = fnv1a_32(path.to_string().as_bytes());
    ToolName(format!("{prefix}{HASH_MARKER}{hash:08x}"))
}

/// Splits a plain (unhashed) tool name back into its operation path.
///
/// Returns `None` for hashed names and for text that is not a flattened path;
/// use the catalog to resolve those.
pub fn unflatten(name: &str) -> Option<OperationPath> {
    if name.len() > MAX_TOOL_NAME_LEN || name.contains(HASH_MARKER) {
        return None;
    }
    let segments: Vec<&str> = name.split(SEGMENT_SEPARATOR).collect();
    let (last, module) = segments.split_last()?;
    if module.is_empty() {
        return None;
    }
    let module = ModulePath::from_segments(module.iter().copied()).ok()?;
    let name = OperationName::new(*last).ok()?;
    Some(OperationPath::new(module, name))
}

/// FNV-1a over 64 bits, folded to 32; a stable, dependency-free hash for suffixes.
fn fnv1a_32(bytes: &[u8]) -> u32 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in bytes {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    // Folding keeps every input bit's influence; truncation is intended.
    #[allow(clippy::cast_possible_truncation)]
    let folded = (hash ^ (hash >> 32)) as u32;
    folded
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::names::NameError;

    #[test]
    fn flattens_and_unflattens_short_paths() -> Result<(), NameError> {
        let path = OperationPath::parse("env.mcp.notes.create_note")?;
        let name = flatten(&path);
        assert_eq!(name.as_str(), "env__mcp__notes__create_note");
        assert_eq!(unflatten(name.as_str()), Some(path));
        assert_eq!(unflatten("files"), None);
        assert_eq!(unflatten("files___read"), None);
        Ok(())
    }

    #[test]
    fn hashes_long_paths() -> Result<(), NameError> {
        let long = format!("env.mcp.{}.{}", "s".repeat(40), "op".repeat(20));
        let path = OperationPath::parse(&long)?;
        let name = flatten(&path);
        assert_eq!(name.as_str().len(), MAX_TOOL_NAME_LEN);
        assert!(name.is_hashed());
        assert!(is_provider_tool_name(name.as_str()));
        assert_eq!(unflatten(name.as_str()), None);
        assert_eq!(flatten(&path), name, "the hash is stable");
        Ok(())
    }

    #[test]
    fn the_hash_switch_is_past_64_bytes() -> Result<(), NameError> {
        // `env__mcp__` is 10 bytes, so a 54-byte name flattens to exactly 64.
        let at_limit = OperationPath::parse(&format!("env.mcp.{}", "n".repeat(54)))?;
        let name = flatten(&at_limit);
        assert_eq!(name.as_str(), format!("env__mcp__{}", "n".repeat(54)));
        assert_eq!(name.as_str().len(), MAX_TOOL_NAME_LEN);
        assert!(!name.is_hashed());
        assert_eq!(unflatten(name.as_str()), Some(at_limit));

        let past_limit = OperationPath::parse(&format!("env.mcp.{}", "n".repeat(55)))?;
        let name = flatten(&past_limit);
        assert!(name.is_hashed());
        assert_eq!(name.as_str().len(), MAX_TOOL_NAME_LEN);
        assert!(
            name.as_str()
                .starts_with(&format!("env__mcp__{}___", "n".repeat(43)))
        );
        Ok(())
    }

    #[test]
    fn fnv_matches_reference_vector() {
        // FNV-1a 64 of "a" is 0xaf63dc4c8601ec8c.
        assert_eq!(fnv1a_32(b"a"), 0xaf63_dc4c ^ 0x8601_ec8c);
    }
}
