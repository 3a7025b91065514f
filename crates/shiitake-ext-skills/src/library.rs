//! Discovery: the host's skill roots read once into a [`SkillLibrary`], each skill with a
//! Knapsack Files port jailed to its own folder.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use knapsack::{Files, FilesError, LocalFiles, ReadInput};

use crate::contract::{
    MAX_FOLDERS_PER_ROOT, Problem, SKILL_FILE, SkillProblem, SkillSummary, SkillsList,
};
use crate::frontmatter;

/// One read-only directory of skills the host supplies: each folder in it with a
/// `SKILL.md` is a skill (the `~/.claude/skills` and `~/.codex/skills` layout).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SkillRoot {
    path: PathBuf,
}

impl SkillRoot {
    /// A root at `path`; it is read by [`SkillLibrary::discover`], not here.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self { path: path.into() }
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn shown(&self) -> String {
        self.path.display().to_string()
    }
}

/// One usable skill: its listing and the port confined to its folder.
#[derive(Clone)]
pub(crate) struct Skill {
    pub(crate) summary: SkillSummary,
    pub(crate) port: Arc<dyn Files>,
}

impl std::fmt::Debug for Skill {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Skill")
            .field("summary", &self.summary)
            .finish_non_exhaustive()
    }
}

/// The skills of the host's roots, read once: usable skills by name, and every root or
/// folder that gave none with the reason. The host hands it to the extension; reading it
/// again means discovering again.
#[derive(Clone, Debug, Default)]
pub struct SkillLibrary {
    skills: BTreeMap<String, Skill>,
    problems: Vec<SkillProblem>,
}

impl SkillLibrary {
    /// Reads every root in order. Folders are taken in name order within a root; the
    /// first skill to claim a name keeps it, later ones are reported as duplicates.
    /// Hidden entries (`.name`) and plain files at the top of a root are skipped.
    pub async fn discover(roots: &[SkillRoot]) -> Self {
        let mut library = Self::default();
        for root in roots {
            library.discover_root(root).await;
        }
        library
    }

    async fn discover_root(&mut self, root: &SkillRoot) {
        let path = root.path.clone();
        let listed = tokio::task::spawn_blocking(move || folders(&path)).await;
        let folders = match listed {
            Ok(Ok(folders)) => folders,
            Ok(Err(error)) => return self.report(root, None, root_unreadable(&error)),
            Err(error) => return self.report(root, None, root_unreadable(&error)),
        };
        let truncated = folders.len() > MAX_FOLDERS_PER_ROOT;
        for folder in folders.into_iter().take(MAX_FOLDERS_PER_ROOT) {
            match folder {
                Folder::Named(name) => self.discover_folder(root, name).await,
                Folder::NotUtf8(shown) => {
                    self.report(root, Some(shown), Problem::FolderNameNotUtf8);
                }
            }
        }
        if truncated {
            self.report(
                root,
                None,
                Problem::RootTruncated {
                    limit: MAX_FOLDERS_PER_ROOT,
                },
            );
        }
    }

    async fn discover_folder(&mut self, root: &SkillRoot, folder: String) {
        let port = match LocalFiles::new(root.path.join(&folder)) {
            Ok(port) => Arc::new(port) as Arc<dyn Files>,
            Err(error) => {
                let problem = Problem::UnreadableSkillFile {
                    message: error.to_string(),
                };
                return self.report(root, Some(folder), problem);
            }
        };
        let read = port
            .read(ReadInput {
                path: SKILL_FILE.into(),
                offset: 0,
                limit: None,
            })
            .await;
        let metadata = match read {
            Ok(read) => frontmatter::metadata(&read.content),
            Err(FilesError::NotFound { .. }) => Err(Problem::MissingSkillFile),
            Err(error) => Err(Problem::UnreadableSkillFile {
                message: error.to_string(),
            }),
        };
        let metadata = match metadata {
            Ok(metadata) => metadata,
            Err(problem) => return self.report(root, Some(folder), problem),
        };
        if let Some(kept) = self.skills.get(&metadata.name) {
            let problem = Problem::DuplicateName {
                name: metadata.name,
                kept: format!("{}/{}", kept.summary.root, kept.summary.folder),
            };
            return self.report(root, Some(folder), problem);
        }
        let summary = SkillSummary {
            name: metadata.name.clone(),
            description: metadata.description,
            root: root.shown(),
            folder,
        };
        self.skills.insert(metadata.name, Skill { summary, port });
    }

    fn report(&mut self, root: &SkillRoot, folder: Option<String>, problem: Problem) {
        tracing::warn!(root = %root.shown(), folder = ?folder, %problem, "not a skill");
        self.problems.push(SkillProblem {
            root: root.shown(),
            folder,
            problem,
        });
    }

    /// What `/skills` shows.
    pub fn list(&self) -> SkillsList {
        SkillsList {
            skills: self.skills.values().map(|s| s.summary.clone()).collect(),
            problems: self.problems.clone(),
        }
    }

    /// The usable skills, in name order.
    pub fn skills(&self) -> impl ExactSizeIterator<Item = &SkillSummary> {
        self.skills.values().map(|s| &s.summary)
    }

    /// The roots and folders that gave no skill.
    pub fn problems(&self) -> &[SkillProblem] {
        &self.problems
    }

    pub(crate) fn get(&self, name: &str) -> Option<&Skill> {
        self.skills.get(name)
    }
}

fn root_unreadable(error: &impl std::fmt::Display) -> Problem {
    Problem::RootUnreadable {
        message: error.to_string(),
    }
}

/// A folder at the top of a root.
enum Folder {
    Named(String),
    /// A name that is not UTF-8, shown lossily.
    NotUtf8(String),
}

/// The non-hidden folders of `root` (and symlinks to folders, followed as codex-rs and
/// Claude Code follow them), sorted by name.
fn folders(root: &Path) -> std::io::Result<Vec<Folder>> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(root)? {
        let entry = entry?;
        let name = entry.file_name();
        if name.as_encoded_bytes().starts_with(b".") {
            continue;
        }
        // `metadata` follows a symlink; a dangling one is not a folder.
        let is_dir = std::fs::metadata(entry.path()).is_ok_and(|m| m.is_dir());
        if !is_dir {
            continue;
        }
        found.push(match name.into_string() {
            Ok(name) => Folder::Named(name),
            Err(name) => Folder::NotUtf8(name.to_string_lossy().into_owned()),
        });
    }
    found.sort_by(|a, b| key(a).cmp(key(b)));
    Ok(found)
}

fn key(folder: &Folder) -> &str {
    match folder {
        Folder::Named(name) | Folder::NotUtf8(name) => name,
    }
}
