//! The local-disk Files port: every path is resolved and confined inside one root directory.

mod open;
mod patch;
mod read;
pub(crate) mod resolve;

use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;

use crate::error::{FilesEditError, FilesError};
use crate::limits::TEXT_LIMIT_BYTES;
use crate::port::{Files, PatchEngine};
use crate::search::grep::{GrepRequest, grep};
use crate::search::walk::{WalkRoot, collect_entries, compile_glob};
use crate::types::{
    EntriesOutput, GlobInput, GrepInput, GrepOutput, ListInput, PatchOutput, ReadInput, ReadOutput,
    ReplaceRequest,
};
use resolve::Root;

/// A Files port over a directory on local disk, with a native patch engine.
///
/// Every requested path is resolved inside the root: `..` that climbs out,
/// absolute paths elsewhere, symlinks whose target leaves the root (checked
/// on the existing part of the path), NUL bytes and names that are not UTF-8
/// are refused. Reads open the checked path from a handle on the root, one
/// component at a time with `O_NOFOLLOW`, so a directory swapped for a symlink
/// after the check is not followed. Writes (`replace`, `apply_patch`) are
/// serialised within this value and use write-then-rename; their check and
/// rename are not one system call, so a process that swaps directories for
/// symlinks under a live root can still race a write; the root is meant to be
/// owned by the host.
#[derive(Debug, Clone)]
pub struct LocalFiles {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    root: Root,
    writes: Mutex<()>,
}

impl Inner {
    fn walk_root(&self) -> WalkRoot<'_> {
        WalkRoot {
            path: self.root.path(),
            hidden: self.root.hidden(),
        }
    }
}

impl LocalFiles {
    /// A port rooted at `root`, which must be an existing directory.
    pub fn new(root: impl AsRef<Path>) -> Result<Self, FilesError> {
        let shown = root.as_ref().display().to_string();
        let root = Root::new(root.as_ref()).map_err(|e| FilesError::io(&shown, &e))?;
        Ok(Self {
            inner: Arc::new(Inner {
                root,
                writes: Mutex::new(()),
            }),
        })
    }

    /// The same port with `dir` out of reach: no path resolves into it and no
    /// listing or search shows it. A host hides its own data directory this way
    /// when that directory lies inside the root.
    pub fn hiding(self, dir: impl AsRef<Path>) -> Result<Self, FilesError> {
        let shown = dir.as_ref().display().to_string();
        let mut root = self.inner.root.clone();
        root.hide(dir.as_ref())
            .map_err(|e| FilesError::io(&shown, &e))?;
        Ok(Self {
            inner: Arc::new(Inner {
                root,
                writes: Mutex::new(()),
            }),
        })
    }

    /// The canonical root directory.
    pub fn root(&self) -> &Path {
        self.inner.root.path()
    }

    async fn blocking<T: Send + 'static>(
        &self,
        work: impl FnOnce(&Inner) -> Result<T, FilesError> + Send + 'static,
    ) -> Result<T, FilesError> {
        let inner = self.inner.clone();
        tokio::task::spawn_blocking(move || work(&inner))
            .await
            .map_err(|e| FilesError::Io {
                path: String::new(),
                message: format!("a files task failed: {e}"),
            })?
    }
}

/// Fails with [`FilesError::NotADirectory`] unless `real` (followed if a symlink) is a directory.
fn require_dir(real: &Path, shown: &str) -> Result<(), FilesError> {
    let metadata = std::fs::metadata(real).map_err(|e| FilesError::io(shown, &e))?;
    if !metadata.is_dir() {
        return Err(FilesError::NotADirectory {
            path: shown.to_owned(),
        });
    }
    Ok(())
}

#[async_trait]
impl Files for LocalFiles {
    async fn read(&self, input: ReadInput) -> Result<ReadOutput, FilesError> {
        self.blocking(move |inner| {
            let resolved = inner.root.resolve(&input.path)?;
            read::read_window(inner.root.path(), &resolved.relative, &input.path, &input)
        })
        .await
    }

    async fn list(&self, input: ListInput) -> Result<EntriesOutput, FilesError> {
        self.blocking(move |inner| {
            let resolved = inner.root.resolve(&input.path)?;
            require_dir(&resolved.real, &input.path)?;
            collect_entries(inner.walk_root(), &resolved.relative, input.recursive, None)
        })
        .await
    }

    async fn glob(&self, input: GlobInput) -> Result<EntriesOutput, FilesError> {
        self.blocking(move |inner| {
            let matcher = compile_glob(&input.pattern)?;
            let resolved = inner.root.resolve(&input.path)?;
            require_dir(&resolved.real, &input.path)?;
            collect_entries(inner.walk_root(), &resolved.relative, true, Some(&matcher))
        })
        .await
    }

    async fn grep(&self, input: GrepInput) -> Result<GrepOutput, FilesError> {
        self.blocking(move |inner| {
            let filter = input.glob.as_deref().map(compile_glob).transpose()?;
            let resolved = inner.root.resolve(&input.path)?;
            let metadata =
                std::fs::metadata(&resolved.real).map_err(|e| FilesError::io(&input.path, &e))?;
            grep(GrepRequest {
                root: inner.walk_root(),
                start_rel: &resolved.relative,
                start_is_file: metadata.is_file(),
                pattern: &input.pattern,
                case_insensitive: input.case_insensitive,
                filter: filter.as_ref(),
            })
        })
        .await
    }

    async fn replace(&self, request: ReplaceRequest) -> Result<(), FilesError> {
        self.blocking(move |inner| {
            let size = request.content.len();
            if size > TEXT_LIMIT_BYTES {
                return Err(FilesEditError::OversizedFile {
                    path: request.path,
                    size: size as u64,
                    limit: TEXT_LIMIT_BYTES as u64,
                }
                .into());
            }
            let resolved = inner.root.resolve(&request.path)?;
            let _guard = inner.writes.lock().unwrap_or_else(PoisonError::into_inner);
            let current = read::read_bounded(&resolved.real, &request.path, TEXT_LIMIT_BYTES)?;
            if current != request.expected {
                return Err(FilesEditError::Conflict { path: request.path }.into());
            }
            read::write_atomic(&resolved.real, &request.path, request.content.as_bytes())
        })
        .await
    }

    fn patch_engine(&self) -> Option<&dyn PatchEngine> {
        Some(self)
    }
}

#[async_trait]
impl PatchEngine for LocalFiles {
    async fn apply_patch(&self, text: &str) -> Result<PatchOutput, FilesError> {
        let text = text.to_owned();
        self.blocking(move |inner| {
            let _guard = inner.writes.lock().unwrap_or_else(PoisonError::into_inner);
            patch::apply_patch(&inner.root, &text)
        })
        .await
    }
}
