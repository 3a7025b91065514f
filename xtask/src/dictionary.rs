//! `cargo xtask dictionary`: the zstd dictionary messages are packed against.
//!
//! `crates/shiitake-store-sql/src/messages-v2.dict` is `messages-v1.dict`'s content
//! with zstd's entropy tables in front, counted from made-up messages of every shape
//! (docs/core.md, "What an entry costs"). This command remakes it from
//! `xtask/dictionary/`:
//!
//! 1. `python3 samples.py` writes the samples (a fixed seed, one message a line);
//! 2. `cc` builds `finalize.c` with the zstd sources that the locked `zstd-sys`
//!    vendors (found through `cargo metadata`), so the tables are those of the zstd
//!    the store links;
//! 3. the program finalises v1's content over the samples into v2.
//!
//! `--check` writes into a scratch directory only and fails when the committed
//! dictionary differs. A released dictionary is never changed: a different one needs
//! a new tag in `packed.rs`.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::util::{cargo, check_flag, output_checked, run_checked, workspace_root};

const USAGE: &str = "usage: cargo xtask dictionary [--check]

  remakes crates/shiitake-store-sql/src/messages-v2.dict from xtask/dictionary/
  (python3 and cc, against zstd-sys's vendored zstd); --check only compares";

/// Runs `dictionary`.
pub fn run(args: &[String]) -> Result<(), String> {
    let Some(check) = check_flag(args, USAGE)? else {
        return Ok(());
    };
    let root = workspace_root();
    let sources = root.join("xtask/dictionary");
    let store = root.join("crates/shiitake-store-sql/src");
    let scratch = std::env::temp_dir().join(format!("shiitake-dictionary-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).map_err(|error| format!("{}: {error}", scratch.display()))?;
    let made = make(&sources, &store.join("messages-v1.dict"), &scratch);
    let result = made.and_then(|made| {
        let committed = store.join("messages-v2.dict");
        if check {
            let old = std::fs::read(&committed)
                .map_err(|error| format!("{}: {error}", committed.display()))?;
            if old == made {
                println!("dictionary: messages-v2.dict is what xtask/dictionary/ makes");
                Ok(())
            } else {
                Err(format!(
                    "{} differs from what xtask/dictionary/ makes ({} bytes against {})",
                    committed.display(),
                    old.len(),
                    made.len()
                ))
            }
        } else {
            std::fs::write(&committed, &made)
                .map_err(|error| format!("{}: {error}", committed.display()))?;
            println!(
                "dictionary: wrote {} ({} bytes)",
                committed.display(),
                made.len()
            );
            Ok(())
        }
    });
    if let Err(error) = std::fs::remove_dir_all(&scratch) {
        eprintln!("dictionary: leaving {}: {error}", scratch.display());
    }
    result
}

/// Writes the samples, builds the finaliser and runs it: the dictionary's bytes.
fn make(sources: &Path, content: &Path, scratch: &Path) -> Result<Vec<u8>, String> {
    let samples = output_checked(Command::new("python3").arg(sources.join("samples.py")))?;
    let samples_path = scratch.join("samples.jsonl");
    std::fs::write(&samples_path, samples).map_err(|error| format!("samples: {error}"))?;
    let zstd = vendored_zstd()?;
    let finalize = scratch.join("finalize");
    let mut cc = Command::new("cc");
    cc.args(["-O2", "-DZSTD_DISABLE_ASM", "-I"])
        .arg(&zstd)
        .arg(sources.join("finalize.c"));
    for part in ["common", "compress", "dictBuilder", "decompress"] {
        cc.args(c_files(&zstd.join(part))?);
    }
    run_checked(cc.arg("-o").arg(&finalize))?;
    let out = scratch.join("messages-v2.dict");
    run_checked(
        Command::new(&finalize)
            .arg(content)
            .arg(&samples_path)
            .arg(&out),
    )?;
    std::fs::read(&out).map_err(|error| format!("{}: {error}", out.display()))
}

/// The `lib` directory of the zstd sources the locked `zstd-sys` builds.
fn vendored_zstd() -> Result<PathBuf, String> {
    let metadata = output_checked(Command::new(cargo()).args([
        "metadata",
        "--format-version",
        "1",
        "--locked",
    ]))?;
    let metadata: serde_json::Value =
        serde_json::from_str(&metadata).map_err(|error| format!("cargo metadata: {error}"))?;
    let manifest = metadata["packages"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|package| package["name"] == "zstd-sys")
        .and_then(|package| package["manifest_path"].as_str())
        .ok_or("cargo metadata lists no zstd-sys")?;
    let lib = Path::new(manifest)
        .parent()
        .map(|dir| dir.join("zstd/lib"))
        .ok_or("zstd-sys's manifest has no directory")?;
    if lib.join("zdict.h").is_file() {
        Ok(lib)
    } else {
        Err(format!("{} holds no zstd sources", lib.display()))
    }
}

/// The `.c` files of `dir`, in name order.
fn c_files(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let entries = std::fs::read_dir(dir).map_err(|error| format!("{}: {error}", dir.display()))?;
    let mut files: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "c"))
        .collect();
    files.sort();
    Ok(files)
}
