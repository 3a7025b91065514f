//! The local patch engine: stage every change in memory and in temporary files,
//! then commit with write-then-rename, undoing what was done if a step fails.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;

use super::read::{read_bounded, temp_file_in, write_atomic};
use super::resolve::Root;
use crate::error::FilesError;
use crate::limits::TEXT_LIMIT_BYTES;
use crate::patch::{FileOperation, PatchError, apply_chunks, parse_patch};
use crate::types::{ChangeKind, FileChange, PatchOutput};

struct Staged {
    shown: String,
    /// The content before the patch; `None` when the file did not exist.
    original: Option<String>,
    /// The content after the patch; `None` when the file is removed.
    new: Option<String>,
}

fn file_error(path: &str, message: &str) -> FilesError {
    PatchError::File {
        path: path.to_owned(),
        message: message.to_owned(),
    }
    .into()
}

/// Applies `text` under `root`: every file changes, or none does.
pub(crate) fn apply_patch(root: &Root, text: &str) -> Result<PatchOutput, FilesError> {
    let patch = parse_patch(text)?;
    let mut staged: BTreeMap<PathBuf, Staged> = BTreeMap::new();
    let mut changes = Vec::new();

    for operation in &patch.operations {
        let resolved = root.resolve(operation.path())?;
        let shown = resolved.relative.clone();
        let current = current(&mut staged, &resolved.real, &shown)?;
        match operation {
            FileOperation::Add { lines, .. } => {
                if current.is_some() {
                    return Err(file_error(&shown, "cannot add a file that already exists"));
                }
                set(&mut staged, &resolved.real, Some(join_lines(lines)));
                changes.push(FileChange {
                    path: shown,
                    kind: ChangeKind::Added,
                });
            }
            FileOperation::Delete { .. } => {
                if current.is_none() {
                    return Err(file_error(
                        &shown,
                        "cannot delete a file that does not exist",
                    ));
                }
                set(&mut staged, &resolved.real, None);
                changes.push(FileChange {
                    path: shown,
                    kind: ChangeKind::Deleted,
                });
            }
            FileOperation::Update {
                move_to, chunks, ..
            } => {
                let Some(current) = current else {
                    return Err(file_error(
                        &shown,
                        "cannot update a file that does not exist",
                    ));
                };
                let updated = apply_chunks(&shown, current, chunks)?;
                if updated.len() > TEXT_LIMIT_BYTES {
                    return Err(file_error(&shown, "the updated file would exceed 128 KiB"));
                }
                match move_to {
                    Some(to) => {
                        let target = root.resolve(to)?;
                        if target.real != resolved.real {
                            let existing =
                                self::current(&mut staged, &target.real, &target.relative)?;
                            if existing.is_some() {
                                return Err(file_error(
                                    &target.relative,
                                    "cannot move onto a file that already exists",
                                ));
                            }
                            set(&mut staged, &resolved.real, None);
                        }
                        set(&mut staged, &target.real, Some(updated));
                        changes.push(FileChange {
                            path: target.relative,
                            kind: ChangeKind::Moved,
                        });
                    }
                    None => {
                        set(&mut staged, &resolved.real, Some(updated));
                        changes.push(FileChange {
                            path: shown,
                            kind: ChangeKind::Updated,
                        });
                    }
                }
            }
        }
    }
    commit(&staged)?;
    Ok(PatchOutput { changes })
}

fn join_lines(lines: &[String]) -> String {
    let mut text = String::new();
    for line in lines {
        text.push_str(line);
        text.push('\n');
    }
    text
}

/// The file's content as the patch has left it so far, loading it on first use.
fn current<'a>(
    staged: &'a mut BTreeMap<PathBuf, Staged>,
    real: &PathBuf,
    shown: &str,
) -> Result<Option<&'a str>, FilesError> {
    if !staged.contains_key(real) {
        let original = match std::fs::symlink_metadata(real) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(FilesError::io(shown, &e)),
            Ok(m) if m.is_dir() => return Err(file_error(shown, "is a directory")),
            Ok(_) => Some(read_bounded(real, shown, TEXT_LIMIT_BYTES)?),
        };
        staged.insert(
            real.clone(),
            Staged {
                shown: shown.to_owned(),
                new: original.clone(),
                original,
            },
        );
    }
    Ok(staged.get(real).and_then(|entry| entry.new.as_deref()))
}

fn set(staged: &mut BTreeMap<PathBuf, Staged>, real: &PathBuf, new: Option<String>) {
    if let Some(entry) = staged.get_mut(real) {
        entry.new = new;
    }
}

/// Stages temp files, then renames and removes; on failure, restores what was done.
fn commit(staged: &BTreeMap<PathBuf, Staged>) -> Result<(), FilesError> {
    let changed: Vec<(&PathBuf, &Staged)> = staged
        .iter()
        .filter(|(_, entry)| entry.new != entry.original)
        .collect();
    let mut temps: Vec<(PathBuf, PathBuf)> = Vec::new();
    let mut created_dirs: Vec<PathBuf> = Vec::new();
    let cleanup = |temps: &[(PathBuf, PathBuf)], created_dirs: &[PathBuf]| {
        for (temp, _) in temps {
            if let Err(error) = std::fs::remove_file(temp) {
                tracing::warn!(?temp, %error, "could not remove a staged patch file");
            }
        }
        for dir in created_dirs.iter().rev() {
            if let Err(error) = std::fs::remove_dir(dir) {
                tracing::warn!(?dir, %error, "could not remove a directory made for a patch");
            }
        }
    };

    // Stage: write every new content next to its target.
    for (real, entry) in &changed {
        let Some(content) = &entry.new else { continue };
        let staged_file = (|| {
            let parent = real
                .parent()
                .ok_or_else(|| file_error(&entry.shown, "no parent directory"))?;
            create_dirs(parent, &mut created_dirs).map_err(|e| FilesError::io(&entry.shown, &e))?;
            let (temp, mut file) =
                temp_file_in(parent).map_err(|e| FilesError::io(&entry.shown, &e))?;
            temps.push((temp, (*real).clone()));
            file.write_all(content.as_bytes())
                .and_then(|()| file.sync_all())
                .map_err(|e| FilesError::io(&entry.shown, &e))?;
            if let (Ok(metadata), Some((temp, _))) = (std::fs::metadata(real), temps.last()) {
                std::fs::set_permissions(temp, metadata.permissions())
                    .map_err(|e| FilesError::io(&entry.shown, &e))?;
            }
            Ok::<(), FilesError>(())
        })();
        if let Err(error) = staged_file {
            cleanup(&temps, &created_dirs);
            return Err(error);
        }
    }

    // Commit: rename each staged file into place, remove deleted files.
    let mut done: Vec<&(&PathBuf, &Staged)> = Vec::new();
    let mut remaining: Vec<(PathBuf, PathBuf)> = temps;
    for item in &changed {
        let (real, entry) = item;
        let step = match &entry.new {
            Some(_) => match remaining.iter().position(|(_, target)| target == *real) {
                Some(index) => {
                    let (temp, target) = remaining.remove(index);
                    std::fs::rename(&temp, &target).inspect_err(|_| {
                        remaining.push((temp.clone(), target.clone()));
                    })
                }
                None => Ok(()),
            },
            None => std::fs::remove_file(real),
        };
        if let Err(error) = step {
            rollback(&done);
            cleanup(&remaining, &[]);
            return Err(FilesError::io(&entry.shown, &error));
        }
        done.push(item);
    }
    Ok(())
}

fn rollback(done: &[&(&PathBuf, &Staged)]) {
    for (real, entry) in done.iter().rev() {
        let restored = match &entry.original {
            Some(original) => write_atomic(real, &entry.shown, original.as_bytes()),
            None => std::fs::remove_file(real).map_err(|e| FilesError::io(&entry.shown, &e)),
        };
        if let Err(error) = restored {
            tracing::error!(path = %entry.shown, %error, "could not roll back a patch step");
        }
    }
}

fn create_dirs(dir: &std::path::Path, created: &mut Vec<PathBuf>) -> std::io::Result<()> {
    let mut missing = Vec::new();
    let mut cursor = Some(dir);
    while let Some(path) = cursor {
        if path.exists() {
            break;
        }
        missing.push(path.to_path_buf());
        cursor = path.parent();
    }
    for path in missing.into_iter().rev() {
        std::fs::create_dir(&path)?;
        created.push(path);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A rename that fails part way through the commit restores the files already changed.
    #[test]
    fn a_failed_rename_rolls_back_earlier_steps() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a.txt");
        let blocker = dir.path().join("b");
        std::fs::write(&a, "a\n").unwrap();
        std::fs::create_dir(&blocker).unwrap();
        std::fs::write(blocker.join("inside"), "x").unwrap();
        let mut staged = BTreeMap::new();
        staged.insert(
            a.clone(),
            Staged {
                shown: "a.txt".into(),
                original: Some("a\n".into()),
                new: Some("A\n".into()),
            },
        );
        // Renaming a file over a non-empty directory fails after a.txt was replaced.
        staged.insert(
            blocker.clone(),
            Staged {
                shown: "b".into(),
                original: None,
                new: Some("b\n".into()),
            },
        );
        assert!(commit(&staged).is_err());
        assert_eq!(std::fs::read_to_string(&a).unwrap(), "a\n");
        let mut names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(names, vec!["a.txt", "b"]);
        assert_eq!(
            std::fs::read_to_string(blocker.join("inside")).unwrap(),
            "x"
        );
    }
}
