//! `cargo xtask stranger`: build a consumer outside the workspace against the packaged crates only.
//!
//! A crate that builds inside the workspace can still be broken for everyone else:
//! a file left out of the package, a `path` that only exists here, a dependency
//! that only the workspace provides. The stranger catches that. It runs `pack`,
//! unpacks every `.crate` into `$TMPDIR/shiitake-stranger/packed/`, writes a consumer
//! in `$TMPDIR/shiitake-stranger/consumer/` from the fixture in
//! `xtask/stranger-fixture/` (its own empty `[workspace]`, a dependency on every
//! packaged library by version, `[patch.crates-io]` pointing each at its unpacked
//! copy), and then:
//!
//! 1. guards: `cargo tree`, `cargo metadata` and the `Cargo.lock` of the consumer
//!    must not mention the workspace root, and every packaged library must resolve
//!    to its unpacked copy;
//! 2. builds and runs the fixture, with a target directory that outlives the run
//!    ([`TARGET_DIR`]) so the next run is incremental.
//!
//! The guard runs first because it needs no build and so fails in seconds. The
//! hidden flag `--leak` points one dependency back at the workspace to prove that
//! the guard fails when it should.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use crate::pack::{self, Packaged};
use crate::util::{cargo, output_checked, run_checked, workspace_root};

/// Where the consumer is built; kept between runs so they are incremental.
pub const TARGET_DIR: &str = "/var/tmp/shiitake-stranger-target";

/// The line of the fixture manifest replaced by one dependency per packaged library.
const DEPENDENCIES_MARKER: &str = "# @dependencies@";

/// The line of the fixture manifest replaced by one patch per packaged library.
const PATCHES_MARKER: &str = "# @patches@";

/// Runs the stranger check.
pub fn run(args: &[String]) -> Result<(), String> {
    let leak = match args {
        [] => false,
        [flag] if flag == "--leak" => true,
        [other, ..] => return Err(format!("`stranger` takes no arguments, got `{other}`")),
    };
    let started = Instant::now();
    let root = workspace_root();
    let home = std::env::temp_dir().join("shiitake-stranger");
    fs::create_dir_all(&home).map_err(|error| io_error(&home, &error))?;
    let home = home
        .canonicalize()
        .map_err(|error| io_error(&home, &error))?;
    let roots = workspace_roots(&root);
    if roots.iter().any(|root| home.starts_with(root)) {
        return Err(format!(
            "{} is inside the workspace; set TMPDIR elsewhere",
            home.display()
        ));
    }

    let packaged = pack::run(&[])?;
    let (libraries, others): (Vec<&Packaged>, Vec<&Packaged>) = packaged
        .iter()
        .partition(|package| package.member.has_library);
    for package in others {
        println!(
            "stranger: {} has no library target; packed and checked, not built",
            package.member.name
        );
    }
    let packed = home.join("packed");
    unpack(&packaged, &home.join("unpacking"), &packed)?;

    let consumer = home.join("consumer");
    let leaked = if leak {
        libraries
            .first()
            .map(|package| package.member.name.as_str())
    } else {
        None
    };
    write_consumer(&root, &consumer, &libraries, leaked)?;
    guard(&consumer, &roots, &packed, &libraries)?;
    println!(
        "stranger: guard passed: nothing resolves inside {}",
        root.display()
    );

    println!("stranger: building the fixture in {TARGET_DIR}");
    run_checked(
        Command::new(cargo())
            .current_dir(&consumer)
            .env("CARGO_TARGET_DIR", TARGET_DIR)
            .args(["run", "--manifest-path"])
            .arg(consumer.join("Cargo.toml")),
    )?;
    println!(
        "stranger: ok: {} packaged libraries consumed from outside the workspace in {:.1}s",
        libraries.len(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// The workspace root as given and as resolved through symlinks.
fn workspace_roots(root: &Path) -> Vec<PathBuf> {
    let mut roots = vec![root.to_path_buf()];
    if let Ok(canonical) = root.canonicalize()
        && canonical != root
    {
        roots.push(canonical);
    }
    roots
}

/// Unpacks every package into `packed/NAME-VERSION`, touching only files whose
/// bytes changed: unpacked files carry the fixed timestamp cargo gives them, so
/// cargo would otherwise never notice that a source changed.
fn unpack(packaged: &[Packaged], staging: &Path, packed: &Path) -> Result<(), String> {
    if staging.exists() {
        fs::remove_dir_all(staging).map_err(|error| io_error(staging, &error))?;
    }
    fs::create_dir_all(staging).map_err(|error| io_error(staging, &error))?;
    fs::create_dir_all(packed).map_err(|error| io_error(packed, &error))?;
    for package in packaged {
        run_checked(
            Command::new("tar")
                .arg("-xzf")
                .arg(&package.crate_file)
                .arg("-C")
                .arg(staging),
        )?;
    }
    sync_tree(staging, packed)?;
    fs::remove_dir_all(staging).map_err(|error| io_error(staging, &error))
}

/// Makes `to` hold exactly the files of `from`, rewriting only files that differ.
fn sync_tree(from: &Path, to: &Path) -> Result<(), String> {
    fs::create_dir_all(to).map_err(|error| io_error(to, &error))?;
    for entry in fs::read_dir(from).map_err(|error| io_error(from, &error))? {
        let entry = entry.map_err(|error| io_error(from, &error))?;
        let source = entry.path();
        let target = to.join(entry.file_name());
        if source.is_dir() {
            sync_tree(&source, &target)?;
        } else {
            let bytes = fs::read(&source).map_err(|error| io_error(&source, &error))?;
            write_if_changed(&target, &bytes)?;
        }
    }
    for entry in fs::read_dir(to).map_err(|error| io_error(to, &error))? {
        let entry = entry.map_err(|error| io_error(to, &error))?;
        let target = entry.path();
        if !from.join(entry.file_name()).exists() {
            let removed = if target.is_dir() {
                fs::remove_dir_all(&target)
            } else {
                fs::remove_file(&target)
            };
            removed.map_err(|error| io_error(&target, &error))?;
        }
    }
    Ok(())
}

fn write_if_changed(path: &Path, bytes: &[u8]) -> Result<(), String> {
    if fs::read(path).is_ok_and(|current| current == bytes) {
        return Ok(());
    }
    fs::write(path, bytes).map_err(|error| io_error(path, &error))
}

/// Writes the consumer: the fixture's sources and its rendered manifest. The old
/// `Cargo.lock` goes, so versions resolve fresh from crates.io as for a stranger.
fn write_consumer(
    root: &Path,
    consumer: &Path,
    libraries: &[&Packaged],
    leaked: Option<&str>,
) -> Result<(), String> {
    let fixture = root.join("xtask").join("stranger-fixture");
    let template_path = fixture.join("Cargo.toml.in");
    let template =
        fs::read_to_string(&template_path).map_err(|error| io_error(&template_path, &error))?;
    let patches: Vec<(String, String, PathBuf)> = libraries
        .iter()
        .map(|package| {
            let member = &package.member;
            let path = if leaked == Some(member.name.as_str()) {
                member.dir.clone()
            } else {
                Path::new("..").join("packed").join(package.dir_name())
            };
            (member.name.clone(), member.version.clone(), path)
        })
        .collect();
    let manifest = render_manifest(&template, &patches)?;
    sync_tree(&fixture.join("src"), &consumer.join("src"))?;
    write_if_changed(&consumer.join("Cargo.toml"), manifest.as_bytes())?;
    let lock = consumer.join("Cargo.lock");
    if lock.exists() {
        fs::remove_file(&lock).map_err(|error| io_error(&lock, &error))?;
    }
    Ok(())
}

/// Fills the fixture manifest: for each `(name, version, path)`, an exact
/// dependency on that version and a `[patch.crates-io]` entry to that path.
pub fn render_manifest(
    template: &str,
    crates: &[(String, String, PathBuf)],
) -> Result<String, String> {
    let dependencies: Vec<String> = crates
        .iter()
        .map(|(name, version, _)| format!("{name} = \"={version}\""))
        .collect();
    let patches: Vec<String> = crates
        .iter()
        .map(|(name, _, path)| {
            format!(
                "{name} = {{ path = {} }}",
                toml_string(&path.to_string_lossy())
            )
        })
        .collect();
    let mut found = (false, false);
    let lines: Vec<String> = template
        .lines()
        .map(|line| match line.trim() {
            DEPENDENCIES_MARKER => {
                found.0 = true;
                dependencies.join("\n")
            }
            PATCHES_MARKER => {
                found.1 = true;
                patches.join("\n")
            }
            _ => line.to_owned(),
        })
        .collect();
    match found {
        (true, true) => Ok(lines.join("\n") + "\n"),
        _ => Err(format!(
            "the fixture manifest needs a `{DEPENDENCIES_MARKER}` line and a `{PATCHES_MARKER}` line"
        )),
    }
}

fn toml_string(text: &str) -> String {
    format!("\"{}\"", text.replace('\\', "\\\\").replace('"', "\\\""))
}

/// Fails when the consumer's resolution reaches into the workspace or a packaged
/// library does not come from its unpacked copy.
fn guard(
    consumer: &Path,
    roots: &[PathBuf],
    packed: &Path,
    libraries: &[&Packaged],
) -> Result<(), String> {
    let in_consumer =
        |args: &[&str]| output_checked(Command::new(cargo()).current_dir(consumer).args(args));
    // `cargo tree` resolves and writes the Cargo.lock that is read afterwards.
    let tree = in_consumer(&["tree", "--prefix", "none", "--target", "all"])?;
    let metadata = in_consumer(&["metadata", "--format-version", "1"])?;
    let lock_path = consumer.join("Cargo.lock");
    let lock = fs::read_to_string(&lock_path).map_err(|error| io_error(&lock_path, &error))?;

    let mut problems = leaks("cargo tree", &tree, roots);
    problems.extend(leaks("cargo metadata", &metadata, roots));
    problems.extend(leaks("Cargo.lock", &lock, roots));
    let expected: Vec<(String, String, PathBuf)> = libraries
        .iter()
        .map(|package| {
            let member = &package.member;
            (
                member.name.clone(),
                member.version.clone(),
                packed.join(package.dir_name()),
            )
        })
        .collect();
    problems.extend(unpatched(&tree, &expected));
    if problems.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "GUARD FAILED: the stranger reaches into the workspace or misses a package:\n  {}",
            problems.join("\n  ")
        ))
    }
}

/// Lines of `text` that mention a path inside one of `roots`, each cut to a short excerpt.
pub fn leaks(source: &str, text: &str, roots: &[PathBuf]) -> Vec<String> {
    let mut found = Vec::new();
    for line in text.lines() {
        let hit = roots
            .iter()
            .find_map(|root| find_path(line, &root.to_string_lossy()));
        if let Some(at) = hit {
            found.push(format!("{source}: {}", excerpt(line, at)));
        }
    }
    found
}

/// Where `root` occurs in `line` as a whole path (not as the start of `/work/mainline`).
fn find_path(line: &str, root: &str) -> Option<usize> {
    let root = root.trim_end_matches('/');
    if root.is_empty() {
        return None;
    }
    line.match_indices(root).map(|(at, _)| at).find(|at| {
        let after = line[at + root.len()..].chars().next();
        !matches!(after, Some(c) if c.is_alphanumeric() || matches!(c, '-' | '_' | '.'))
    })
}

fn excerpt(line: &str, at: usize) -> String {
    const WIDTH: usize = 100;
    if line.len() <= 2 * WIDTH {
        return line.trim().to_owned();
    }
    let start = line.floor_char_boundary(at.saturating_sub(WIDTH));
    let end = line.ceil_char_boundary(at + WIDTH);
    format!("…{}…", &line[start..end])
}

/// Packaged libraries that `cargo tree` does not show at their unpacked path.
pub fn unpatched(tree: &str, expected: &[(String, String, PathBuf)]) -> Vec<String> {
    expected
        .iter()
        .filter_map(|(name, version, path)| {
            let line = format!("{name} v{version} ({})", path.display());
            let resolved = tree.lines().any(|tree_line| tree_line.starts_with(&line));
            (!resolved).then(|| format!("{name} {version} does not resolve to {}", path.display()))
        })
        .collect()
}

fn io_error(path: &Path, error: &std::io::Error) -> String {
    format!("{}: {error}", path.display())
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::{leaks, render_manifest, unpatched};

    fn roots() -> Vec<PathBuf> {
        vec![PathBuf::from("/work/main")]
    }

    fn expected() -> Vec<(String, String, PathBuf)> {
        vec![(
            "shiitake-protocol".to_owned(),
            "0.1.0".to_owned(),
            PathBuf::from("/tmp/shiitake-stranger/packed/shiitake-protocol-0.1.0"),
        )]
    }

    const CLEAN_TREE: &str = "\
shiitake-stranger v0.0.0 (/tmp/shiitake-stranger/consumer)
serde_json v1.0.140
shiitake-protocol v0.1.0 (/tmp/shiitake-stranger/packed/shiitake-protocol-0.1.0)
serde v1.0.219
shiitake-protocol v0.1.0 (/tmp/shiitake-stranger/packed/shiitake-protocol-0.1.0) (*)
";

    /// What `cargo tree --prefix none` prints after `--leak` points the patch at the workspace.
    const LEAKY_TREE: &str = "\
shiitake-stranger v0.0.0 (/tmp/shiitake-stranger/consumer)
serde_json v1.0.140
shiitake-protocol v0.1.0 (/work/main/crates/shiitake-protocol)
serde v1.0.219
";

    #[test]
    fn a_clean_tree_passes_the_guard() {
        assert_eq!(
            leaks("cargo tree", CLEAN_TREE, &roots()),
            Vec::<String>::new()
        );
        assert_eq!(unpatched(CLEAN_TREE, &expected()), Vec::<String>::new());
    }

    #[test]
    fn a_path_into_the_workspace_fails_the_guard() {
        assert_eq!(
            leaks("cargo tree", LEAKY_TREE, &roots()),
            vec!["cargo tree: shiitake-protocol v0.1.0 (/work/main/crates/shiitake-protocol)"]
        );
        assert_eq!(
            unpatched(LEAKY_TREE, &expected()),
            vec![
                "shiitake-protocol 0.1.0 does not resolve to \
                 /tmp/shiitake-stranger/packed/shiitake-protocol-0.1.0"
            ]
        );
    }

    #[test]
    fn the_guard_finds_the_root_itself_and_inside_json() {
        let metadata = r#"{"workspace_root":"/work/main","x":"/work/main/crates/a/Cargo.toml"}"#;
        assert_eq!(leaks("cargo metadata", metadata, &roots()).len(), 1);
        assert_eq!(leaks("t", "/work/main", &roots()).len(), 1);
    }

    #[test]
    fn a_sibling_directory_is_not_the_workspace() {
        let text = "a v1.0.0 (/work/main-old/crates/a)\nb v1.0.0 (/work/mainline)\n";
        assert_eq!(leaks("cargo tree", text, &roots()), Vec::<String>::new());
    }

    /// The real thing: with `--leak` the whole command must stop at the guard. It
    /// packages the workspace and resolves from crates.io, so it is opt-in:
    /// `cargo test -p xtask -- --ignored`.
    #[test]
    #[ignore = "packages the workspace and resolves from crates.io"]
    fn the_leak_flag_fails_the_real_guard() {
        let error = super::run(&["--leak".to_owned()]).err().unwrap_or_default();
        assert!(
            error.contains("GUARD FAILED"),
            "expected the guard to fail, got {error:?}"
        );
    }

    #[test]
    fn renders_dependencies_and_patches() -> Result<(), String> {
        let template =
            "[dependencies]\nserde = \"1\"\n# @dependencies@\n\n[patch.crates-io]\n# @patches@\n";
        let manifest = render_manifest(
            template,
            &[(
                "shiitake-protocol".to_owned(),
                "0.1.0".to_owned(),
                PathBuf::from("../packed/p-0.1.0"),
            )],
        )?;
        assert_eq!(
            manifest,
            "[dependencies]\nserde = \"1\"\nshiitake-protocol = \"=0.1.0\"\n\n[patch.crates-io]\n\
             shiitake-protocol = { path = \"../packed/p-0.1.0\" }\n"
        );
        assert!(render_manifest("[dependencies]\n", &[]).is_err());
        Ok(())
    }
}
