//! Bounded reads and the atomic compare-and-replace write.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;

use crate::error::{FilesEditError, FilesError};
use crate::limits::TEXT_LIMIT_BYTES;
use crate::types::{ReadInput, ReadOutput};

/// Reads a window of lines from `real`, at most [`TEXT_LIMIT_BYTES`] of UTF-8.
pub(crate) fn read_window(
    real: &Path,
    shown: &str,
    input: &ReadInput,
) -> Result<ReadOutput, FilesError> {
    if input.limit == Some(0) {
        return Err(FilesError::InvalidRequest(
            "limit must be at least 1".into(),
        ));
    }
    let metadata = std::fs::metadata(real).map_err(|e| FilesError::io(shown, &e))?;
    if !metadata.is_file() {
        return Err(FilesError::NotAFile {
            path: shown.to_owned(),
        });
    }
    let file = std::fs::File::open(real).map_err(|e| FilesError::io(shown, &e))?;
    let mut reader = BufReader::new(file);
    let io = |e: std::io::Error| FilesError::io(shown, &e);
    let not_text = || FilesError::NotText {
        path: shown.to_owned(),
    };

    let mut line = Vec::new();
    let mut index: u64 = 0;
    while index < input.offset {
        line.clear();
        if reader.read_until(b'\n', &mut line).map_err(io)? == 0 {
            break;
        }
        index += 1;
    }

    let mut content = String::new();
    let mut lines = 0u64;
    let mut truncated = false;
    // A line was read but left out: it is the next one to ask for.
    let mut held_back = false;
    loop {
        if input.limit.is_some_and(|limit| lines >= limit) {
            break;
        }
        line.clear();
        if reader.read_until(b'\n', &mut line).map_err(io)? == 0 {
            break;
        }
        let room = TEXT_LIMIT_BYTES - content.len();
        if line.len() <= room {
            content.push_str(std::str::from_utf8(&line).map_err(|_| not_text())?);
            lines += 1;
            continue;
        }
        truncated = true;
        if lines == 0 {
            // One line longer than the bound: return its first 128 KiB, cut on a
            // character boundary, and continue after it.
            let text = match std::str::from_utf8(&line[..room]) {
                Ok(text) => text,
                Err(e) if e.error_len().is_none() => {
                    std::str::from_utf8(&line[..e.valid_up_to()]).map_err(|_| not_text())?
                }
                Err(_) => return Err(not_text()),
            };
            content.push_str(text);
            lines = 1;
        } else {
            held_back = true;
        }
        break;
    }
    let more = held_back || !reader.fill_buf().map_err(io)?.is_empty();
    Ok(ReadOutput {
        path: shown.to_owned(),
        content,
        offset: input.offset,
        lines,
        next_offset: more.then_some(input.offset + lines),
        truncated,
    })
}

/// Reads a whole file as UTF-8 if it is at most `limit` bytes.
pub(crate) fn read_bounded(real: &Path, shown: &str, limit: usize) -> Result<String, FilesError> {
    let metadata = std::fs::metadata(real).map_err(|e| FilesError::io(shown, &e))?;
    if !metadata.is_file() {
        return Err(FilesError::NotAFile {
            path: shown.to_owned(),
        });
    }
    if metadata.len() > limit as u64 {
        return Err(FilesEditError::OversizedFile {
            path: shown.to_owned(),
            size: metadata.len(),
            limit: limit as u64,
        }
        .into());
    }
    let file = std::fs::File::open(real).map_err(|e| FilesError::io(shown, &e))?;
    let mut bytes = Vec::new();
    file.take(limit as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| FilesError::io(shown, &e))?;
    if bytes.len() > limit {
        return Err(FilesEditError::OversizedFile {
            path: shown.to_owned(),
            size: bytes.len() as u64,
            limit: limit as u64,
        }
        .into());
    }
    String::from_utf8(bytes).map_err(|_| FilesError::NotText {
        path: shown.to_owned(),
    })
}

/// Writes `content` to a temporary file next to `real`, then renames it over `real`,
/// so readers see the old file or the new one, never a mix.
pub(crate) fn write_atomic(real: &Path, shown: &str, content: &[u8]) -> Result<(), FilesError> {
    let io = |e: std::io::Error| FilesError::io(shown, &e);
    let parent = real.parent().ok_or_else(|| FilesError::InvalidPath {
        path: shown.to_owned(),
        reason: "the path has no parent directory".into(),
    })?;
    let mut temp = temp_file_in(parent).map_err(io)?;
    temp.1.write_all(content).map_err(io)?;
    temp.1.sync_all().map_err(io)?;
    if let Ok(metadata) = std::fs::metadata(real) {
        std::fs::set_permissions(&temp.0, metadata.permissions()).map_err(io)?;
    }
    std::fs::rename(&temp.0, real).map_err(|e| {
        if let Err(error) = std::fs::remove_file(&temp.0) {
            tracing::warn!(temp = ?temp.0, %error, "could not remove a temporary file");
        }
        io(e)
    })
}

/// Creates a fresh, exclusive temporary file in `dir`.
pub(crate) fn temp_file_in(dir: &Path) -> std::io::Result<(std::path::PathBuf, std::fs::File)> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let pid = std::process::id();
    loop {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let path = dir.join(format!(".knapsack-{pid}-{n}-{nanos}.tmp"));
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
        {
            Ok(file) => return Ok((path, file)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
    }
}
