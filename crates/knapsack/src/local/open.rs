//! Opening a resolved path for reading without following any symlink.
//!
//! [`Root::resolve`](super::resolve::Root::resolve) checks a path and returns its
//! canonical root-relative form, with every symlink already resolved. Between that
//! check and the open, another process could swap a directory on the path for a
//! symlink that leaves the root. So the open does not take the path as text: it
//! starts from a handle on the root directory and opens one component at a time
//! with `openat(…, O_NOFOLLOW)`. A component that has become a symlink fails the
//! open (`ELOOP` or `ENOTDIR`) instead of being followed out of the root.

use std::fs::File;
use std::path::Path;

/// Opens `relative` (canonical, `/`-separated) beneath the canonical `root`, following no symlink.
#[cfg(unix)]
pub(crate) fn open_beneath(root: &Path, relative: &str) -> std::io::Result<File> {
    use rustix::fs::{CWD, Mode, OFlags, openat};
    let directory = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    // Non-blocking, so a FIFO swapped in does not hang the open; reads of regular
    // files are unaffected.
    let file = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK;
    let mut dir = openat(CWD, root, directory, Mode::empty())?;
    let mut parts = relative
        .split('/')
        .filter(|part| !part.is_empty())
        .peekable();
    while let Some(part) = parts.next() {
        if parts.peek().is_some() {
            dir = openat(&dir, part, directory, Mode::empty())?;
        } else {
            return Ok(File::from(openat(&dir, part, file, Mode::empty())?));
        }
    }
    Ok(File::from(dir))
}

/// Elsewhere: an ordinary open of the resolved path (the check-then-open race remains).
#[cfg(not(unix))]
pub(crate) fn open_beneath(root: &Path, relative: &str) -> std::io::Result<File> {
    File::open(root.join(relative))
}

#[cfg(all(test, unix))]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::io::Read;

    use super::*;

    #[test]
    fn a_directory_swapped_for_a_symlink_after_resolution_is_not_followed() {
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::create_dir(root.path().join("sub")).unwrap();
        std::fs::write(root.path().join("sub/a.txt"), "inside").unwrap();
        std::fs::write(outside.path().join("a.txt"), "secret").unwrap();
        let canonical = std::fs::canonicalize(root.path()).unwrap();

        let mut text = String::new();
        open_beneath(&canonical, "sub/a.txt")
            .unwrap()
            .read_to_string(&mut text)
            .unwrap();
        assert_eq!(text, "inside");

        // The swap, as if it happened between resolve and open.
        std::fs::rename(root.path().join("sub"), root.path().join("old")).unwrap();
        std::os::unix::fs::symlink(outside.path(), root.path().join("sub")).unwrap();
        assert!(open_beneath(&canonical, "sub/a.txt").is_err());
        // The last component too.
        std::os::unix::fs::symlink(outside.path().join("a.txt"), root.path().join("b.txt"))
            .unwrap();
        assert!(open_beneath(&canonical, "b.txt").is_err());
    }
}
