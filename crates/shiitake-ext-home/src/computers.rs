//! What the host supplies: its current attachments, each with a Files port it already
//! scoped to that attachment. Home reads the list synchronously and never creates ports.

use std::sync::{Arc, PoisonError, RwLock};

use knapsack::Files;

use crate::contract::{AttachmentId, AttachmentName};

/// One Computer attached to the Agent, as the host admitted it.
#[derive(Clone)]
pub struct Attachment {
    /// What a person types (`/home <name>`) and the model writes (`computer://<name>/`).
    pub name: AttachmentName,
    /// The host's identity of the attachment; the choice records it.
    pub attachment_id: AttachmentId,
    /// The host-scoped Files port of the attachment (its jail, its patch engine if any).
    pub port: Arc<dyn Files>,
}

impl Attachment {
    /// An attachment from its parts.
    pub fn new(name: AttachmentName, attachment_id: AttachmentId, port: Arc<dyn Files>) -> Self {
        Self {
            name,
            attachment_id,
            port,
        }
    }
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
