//! `cargo xtask web-vendor`: the web page's vendored Markdown parser.
//!
//! The page (`crates/shiitake-server/src/web/`) renders answers with markdown-it's
//! parser, bundled into one ES module and committed under `src/web/vendor/`, so
//! `cargo build` never needs npm. This command remakes that directory from
//! `xtask/web-vendor/` (`package.json` with exact versions, `package-lock.json`
//! pinning every transitive package by integrity hash, `entry.js`):
//!
//! 1. copies the three files to a scratch directory and runs `npm ci --ignore-scripts`
//!    there (no install script runs; nothing lands in the work tree);
//! 2. bundles `entry.js` with the locked esbuild (`--platform=neutral`, so packages
//!    resolve to their plain builds, not browser builds that decode through the DOM);
//! 3. writes `markdown-it.js` (with a header naming every bundled package and
//!    version) and `LICENSES.md` (each bundled package's licence text, from the
//!    packages themselves, listed through esbuild's metafile).
//!
//! `--check` builds into the scratch directory only and fails when the committed
//! files differ from what the lock produces. `docs/web.md` says why a library.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::util::{check_flag, run_checked, workspace_root};

const USAGE: &str = "usage: cargo xtask web-vendor [--check]

  rebuilds crates/shiitake-server/src/web/vendor/ (markdown-it.js, LICENSES.md)
  from xtask/web-vendor/ with npm ci and esbuild; --check only compares";

/// The bundle's name under `src/web/vendor/` (served as `/web/markdown-it.js`).
const BUNDLE: &str = "markdown-it.js";
/// The licences of everything in the bundle.
const LICENSES: &str = "LICENSES.md";
/// What is copied from `xtask/web-vendor/` into the scratch directory.
const INPUTS: &[&str] = &["package.json", "package-lock.json", "entry.js"];

/// Runs `web-vendor`.
pub fn run(args: &[String]) -> Result<(), String> {
    let Some(check) = check_flag(args, USAGE)? else {
        return Ok(());
    };
    let root = workspace_root();
    let inputs = root.join("xtask/web-vendor");
    let vendor = root.join("crates/shiitake-server/src/web/vendor");
    let scratch = std::env::temp_dir().join(format!("shiitake-web-vendor-{}", std::process::id()));
    let built = build(&inputs, &scratch);
    let result = built.and_then(|files| {
        if check {
            compare(&vendor, &files)
        } else {
            write(&vendor, &files)
        }
    });
    // The scratch copy holds node_modules only; a failed removal leaves a temp dir behind.
    if let Err(error) = std::fs::remove_dir_all(&scratch) {
        eprintln!(
            "web-vendor: could not remove {}: {error}",
            scratch.display()
        );
    }
    result
}

/// The vendored files (name, content) built from `inputs` in `scratch`.
fn build(inputs: &Path, scratch: &Path) -> Result<Vec<(&'static str, String)>, String> {
    std::fs::create_dir_all(scratch).map_err(|e| format!("{}: {e}", scratch.display()))?;
    for name in INPUTS {
        let from = inputs.join(name);
        std::fs::copy(&from, scratch.join(name)).map_err(|e| format!("{}: {e}", from.display()))?;
    }
    run_checked(
        Command::new("npm")
            .args(["ci", "--ignore-scripts", "--no-audit", "--no-fund"])
            .current_dir(scratch),
    )?;
    run_checked(
        Command::new(scratch.join("node_modules/.bin/esbuild"))
            .args([
                "entry.js",
                "--bundle",
                "--format=esm",
                "--platform=neutral",
                "--main-fields=module,main",
                "--legal-comments=none",
                "--charset=utf8",
                "--log-level=warning",
                "--metafile=meta.json",
                "--outfile=out.js",
            ])
            .current_dir(scratch),
    )?;
    let packages = bundled_packages(scratch)?;
    let bundle = format!("{}\n{}", banner(&packages), read(&scratch.join("out.js"))?);
    let licenses = licenses(scratch, &packages)?;
    Ok(vec![(BUNDLE, bundle), (LICENSES, licenses)])
}

/// The packages in the bundle (from esbuild's metafile), by name, with their versions.
fn bundled_packages(scratch: &Path) -> Result<BTreeMap<String, String>, String> {
    bundled_from_metafile(scratch)?
        .into_iter()
        .map(|name| {
            let manifest = package_json(scratch, &name)?;
            let version = manifest["version"]
                .as_str()
                .ok_or_else(|| format!("{name}: package.json has no version"))?
                .to_owned();
            Ok((name, version))
        })
        .collect()
}

/// Package names of the metafile's inputs (`node_modules/<name>/…`), sorted, once each.
fn bundled_from_metafile(scratch: &Path) -> Result<Vec<String>, String> {
    let meta: serde_json::Value = serde_json::from_str(&read(&scratch.join("meta.json"))?)
        .map_err(|e| format!("meta.json: {e}"))?;
    let inputs = meta["inputs"]
        .as_object()
        .ok_or("meta.json has no inputs")?;
    let mut names: Vec<String> = inputs.keys().filter_map(|path| package_of(path)).collect();
    names.sort();
    names.dedup();
    Ok(names)
}

/// `markdown-it` of `node_modules/markdown-it/lib/x.mjs`, `@scope/name` of scoped paths.
fn package_of(path: &str) -> Option<String> {
    let rest = path.strip_prefix("node_modules/")?;
    let mut parts = rest.split('/');
    let first = parts.next()?;
    if first.starts_with('@') {
        Some(format!("{first}/{}", parts.next()?))
    } else {
        Some(first.to_owned())
    }
}

fn package_json(scratch: &Path, name: &str) -> Result<serde_json::Value, String> {
    let path = scratch.join("node_modules").join(name).join("package.json");
    serde_json::from_str(&read(&path)?).map_err(|e| format!("{}: {e}", path.display()))
}

fn banner(packages: &BTreeMap<String, String>) -> String {
    let list: Vec<String> = packages
        .iter()
        .map(|(name, version)| format!("{name}@{version}"))
        .collect();
    format!(
        "// Generated by `cargo xtask web-vendor` from xtask/web-vendor/: do not edit.\n\
         // Bundled: {}. Licences: LICENSES.md beside this file.",
        list.join(", ")
    )
}

/// `LICENSES.md`: each bundled package, its version and declared licence, and the
/// licence file it ships.
fn licenses(scratch: &Path, packages: &BTreeMap<String, String>) -> Result<String, String> {
    let mut out = String::from(
        "# Licences of the vendored web code\n\n\
         `markdown-it.js` bundles these npm packages (written by `cargo xtask web-vendor`;\n\
         the versions are pinned by `xtask/web-vendor/package-lock.json`).\n",
    );
    for (name, version) in packages {
        let manifest = package_json(scratch, name)?;
        let declared = manifest["license"].as_str().unwrap_or("(not declared)");
        let text = license_text(&scratch.join("node_modules").join(name))?;
        out.push_str(&format!(
            "\n## {name} {version} ({declared})\n\n```text\n{}\n```\n",
            text.trim_end()
        ));
    }
    Ok(out)
}

/// The licence file a package ships (`LICENSE`, `LICENSE.md`, `license`, …).
fn license_text(dir: &Path) -> Result<String, String> {
    let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut candidates: Vec<PathBuf> = entries
        .filter_map(|entry| entry.ok().map(|entry| entry.path()))
        .filter(|path| {
            path.file_name()
                .and_then(|name| name.to_str())
                .is_some_and(|name| {
                    let lower = name.to_ascii_lowercase();
                    lower.starts_with("license") || lower.starts_with("licence")
                })
        })
        .collect();
    candidates.sort();
    match candidates.first() {
        Some(path) => read(path),
        None => Err(format!("{} ships no licence file", dir.display())),
    }
}

fn read(path: &Path) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))
}

fn write(vendor: &Path, files: &[(&str, String)]) -> Result<(), String> {
    std::fs::create_dir_all(vendor).map_err(|e| format!("{}: {e}", vendor.display()))?;
    for (name, content) in files {
        let path = vendor.join(name);
        std::fs::write(&path, content).map_err(|e| format!("{}: {e}", path.display()))?;
        eprintln!(
            "web-vendor: wrote {} ({} bytes)",
            path.display(),
            content.len()
        );
    }
    Ok(())
}

fn compare(vendor: &Path, files: &[(&str, String)]) -> Result<(), String> {
    let stale: Vec<&str> = files
        .iter()
        .filter(|(name, content)| {
            std::fs::read_to_string(vendor.join(name)).ok().as_ref() != Some(content)
        })
        .map(|(name, _)| *name)
        .collect();
    if stale.is_empty() {
        eprintln!("web-vendor: {} matches xtask/web-vendor/", vendor.display());
        Ok(())
    } else {
        Err(format!(
            "{} differs from what xtask/web-vendor/ builds: {}; run `cargo xtask web-vendor`",
            vendor.display(),
            stale.join(", ")
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metafile_paths_name_their_package() {
        assert_eq!(
            package_of("node_modules/markdown-it/lib/index.mjs").as_deref(),
            Some("markdown-it")
        );
        assert_eq!(
            package_of("node_modules/@scope/name/index.js").as_deref(),
            Some("@scope/name")
        );
        assert_eq!(package_of("entry.js"), None);
    }
}
