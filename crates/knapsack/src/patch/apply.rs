//! The pure text transformation of an update, and the inverse of a patch.

use super::{Chunk, ChunkLine, FileOperation, Patch, PatchError};

/// Applies an update's hunks to `original`, returning the new text.
///
/// Hunks apply top to bottom; each is searched for at or after the end of the
/// previous one, first exactly, then ignoring trailing whitespace, then
/// ignoring surrounding whitespace (as Codex does). `@@ context` first moves
/// past the next line equal to `context`. A hunk without context or removed
/// lines inserts at the end of the file, or after its `@@` line when it has one.
/// The result ends with a newline unless it is empty.
pub fn apply_chunks(path: &str, original: &str, chunks: &[Chunk]) -> Result<String, PatchError> {
    let mut lines: Vec<&str> = original.split('\n').collect();
    if lines.last() == Some(&"") {
        lines.pop();
    }
    let mut cursor = 0usize;
    let mut replacements: Vec<(usize, usize, Vec<&str>)> = Vec::new();
    for (index, chunk) in chunks.iter().enumerate() {
        let mismatch = |message: String| PatchError::HunkMismatch {
            path: path.to_owned(),
            hunk: index + 1,
            message,
        };
        if let Some(context) = &chunk.context {
            let found = seek(&lines, &[context.as_str()], cursor, false)
                .ok_or_else(|| mismatch(format!("the context line `{context}` was not found")))?;
            cursor = found + 1;
        }
        let old: Vec<&str> = chunk
            .lines
            .iter()
            .filter_map(|l| match l {
                ChunkLine::Context(t) | ChunkLine::Remove(t) => Some(t.as_str()),
                ChunkLine::Add(_) => None,
            })
            .collect();
        let new: Vec<&str> = chunk
            .lines
            .iter()
            .filter_map(|l| match l {
                ChunkLine::Context(t) | ChunkLine::Add(t) => Some(t.as_str()),
                ChunkLine::Remove(_) => None,
            })
            .collect();
        if old.is_empty() {
            let at = if chunk.context.is_some() && !chunk.end_of_file {
                cursor
            } else {
                lines.len()
            };
            replacements.push((at, 0, new));
            cursor = at;
            continue;
        }
        let found = seek(&lines, &old, cursor, chunk.end_of_file).ok_or_else(|| {
            mismatch(format!(
                "the lines starting `{}` were not found",
                old.first().copied().unwrap_or_default()
            ))
        })?;
        replacements.push((found, old.len(), new));
        cursor = found + old.len();
    }
    let mut result: Vec<&str> = Vec::with_capacity(lines.len());
    let mut at = 0usize;
    for (start, removed, added) in replacements {
        result.extend_from_slice(&lines[at..start]);
        result.extend(added);
        at = start + removed;
    }
    result.extend_from_slice(&lines[at..]);
    if result.is_empty() {
        return Ok(String::new());
    }
    let mut text = result.join("\n");
    text.push('\n');
    Ok(text)
}

/// Finds `pattern` in `lines` at or after `from`; with `end_of_file`, a match
/// ending at the last line is preferred.
fn seek(lines: &[&str], pattern: &[&str], from: usize, end_of_file: bool) -> Option<usize> {
    if pattern.len() > lines.len() {
        return None;
    }
    let last_start = lines.len() - pattern.len();
    let equal: [fn(&str, &str) -> bool; 3] = [
        |a, b| a == b,
        |a, b| a.trim_end() == b.trim_end(),
        |a, b| a.trim() == b.trim(),
    ];
    for eq in equal {
        let matches_at = |start: usize| {
            lines[start..start + pattern.len()]
                .iter()
                .zip(pattern)
                .all(|(a, b)| eq(a, b))
        };
        if end_of_file && last_start >= from && matches_at(last_start) {
            return Some(last_start);
        }
        if let Some(found) = (from..=last_start).find(|&start| matches_at(start)) {
            return Some(found);
        }
    }
    None
}

/// The patch that undoes `patch`, given the content each deleted file had
/// before it was applied; `None` when a deleted file's content is unknown.
pub fn invert(patch: &Patch, deleted_content: impl Fn(&str) -> Option<String>) -> Option<Patch> {
    let mut operations = Vec::with_capacity(patch.operations.len());
    for operation in patch.operations.iter().rev() {
        operations.push(match operation {
            FileOperation::Add { path, .. } => FileOperation::Delete { path: path.clone() },
            FileOperation::Delete { path } => {
                let content = deleted_content(path)?;
                let body = content.strip_suffix('\n').unwrap_or(&content);
                let lines = if content.is_empty() {
                    Vec::new()
                } else {
                    body.split('\n').map(str::to_owned).collect()
                };
                FileOperation::Add {
                    path: path.clone(),
                    lines,
                }
            }
            FileOperation::Update {
                path,
                move_to,
                chunks,
            } => FileOperation::Update {
                path: move_to.clone().unwrap_or_else(|| path.clone()),
                move_to: move_to.as_ref().map(|_| path.clone()),
                chunks: chunks
                    .iter()
                    .map(|chunk| Chunk {
                        context: chunk.context.clone(),
                        end_of_file: chunk.end_of_file,
                        lines: chunk
                            .lines
                            .iter()
                            .map(|line| match line {
                                ChunkLine::Context(t) => ChunkLine::Context(t.clone()),
                                ChunkLine::Remove(t) => ChunkLine::Add(t.clone()),
                                ChunkLine::Add(t) => ChunkLine::Remove(t.clone()),
                            })
                            .collect(),
                    })
                    .collect(),
            },
        });
    }
    Some(Patch { operations })
}
