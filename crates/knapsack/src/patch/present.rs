//! The presentation reader: what a patch will do, for display before or after applying.

use serde::{Deserialize, Serialize};

use super::{ChunkLine, FileOperation, PatchError, parse_patch};
use crate::types::ChangeKind;

/// One file operation summarised for a person: which file, how, and how many lines.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PatchSummary {
    /// The file the operation names.
    pub path: String,
    /// The new path of a move.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub move_to: Option<String>,
    /// What happens to it.
    pub kind: ChangeKind,
    /// Lines added.
    pub added: usize,
    /// Lines removed (a deleted file counts none: its content is not in the patch).
    pub removed: usize,
}

/// Parses `text` and summarises each operation, in patch order, without touching files.
pub fn present(text: &str) -> Result<Vec<PatchSummary>, PatchError> {
    let patch = parse_patch(text)?;
    Ok(patch
        .operations
        .iter()
        .map(|operation| match operation {
            FileOperation::Add { path, lines } => PatchSummary {
                path: path.clone(),
                move_to: None,
                kind: ChangeKind::Added,
                added: lines.len(),
                removed: 0,
            },
            FileOperation::Delete { path } => PatchSummary {
                path: path.clone(),
                move_to: None,
                kind: ChangeKind::Deleted,
                added: 0,
                removed: 0,
            },
            FileOperation::Update {
                path,
                move_to,
                chunks,
            } => {
                let lines = chunks.iter().flat_map(|c| c.lines.iter());
                let (mut added, mut removed) = (0, 0);
                for line in lines {
                    match line {
                        ChunkLine::Add(_) => added += 1,
                        ChunkLine::Remove(_) => removed += 1,
                        ChunkLine::Context(_) => {}
                    }
                }
                PatchSummary {
                    path: path.clone(),
                    move_to: move_to.clone(),
                    kind: if move_to.is_some() {
                        ChangeKind::Moved
                    } else {
                        ChangeKind::Updated
                    },
                    added,
                    removed,
                }
            }
        })
        .collect())
}
