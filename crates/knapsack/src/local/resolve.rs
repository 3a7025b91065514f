//! Confinement: resolving a requested path to a real path inside the root.

use std::path::{Component, Path, PathBuf};

use crate::error::FilesError;
use crate::path::{normalize_relative, validate_path};

/// A canonical root directory and the rules that keep every path inside it.
#[derive(Debug, Clone)]
pub(crate) struct Root {
    canonical: PathBuf,
    /// Directories inside the root that no path may reach (canonical), and the
    /// same as root-relative text for the walks.
    hidden: Vec<PathBuf>,
    hidden_relative: Vec<String>,
}

/// A path resolved inside the root.
#[derive(Debug, Clone)]
pub(crate) struct Resolved {
    /// The real path on disk (symlinks on the existing part resolved).
    pub(crate) real: PathBuf,
    /// The canonical root-relative path, `/`-separated; empty for the root.
    pub(crate) relative: String,
}

impl Root {
    pub(crate) fn new(root: &Path) -> std::io::Result<Self> {
        let canonical = std::fs::canonicalize(root)?;
        if !canonical.is_dir() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::NotADirectory,
                "the files root is not a directory",
            ));
        }
        Ok(Self {
            canonical,
            hidden: Vec::new(),
            hidden_relative: Vec::new(),
        })
    }

    /// Hides `dir` (and everything under it) from every path; a directory outside
    /// the root is out of reach anyway. It must exist, so its real path is known.
    pub(crate) fn hide(&mut self, dir: &Path) -> std::io::Result<()> {
        let real = std::fs::canonicalize(dir)?;
        if let Some(relative) = self.relative_of(&real)
            && real != self.canonical
        {
            self.hidden.push(real);
            self.hidden_relative.push(relative);
        } else if real == self.canonical {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "the directory to hide is the files root itself",
            ));
        }
        Ok(())
    }

    /// The hidden directories, root-relative.
    pub(crate) fn hidden(&self) -> &[String] {
        &self.hidden_relative
    }

    pub(crate) fn path(&self) -> &Path {
        &self.canonical
    }

    /// Resolves `requested` inside the root, refusing NUL bytes, `..` escapes,
    /// absolute paths outside the root, symlinks that leave it and names that
    /// are not UTF-8. A missing tail is allowed (for files about to be created).
    pub(crate) fn resolve(&self, requested: &str) -> Result<Resolved, FilesError> {
        validate_path(requested)?;
        let outside = || FilesError::OutsideRoot {
            path: requested.to_owned(),
        };
        let relative_text = if requested.starts_with('/') {
            let root_text = self.canonical.to_str().ok_or_else(outside)?;
            match requested.strip_prefix(root_text) {
                Some("") => "",
                Some(rest) if rest.starts_with('/') => rest,
                _ => return Err(outside()),
            }
        } else {
            requested
        };
        let lexical = normalize_relative(relative_text).ok_or_else(outside)?;

        // Find the deepest existing prefix (without following its last symlink),
        // canonicalise it, and check it is still inside the root.
        let segments: Vec<&str> = if lexical.is_empty() {
            Vec::new()
        } else {
            lexical.split('/').collect()
        };
        let mut existing = self.canonical.clone();
        let mut split = 0;
        for (index, segment) in segments.iter().enumerate() {
            let next = existing.join(segment);
            match std::fs::symlink_metadata(&next) {
                Ok(_) => {
                    existing = next;
                    split = index + 1;
                }
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => break,
                Err(error) => return Err(FilesError::io(requested, &error)),
            }
        }
        let real_existing = match std::fs::canonicalize(&existing) {
            Ok(path) => path,
            // A dangling symlink: its target cannot be confined, so refuse it.
            Err(_) => return Err(outside()),
        };
        if !real_existing.starts_with(&self.canonical) {
            return Err(outside());
        }
        let mut real = real_existing;
        for segment in &segments[split..] {
            real.push(segment);
        }
        if self.hidden.iter().any(|hidden| real.starts_with(hidden)) {
            return Err(outside());
        }
        let relative = self
            .relative_of(&real)
            .ok_or_else(|| FilesError::InvalidName {
                path: requested.to_owned(),
            })?;
        Ok(Resolved { real, relative })
    }

    /// The `/`-separated root-relative text of a real path inside the root;
    /// `None` when a name is not UTF-8.
    pub(crate) fn relative_of(&self, real: &Path) -> Option<String> {
        let rest = real.strip_prefix(&self.canonical).ok()?;
        let mut parts = Vec::new();
        for component in rest.components() {
            match component {
                Component::Normal(name) => parts.push(name.to_str()?),
                _ => return None,
            }
        }
        Some(parts.join("/"))
    }
}
