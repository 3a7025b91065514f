//! Where a scripted model keeps its place in its script.
//!
//! A [`ScriptedModel`](super::ScriptedModel) value counts its calls in memory: a test
//! that hands one model to an Agent sees every call, of every run, play the next turn.
//! A host that builds a model per run from a `scripted:<path>` spec (serve does) would
//! start each run at the first turn; with a place file the models built from one
//! script share their place, so the script plays on across a Session's runs and across
//! a restart of the process, as a script's author expects.
//!
//! The file holds the number of calls made so far, as decimal text. Each call takes the
//! next number under an exclusive lock on a sibling `.lock` file (concurrent calls, of
//! this process or another, never take the same turn) and replaces the file by writing a
//! temporary one and renaming it over, so a crash leaves the old count or the new one.

use std::fs::{self, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};

/// The place file of the script at `script` under the directory `dir`: one per script
/// path, named after the file and a hash of its full path, so two scripts with the same
/// name keep separate places.
pub(crate) fn place_file(dir: &Path, script: &Path) -> PathBuf {
    let full = fs::canonicalize(script).unwrap_or_else(|_| script.to_path_buf());
    let stem = script
        .file_stem()
        .map(|stem| stem.to_string_lossy().into_owned())
        .unwrap_or_else(|| "script".to_owned());
    dir.join(format!(
        "{stem}-{:016x}.place",
        fnv1a(full.as_os_str().as_encoded_bytes())
    ))
}

/// Takes the next call of the place kept in `path`: the number of calls made before
/// this one (0 for the first), counting this one as made.
pub(crate) fn take_call(path: &Path) -> io::Result<u64> {
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir)?;
    }
    let lock = OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(false)
        .open(path.with_extension("lock"))?;
    // Held until `lock` is dropped at the end of this call.
    lock.lock()?;
    let made = match fs::read_to_string(path) {
        Ok(text) => text.trim().parse::<u64>().map_err(|error| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{} does not hold a call count: {error}", path.display()),
            )
        })?,
        Err(error) if error.kind() == io::ErrorKind::NotFound => 0,
        Err(error) => return Err(error),
    };
    let temporary = path.with_extension("place.tmp");
    fs::write(&temporary, made.saturating_add(1).to_string())?;
    fs::rename(&temporary, path)?;
    Ok(made)
}

/// FNV-1a, 64 bits: a hash that stays the same across builds and platforms, so a place
/// file is found again after an upgrade.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn calls_count_up_from_zero_and_a_fresh_place_starts_over() {
        let dir = tempfile::tempdir().unwrap();
        let place = dir.path().join("places").join("s.place");
        let taken: Vec<u64> = (0..3).map(|_| take_call(&place).unwrap()).collect();
        assert_eq!(taken, [0, 1, 2]);
        assert_eq!(fs::read_to_string(&place).unwrap(), "3");
        assert_eq!(take_call(&dir.path().join("other.place")).unwrap(), 0);
    }

    #[test]
    fn concurrent_calls_never_take_the_same_number() {
        let dir = tempfile::tempdir().unwrap();
        let place = dir.path().join("s.place");
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let place = place.clone();
                std::thread::spawn(move || {
                    (0..25)
                        .map(|_| take_call(&place).unwrap())
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let mut taken: Vec<u64> = threads
            .into_iter()
            .flat_map(|thread| thread.join().unwrap())
            .collect();
        taken.sort_unstable();
        assert_eq!(taken, (0..100).collect::<Vec<_>>());
    }

    #[test]
    fn a_damaged_place_is_an_error_not_a_fresh_start() {
        let dir = tempfile::tempdir().unwrap();
        let place = dir.path().join("s.place");
        fs::write(&place, "three").unwrap();
        let error = take_call(&place).unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::InvalidData);
        assert!(error.to_string().contains("call count"), "{error}");
    }

    #[test]
    fn scripts_of_the_same_name_in_different_directories_keep_separate_places() {
        let dir = Path::new("/places");
        let a = place_file(dir, Path::new("/a/script.json"));
        let b = place_file(dir, Path::new("/b/script.json"));
        assert_ne!(a, b);
        assert!(
            a.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("script-")
        );
        assert_eq!(a, place_file(dir, Path::new("/a/script.json")));
    }
}
