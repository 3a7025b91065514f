//! What the host supplies: its current attachments, each with a Files port it already
//! scoped to that attachment. Home reads the list synchronously and never creates ports.

use std::path::Path;
use std::sync::{Arc, PoisonError, RwLock};

use knapsack::{Files, FilesError, LocalFiles};

use crate::contract::{AttachmentId, AttachmentName, ContractError, MAX_ATTACHMENT_ID_BYTES};

/// Why a local directory could not become an attachment.
#[derive(Debug, thiserror::Error)]
pub enum AttachError {
    /// The name breaks the attachment name rules.
    #[error(transparent)]
    Name(#[from] ContractError),
    /// The directory cannot be a Files root.
    #[error("the Computer's directory: {0}")]
    Root(#[from] FilesError),
}

/// One Computer attached to the Agent, as the host admitted it.
#[derive(Clone)]
pub struct Attachment {
    /// What a person types (`/home <name>`) and the model writes (`computer://<name>/`).
    pub name: AttachmentName,
    /// The host's identity of the attachment; the choice records it.
    pub attachment_id: AttachmentId,
    /// The host-scoped Files port of the attachment (its jail, its patch engine if any).
    pub port: Arc<dyn Files>,
    /// Commands run in the attachment's root, when the host lets them run there
    /// (`commands.exec` and the `jobs` tools; docs/commands.md).
    #[cfg(unix)]
    pub commands: Option<Arc<knapsack::exec::LocalCommands>>,
}

impl Attachment {
    /// An attachment from its parts.
    pub fn new(name: AttachmentName, attachment_id: AttachmentId, port: Arc<dyn Files>) -> Self {
        Self {
            name,
            attachment_id,
            port,
            #[cfg(unix)]
            commands: None,
        }
    }

    /// The same attachment, its commands run by `commands` (which the host built for the
    /// same root, with its limits and sandbox).
    #[cfg(unix)]
    #[must_use]
    pub fn with_commands(mut self, commands: knapsack::exec::LocalCommands) -> Self {
        self.commands = Some(Arc::new(commands));
        self
    }
}

impl Attachment {
    /// A local directory as an attachment (what `shiitake serve --computer name=DIR` does):
    /// a [`LocalFiles`] port jailed to `dir`, with the native patch engine, and an id that
    /// names the canonical directory (`local:<path>`, or `local:#<hash>` past 256 bytes),
    /// so the same directory keeps its id, and Home its choice, across restarts and renames.
    pub fn local(name: &str, dir: impl AsRef<Path>) -> Result<Self, AttachError> {
        Self::from_local(name, LocalFiles::new(dir)?)
    }

    /// Like [`Attachment::local`], over a port the host already built (for example one
    /// [`LocalFiles::hiding`] the host's own data directory).
    pub fn from_local(name: &str, port: LocalFiles) -> Result<Self, AttachError> {
        let name = AttachmentName::new(name)?;
        let root = port.root().display().to_string();
        let id = format!("local:{root}");
        let id = if id.len() <= MAX_ATTACHMENT_ID_BYTES {
            id
        } else {
            format!("local:#{:016x}", fnv1a(root.as_bytes()))
        };
        Ok(Self::new(name, AttachmentId::new(id)?, Arc::new(port)))
    }
}

/// FNV-1a 64: a stable short id for a long path (not a security boundary).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

impl std::fmt::Debug for Attachment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Attachment")
            .field("name", &self.name)
            .field("attachment_id", &self.attachment_id)
            .field("patch", &self.port.patch_engine().is_some())
            .finish()
    }
}

/// The host's attachment list. `read` is synchronous and does no I/O: it returns what the
/// host currently holds, in the host's order.
pub trait Computers: Send + Sync + 'static {
    /// The current attachments.
    fn read(&self) -> Vec<Attachment>;
}

/// A list the host replaces as Computers attach and detach.
#[derive(Debug, Default)]
pub struct ComputerList {
    attachments: RwLock<Vec<Attachment>>,
}

impl ComputerList {
    /// A list holding `attachments`.
    pub fn new(attachments: Vec<Attachment>) -> Self {
        Self {
            attachments: RwLock::new(attachments),
        }
    }

    /// Replaces the whole list.
    pub fn set(&self, attachments: Vec<Attachment>) {
        *self
            .attachments
            .write()
            .unwrap_or_else(PoisonError::into_inner) = attachments;
    }
}

impl Computers for ComputerList {
    fn read(&self) -> Vec<Attachment> {
        self.attachments
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// A host that publishes its list on a watch channel (as `Knapsack::computers` follows one).
impl Computers for tokio::sync::watch::Receiver<Vec<Attachment>> {
    fn read(&self) -> Vec<Attachment> {
        self.borrow().clone()
    }
}
