//! Text edits: find `oldText`, build the new file, and swap it through the port's
//! compare-and-replace, so a concurrent change is a conflict rather than a lost write.

use crate::error::{FilesEditError, FilesError};
use crate::limits::TEXT_LIMIT_BYTES;
use crate::path::validate_path;
use crate::port::Files;
use crate::types::{EditInput, EditOutput, ReadInput, ReplaceRequest};

/// Runs one edit against `files`: bounded read, plan, atomic replace.
pub async fn edit<F: Files + ?Sized>(
    files: &F,
    input: EditInput,
) -> Result<EditOutput, FilesError> {
    validate_path(&input.path)?;
    let read = files
        .read(ReadInput {
            path: input.path.clone(),
            offset: 0,
            limit: None,
        })
        .await?;
    if read.truncated || read.next_offset.is_some() {
        return Err(FilesEditError::OversizedFile {
            path: input.path,
            size: read.content.len() as u64 + 1,
            limit: TEXT_LIMIT_BYTES as u64,
        }
        .into());
    }
    let (content, replacements) = plan_edit(&input, &read.content)?;
    files
        .replace(ReplaceRequest {
            path: input.path.clone(),
            expected: read.content,
            content,
        })
        .await?;
    Ok(EditOutput {
        path: input.path,
        replacements,
    })
}

/// Computes the edited text of `current`, or the reason the edit is refused.
///
/// Returns the new content and the number of replacements.
pub fn plan_edit(input: &EditInput, current: &str) -> Result<(String, u64), FilesEditError> {
    let path = || input.path.clone();
    if input.old_text.is_empty() {
        return Err(FilesEditError::MissingMatch { path: path() });
    }
    let starts: Vec<usize> = current
        .match_indices(input.old_text.as_str())
        .map(|(at, _)| at)
        .collect();
    match starts.len() {
        0 => return Err(FilesEditError::MissingMatch { path: path() }),
        1 => {}
        count if !input.replace_all => {
            return Err(FilesEditError::AmbiguousMatch {
                path: path(),
                count,
            });
        }
        _ => {}
    }
    for &start in &starts {
        let end = start + input.old_text.len();
        for offset in [start, end] {
            if splits_character(current, offset) {
                return Err(FilesEditError::PartialCharacter {
                    path: path(),
                    offset,
                });
            }
        }
    }
    let content = if input.replace_all {
        current.replace(input.old_text.as_str(), &input.new_text)
    } else {
        current.replacen(input.old_text.as_str(), &input.new_text, 1)
    };
    if content.len() > TEXT_LIMIT_BYTES {
        return Err(FilesEditError::OversizedFile {
            path: path(),
            size: content.len() as u64,
            limit: TEXT_LIMIT_BYTES as u64,
        });
    }
    Ok((content, starts.len() as u64))
}

/// Whether a cut at byte `offset` separates a base character from a following
/// combining mark, variation selector or zero-width joiner, or follows a joiner.
fn splits_character(text: &str, offset: usize) -> bool {
    if offset == 0 || offset >= text.len() {
        return false;
    }
    let next = text[offset..].chars().next();
    let previous = text[..offset].chars().next_back();
    next.is_some_and(extends) || previous == Some('\u{200D}')
}

/// Characters that attach to the one before them.
fn extends(c: char) -> bool {
    matches!(c,
        '\u{0300}'..='\u{036F}'
        | '\u{1AB0}'..='\u{1AFF}'
        | '\u{1DC0}'..='\u{1DFF}'
        | '\u{20D0}'..='\u{20FF}'
        | '\u{FE00}'..='\u{FE0F}'
        | '\u{FE20}'..='\u{FE2F}'
        | '\u{200D}'
        | '\u{E0100}'..='\u{E01EF}'
        | '\u{1F3FB}'..='\u{1F3FF}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn character_splits() {
        let text = "e\u{301}x\u{200D}y";
        // After "e" comes a combining accent; after the joiner comes "y".
        assert!(splits_character(text, 1));
        assert!(!splits_character(text, 3));
        assert!(splits_character(text, 7));
        assert!(!splits_character(text, 0));
        assert!(!splits_character(text, text.len()));
    }
}
