//! The Files port: what a host supplies so Knapsack can project a `files` module.

use async_trait::async_trait;

use crate::error::FilesError;
use crate::types::{
    EntriesOutput, GlobInput, GrepInput, GrepOutput, ListInput, PatchOutput, ReadInput, ReadOutput,
    ReplaceRequest,
};

/// A bounded, rooted view of files that the host owns and confines.
///
/// Knapsack validates request shapes and paths; the port resolves every path
/// inside its own root and enforces the limits of [`crate::limits`]. `replace`
/// must be atomic: it swaps the whole file only if it still holds
/// `expected`, and refuses a conflict with [`crate::FilesEditError::Conflict`].
#[async_trait]
pub trait Files: Send + Sync + 'static {
    /// Reads a window of lines of a UTF-8 file, at most 128 KiB.
    async fn read(&self, input: ReadInput) -> Result<ReadOutput, FilesError>;

    /// Lists a directory's visible entries, at most 256.
    async fn list(&self, input: ListInput) -> Result<EntriesOutput, FilesError>;

    /// Finds visible entries by glob, at most 256.
    async fn glob(&self, input: GlobInput) -> Result<EntriesOutput, FilesError>;

    /// Searches visible files by regex, at most 256 matching lines.
    async fn grep(&self, input: GrepInput) -> Result<GrepOutput, FilesError>;

    /// Replaces a whole file atomically if it still holds `expected`.
    async fn replace(&self, request: ReplaceRequest) -> Result<(), FilesError>;

    /// The native patch engine, when the port has one; `apply_patch` is offered only then.
    fn patch_engine(&self) -> Option<&dyn PatchEngine> {
        None
    }
}

/// Applies a Codex-grammar patch atomically inside a port's root.
#[async_trait]
pub trait PatchEngine: Send + Sync {
    /// Applies the whole patch or nothing.
    async fn apply_patch(&self, patch: &str) -> Result<PatchOutput, FilesError>;
}
