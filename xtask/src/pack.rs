//! `cargo xtask pack`: package every publishable crate and check what each package holds.
//!
//! The crates to package come from `cargo metadata`: every workspace member whose
//! `publish` is not `false`. They are packaged together with
//! `cargo package --workspace --no-verify --allow-dirty`, which accepts path
//! dependencies that are not on crates.io yet as long as they carry a version.
//! Each `.crate` is then listed: it must hold only the files a consumer needs
//! ([`ALLOWED_FILES`] and [`ALLOWED_DIRS`]), and it must hold a `README.md` and a
//! `LICENSE` identical to the workspace `LICENSE`.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::util::{cargo, output_checked, run_checked, workspace_root};
use serde_json::Value as Json;

/// Files a package may hold at its root.
pub const ALLOWED_FILES: &[&str] = &[
    "Cargo.toml",
    "Cargo.toml.orig",
    "Cargo.lock",
    ".cargo_vcs_info.json",
    "README.md",
    "LICENSE",
    "build.rs",
];

/// Directories a package may hold, with everything below them.
pub const ALLOWED_DIRS: &[&str] = &["src", "tests", "benches", "examples", "migrations"];

/// Files every package must hold.
pub const REQUIRED_FILES: &[&str] = &["Cargo.toml", "README.md", "LICENSE"];

/// One workspace member as `cargo metadata` describes it.
#[derive(Clone, Debug)]
pub struct Member {
    /// The package name, e.g. `shiitake-protocol`.
    pub name: String,
    /// The package version, e.g. `0.1.0`.
    pub version: String,
    /// The directory holding the member's `Cargo.toml`.
    pub dir: PathBuf,
    /// Whether the package may be published (its `publish` is not `false`).
    pub publishable: bool,
    /// Whether another package can depend on it (it has a library target).
    pub has_library: bool,
}

/// The workspace as `cargo metadata --no-deps` describes it.
#[derive(Clone, Debug)]
pub struct Workspace {
    /// Every workspace member, in the order cargo lists them.
    pub members: Vec<Member>,
    /// Cargo's target directory (honours `CARGO_TARGET_DIR`).
    pub target_dir: PathBuf,
}

/// One crate packaged and checked by [`run`].
#[derive(Clone, Debug)]
pub struct Packaged {
    /// The workspace member it was packaged from.
    pub member: Member,
    /// The `.crate` file cargo wrote.
    pub crate_file: PathBuf,
}

impl Packaged {
    /// The directory name the package unpacks to: `NAME-VERSION`.
    pub fn dir_name(&self) -> String {
        format!("{}-{}", self.member.name, self.member.version)
    }
}

/// Packages every publishable crate, checks each package, and returns them.
pub fn run(args: &[String]) -> Result<Vec<Packaged>, String> {
    if let Some(arg) = args.first() {
        return Err(format!("`pack` takes no arguments, got `{arg}`"));
    }
    let root = workspace_root();
    let workspace = Workspace::load(&root)?;
    let (publishable, unpublished): (Vec<&Member>, Vec<&Member>) = workspace
        .members
        .iter()
        .partition(|member| member.publishable);
    if publishable.is_empty() {
        return Err("no publishable crate in the workspace".to_owned());
    }
    let missing: Vec<String> = publishable
        .iter()
        .flat_map(|member| missing_sources(member))
        .collect();
    if !missing.is_empty() {
        return Err(format!("cannot package:\n  {}", missing.join("\n  ")));
    }

    let mut package = Command::new(cargo());
    package
        .current_dir(&root)
        .args(["package", "--workspace", "--no-verify", "--allow-dirty"]);
    for member in &unpublished {
        package.args(["--exclude", &member.name]);
    }
    run_checked(&mut package)?;

    let license = fs::read_to_string(root.join("LICENSE"))
        .map_err(|error| format!("cannot read the workspace LICENSE: {error}"))?;
    let mut packaged = Vec::new();
    let mut problems = Vec::new();
    for member in publishable {
        let mut packed = Packaged {
            member: member.clone(),
            crate_file: workspace.target_dir.join("package"),
        };
        let dir_name = packed.dir_name();
        packed.crate_file.push(format!("{dir_name}.crate"));
        let files = list_crate(&packed.crate_file, &dir_name)?;
        let mut found = file_problems(&files);
        if files.iter().any(|file| file == "LICENSE") {
            let packed_license = output_checked(
                Command::new("tar")
                    .arg("-xzOf")
                    .arg(&packed.crate_file)
                    .arg(format!("{dir_name}/LICENSE")),
            )?;
            if packed_license != license {
                found.push("`LICENSE` differs from the workspace LICENSE".to_owned());
            }
        }
        println!(
            "pack: {} {}: {} files",
            member.name,
            member.version,
            files.len()
        );
        problems.extend(
            found
                .into_iter()
                .map(|problem| format!("{}: {problem}", member.name)),
        );
        packaged.push(packed);
    }
    if problems.is_empty() {
        Ok(packaged)
    } else {
        Err(format!(
            "packages hold the wrong files:\n  {}",
            problems.join("\n  ")
        ))
    }
}

impl Workspace {
    /// Reads the workspace members from `cargo metadata --no-deps`.
    pub fn load(root: &Path) -> Result<Workspace, String> {
        let text = output_checked(Command::new(cargo()).current_dir(root).args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
        ]))?;
        Workspace::from_metadata(&text)
    }

    /// Reads the workspace from the text of `cargo metadata --no-deps`.
    pub fn from_metadata(text: &str) -> Result<Workspace, String> {
        let metadata: Json =
            serde_json::from_str(text).map_err(|error| format!("cargo metadata: {error}"))?;
        let text_of = |value: &Json, key: &str| {
            value
                .get(key)
                .and_then(Json::as_str)
                .map(str::to_owned)
                .ok_or_else(|| format!("cargo metadata: no `{key}` string"))
        };
        let target_dir = PathBuf::from(text_of(&metadata, "target_directory")?);
        let packages = metadata
            .get("packages")
            .and_then(Json::as_array)
            .ok_or("cargo metadata: no `packages` array")?;
        let mut members = Vec::new();
        for package in packages {
            let manifest = PathBuf::from(text_of(package, "manifest_path")?);
            let dir = manifest.parent().map(Path::to_path_buf).unwrap_or_default();
            // `publish` is null when unrestricted and an array of registries otherwise;
            // `publish = false` is the empty array.
            let publishable = match package.get("publish") {
                Some(Json::Array(registries)) => !registries.is_empty(),
                _ => true,
            };
            let has_library = package
                .get("targets")
                .and_then(Json::as_array)
                .map(Vec::as_slice)
                .unwrap_or_default()
                .iter()
                .filter_map(|target| target.get("kind").and_then(Json::as_array))
                .flatten()
                .any(|kind| matches!(kind.as_str(), Some("lib" | "rlib" | "dylib" | "proc-macro")));
            members.push(Member {
                name: text_of(package, "name")?,
                version: text_of(package, "version")?,
                dir,
                publishable,
                has_library,
            });
        }
        Ok(Workspace {
            members,
            target_dir,
        })
    }
}

/// Required files missing from a member's directory, checked before packaging so
/// that every missing file is named at once rather than cargo's first complaint.
fn missing_sources(member: &Member) -> Vec<String> {
    ["README.md", "LICENSE"]
        .into_iter()
        .filter(|file| !member.dir.join(file).is_file())
        .map(|file| {
            format!(
                "{}: missing `{file}` in {}",
                member.name,
                member.dir.display()
            )
        })
        .collect()
}

/// The files of a `.crate`, relative to its `NAME-VERSION/` directory.
fn list_crate(crate_file: &Path, dir_name: &str) -> Result<Vec<String>, String> {
    let listing = output_checked(Command::new("tar").arg("-tzf").arg(crate_file))?;
    let prefix = format!("{dir_name}/");
    Ok(listing
        .lines()
        .filter(|entry| !entry.ends_with('/'))
        .map(|entry| entry.strip_prefix(&prefix).unwrap_or(entry).to_owned())
        .collect())
}

/// What is wrong with a package's file list: stray files and missing required files.
pub fn file_problems(files: &[String]) -> Vec<String> {
    let stray = files
        .iter()
        .filter(|file| !is_allowed(file))
        .map(|file| format!("stray file `{file}`"));
    let missing = REQUIRED_FILES
        .iter()
        .filter(|required| !files.iter().any(|file| file == *required))
        .map(|required| format!("missing `{required}`"));
    stray.chain(missing).collect()
}

fn is_allowed(file: &str) -> bool {
    ALLOWED_FILES.contains(&file)
        || file
            .split_once('/')
            .is_some_and(|(dir, rest)| ALLOWED_DIRS.contains(&dir) && !rest.is_empty())
}

#[cfg(test)]
mod tests {
    use super::{Workspace, file_problems};

    fn owned(files: &[&str]) -> Vec<String> {
        files.iter().map(|file| (*file).to_owned()).collect()
    }

    #[test]
    fn a_clean_package_has_no_problems() {
        let files = owned(&[
            "Cargo.toml",
            "Cargo.toml.orig",
            "Cargo.lock",
            ".cargo_vcs_info.json",
            "README.md",
            "LICENSE",
            "build.rs",
            "src/lib.rs",
            "src/deep/mod.rs",
            "tests/roundtrip.rs",
            "migrations/sqlite/0001_init.sql",
        ]);
        assert_eq!(file_problems(&files), Vec::<String>::new());
    }

    #[test]
    fn names_stray_and_missing_files() {
        let files = owned(&[
            "Cargo.toml",
            "src/lib.rs",
            "notes.txt",
            "fixtures/big.json",
            "src",
        ]);
        assert_eq!(
            file_problems(&files),
            owned(&[
                "stray file `notes.txt`",
                "stray file `fixtures/big.json`",
                "stray file `src`",
                "missing `README.md`",
                "missing `LICENSE`",
            ])
        );
    }

    #[test]
    fn reads_members_from_cargo_metadata() -> Result<(), String> {
        let text = r#"{"packages":[
            {"name":"shiitake-protocol","version":"0.1.0","publish":null,
             "manifest_path":"/w/crates/shiitake-protocol/Cargo.toml",
             "targets":[{"kind":["lib"],"name":"shiitake_protocol"}]},
            {"name":"xtask","version":"0.1.0","publish":[],
             "manifest_path":"/w/xtask/Cargo.toml","targets":[{"kind":["bin"]}]}
        ],"target_directory":"/t","workspace_root":"/w"}"#;
        let workspace = Workspace::from_metadata(text)?;
        let summary: Vec<_> = workspace
            .members
            .iter()
            .map(|m| {
                (
                    m.name.as_str(),
                    m.publishable,
                    m.has_library,
                    m.dir.display().to_string(),
                )
            })
            .collect();
        assert_eq!(
            summary,
            vec![
                (
                    "shiitake-protocol",
                    true,
                    true,
                    "/w/crates/shiitake-protocol".to_owned()
                ),
                ("xtask", false, false, "/w/xtask".to_owned()),
            ]
        );
        assert_eq!(workspace.target_dir.display().to_string(), "/t");
        Ok(())
    }
}
