//! Bounded reads and the atomic compare-and-replace write.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;

use super::open::open_beneath;
use crate::error::{FilesEditError, FilesError};
use crate::limits::TEXT_LIMIT_BYTES;
use crate::types::{ReadInput, ReadOutput};

/// Reads a window of lines from `relative` beneath `root`, at most [`TEXT_LIMIT_BYTES`] of UTF-8.
///
/// The file is opened through [`open_beneath`] (no symlink followed) and checked
/// to be a regular file on the opened handle, so what is read is what was checked.
pub(crate) fn read_window(
    root: &Path,
    relative: &str,
    shown: &str,
    input: &ReadInput,
) -> Result<ReadOutput, FilesError> {
    if input.limit == Some(0) {
        return Err(FilesError::InvalidRequest(
            "limit must be at least 1".into(),
        ));
    }
    let file = open_beneath(root, relative).map_err(|e| opened_error(shown, &e))?;
    let metadata = file.metadata().map_err(|e| FilesError::io(shown, &e))?;
    if !metadata.is_file() {
        return Err(FilesError::NotAFile {
            path: shown.to_owned(),
        });
    }
    read_lines(BufReader::new(file), shown, input)
}

/// The error of an open beneath the root: a symlink met on the way is an escape.
fn opened_error(shown: &str, error: &std::io::Error) -> FilesError {
    #[cfg(unix)]
    if rustix::io::Errno::from_io_error(error) == Some(rustix::io::Errno::LOOP) {
        return FilesError::OutsideRoot {
            path: shown.to_owned(),
        };
    }
    FilesError::io(shown, error)
}

/// The window of lines of `reader`. Each read is bounded by `take()`: a line is
/// never held beyond one byte past the room left, so a multi-GB single-line
/// file costs 128 KiB of memory, not its size. Skipped lines are not held at all.
fn read_lines(
    mut reader: impl BufRead,
    shown: &str,
    input: &ReadInput,
) -> Result<ReadOutput, FilesError> {
    let io = |e: std::io::Error| FilesError::io(shown, &e);
    let not_text = || FilesError::NotText {
        path: shown.to_owned(),
    };

    let mut index: u64 = 0;
    while index < input.offset {
        if reader.skip_until(b'\n').map_err(io)? == 0 {
            break;
        }
        index += 1;
    }

    let mut line = Vec::new();
    let mut content = String::new();
    let mut lines = 0u64;
    let mut truncated = false;
    // A line was read but left out: it is the next one to ask for.
    let mut held_back = false;
    loop {
        if input.limit.is_some_and(|limit| lines >= limit) {
            break;
        }
        let room = TEXT_LIMIT_BYTES - content.len();
        line.clear();
        // One byte past the room tells a line that fits from one that does not.
        let bound = u64::try_from(room).map_or(u64::MAX, |room| room.saturating_add(1));
        if (&mut reader)
            .take(bound)
            .read_until(b'\n', &mut line)
            .map_err(io)?
            == 0
        {
            break;
        }
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
    // After a cut line its rest is unread, so there is more: the next window
    // (from the next line) may then be empty.
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::cell::Cell;
    use std::io::Read;
    use std::rc::Rc;

    use super::*;

    /// A reader that counts the bytes taken from it.
    struct Counting<R> {
        inner: R,
        taken: Rc<Cell<u64>>,
    }

    impl<R: Read> Read for Counting<R> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = self.inner.read(buf)?;
            self.taken.set(self.taken.get() + n as u64);
            Ok(n)
        }
    }

    fn window(offset: u64) -> ReadInput {
        ReadInput {
            path: "big.txt".into(),
            offset,
            limit: None,
        }
    }

    #[test]
    fn a_huge_single_line_is_cut_without_being_read_whole() {
        let taken = Rc::new(Cell::new(0));
        let huge = Counting {
            inner: std::io::repeat(b'a').take(64 * 1024 * 1024),
            taken: taken.clone(),
        };
        let got = read_lines(BufReader::new(huge), "big.txt", &window(0)).unwrap();
        assert_eq!(got.content.len(), TEXT_LIMIT_BYTES);
        assert_eq!(
            (got.lines, got.truncated, got.next_offset),
            (1, true, Some(1))
        );
        // The bound and one buffer, not the 64 MiB line.
        assert!(
            taken.get() <= (TEXT_LIMIT_BYTES + 16 * 1024) as u64,
            "{} bytes taken",
            taken.get()
        );
    }

    #[test]
    fn after_a_cut_line_the_next_window_starts_at_the_next_line() {
        let mut text = "a".repeat(TEXT_LIMIT_BYTES + 10);
        text.push_str("\nsecond\n");
        let first = read_lines(text.as_bytes(), "big.txt", &window(0)).unwrap();
        assert_eq!(first.next_offset, Some(1));
        let second = read_lines(text.as_bytes(), "big.txt", &window(1)).unwrap();
        assert_eq!(
            (
                second.content.as_str(),
                second.next_offset,
                second.truncated
            ),
            ("second\n", None, false)
        );
        // A cut last line whose rest is unread: the next window is empty and ends the file.
        let only = "a".repeat(TEXT_LIMIT_BYTES + 10);
        let cut = read_lines(only.as_bytes(), "big.txt", &window(0)).unwrap();
        assert_eq!(cut.next_offset, Some(1));
        let after = read_lines(only.as_bytes(), "big.txt", &window(1)).unwrap();
        assert_eq!((after.lines, after.next_offset), (0, None));
    }
}
