//! The data directory of `serve`: private, and held by one process at a time.
//!
//! The directory is created `0700` and tightened to it at every start, with the
//! token and the database files (`shiitake.db`, `-wal`, `-shm`) at `0600`. A
//! second `serve` on the same directory would open the same database and could
//! resume the first one's running work, so each `serve` holds an exclusive lock
//! on `<data-dir>/lock` for its whole life; the lock file names the holder's pid
//! for the message the second one prints. The lock is an `flock`-style advisory
//! lock through `std::fs::File::try_lock` (no extra dependency): the system
//! releases it when the process ends, however it ends.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, Write};
use std::path::Path;

use crate::error::CliError;

/// The files of a data directory that must be private, besides the directory itself.
pub const PRIVATE_FILES: [&str; 5] = [
    "token",
    "lock",
    "shiitake.db",
    "shiitake.db-wal",
    "shiitake.db-shm",
];

/// The exclusive hold of one data directory; released when dropped or when the process ends.
#[derive(Debug)]
pub struct DataDirLock {
    _file: File,
}

fn io_error(path: &Path) -> impl Fn(std::io::Error) -> CliError + '_ {
    move |error| CliError::Setup(format!("data directory: {}: {error}", path.display()))
}

/// Creates `dir` (mode `0700`) if needed and makes it and its private files private.
pub fn prepare(dir: &Path) -> Result<(), CliError> {
    private_dir(dir).map_err(io_error(dir))?;
    tighten(dir)
}

/// Creates `dir` (and its parents) if absent, the new ones readable by this user only.
pub fn private_dir(dir: &Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder.create(dir)
}

/// Sets `dir` to `0700` and each existing private file to `0600`.
pub fn tighten(dir: &Path) -> Result<(), CliError> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let metadata = std::fs::symlink_metadata(dir).map_err(io_error(dir))?;
        if !metadata.is_dir() {
            return Err(CliError::Setup(format!(
                "data directory: {} is not a directory",
                dir.display()
            )));
        }
        set_mode(dir, 0o700)?;
        for name in PRIVATE_FILES {
            let path = dir.join(name);
            match std::fs::symlink_metadata(&path) {
                Ok(metadata) if metadata.file_type().is_symlink() => {
                    return Err(CliError::Setup(format!(
                        "data directory: {} is a symbolic link; the data directory's files must be \
                         its own",
                        path.display()
                    )));
                }
                Ok(metadata) if metadata.permissions().mode() & 0o077 != 0 => {
                    set_mode(&path, 0o600)?;
                }
                Ok(_) => {}
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
                Err(error) => return Err(io_error(&path)(error)),
            }
        }
    }
    #[cfg(not(unix))]
    let _ = dir;
    Ok(())
}

#[cfg(unix)]
fn set_mode(path: &Path, mode: u32) -> Result<(), CliError> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).map_err(io_error(path))
}

/// Takes the exclusive lock of `dir`, or says which process holds it.
pub fn lock(dir: &Path) -> Result<DataDirLock, CliError> {
    let path = dir.join("lock");
    let mut options = OpenOptions::new();
    options.read(true).write(true).create(true).truncate(false);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        // `tighten` refused a symlink here; the directory is private, so none appears since.
        options.mode(0o600);
    }
    let mut file = options.open(&path).map_err(io_error(&path))?;
    match file.try_lock() {
        Ok(()) => {
            let pid = std::process::id();
            file.set_len(0)
                .and_then(|()| file.rewind())
                .and_then(|()| file.write_all(format!("{pid}\n").as_bytes()))
                .and_then(|()| file.sync_all())
                .map_err(io_error(&path))?;
            Ok(DataDirLock { _file: file })
        }
        Err(TryLockError::WouldBlock) => {
            let mut text = String::new();
            // The holder writes its pid just after locking; an empty file means it is starting.
            let holder = match file.read_to_string(&mut text) {
                Ok(_) if !text.trim().is_empty() => format!("pid {}", text.trim()),
                _ => "a process that is starting".to_owned(),
            };
            Err(CliError::Setup(format!(
                "the data directory {} is in use by another `shiitake serve` ({holder}); \
                 stop that one, or pass another --data-dir",
                dir.display()
            )))
        }
        Err(TryLockError::Error(error)) => Err(io_error(&path)(error)),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn one_lock_per_directory_and_the_refusal_names_the_holder() {
        let dir = tempfile::tempdir().unwrap();
        prepare(dir.path()).unwrap();
        let held = lock(dir.path()).unwrap();
        let refused = lock(dir.path()).unwrap_err().to_string();
        assert!(
            refused.contains(&format!("pid {}", std::process::id())),
            "{refused}"
        );
        drop(held);
        assert!(lock(dir.path()).is_ok());
        assert!(dir.path().join("lock").is_file());
    }

    #[cfg(unix)]
    #[test]
    fn a_symlinked_private_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("elsewhere"), "x").unwrap();
        std::os::unix::fs::symlink(outside.path().join("elsewhere"), dir.path().join("token"))
            .unwrap();
        let refused = prepare(dir.path()).unwrap_err().to_string();
        assert!(refused.contains("symbolic link"), "{refused}");
    }
}
