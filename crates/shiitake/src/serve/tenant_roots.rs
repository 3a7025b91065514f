//! The Hub's Computers: each `--computer NAME=DIR` (or `--workspace`) is a root, and each
//! tenant gets `DIR/<tenant>/` under it, so one tenant's file tools never see another's
//! files (seed 000: "the Hub adds Home with its own Computers").
//!
//! The folder is created (private, 0700) the first time the tenant opens. A shared
//! filesystem mounted at `DIR` on every process gives a tenant the same files whichever
//! process runs its turn (`docs/hub.md`).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use shiitake_ext_home::{Attachment, ComputerList, Computers};
use shiitake_protocol::TenantName;

/// The Computer roots of a Hub process, the data directory hidden from them, and how
/// their commands run.
#[derive(Clone, Debug)]
pub struct TenantRoots {
    roots: Vec<(String, PathBuf)>,
    hidden: PathBuf,
    commands: super::commands::CommandSetup,
}

/// Why a tenant's Computer could not be attached.
#[derive(Debug, thiserror::Error)]
#[error("the Computer {name} of tenant {tenant} at {}: {reason}", dir.display())]
pub struct RootError {
    tenant: TenantName,
    name: String,
    dir: PathBuf,
    reason: String,
}

impl TenantRoots {
    /// Roots named as `--computer` names them; `hidden` (the data directory) is kept
    /// out of every file tool; `commands` says how a tenant's Computer runs commands.
    pub fn new(
        roots: Vec<(String, PathBuf)>,
        hidden: &Path,
        commands: super::commands::CommandSetup,
    ) -> Self {
        Self {
            roots,
            hidden: hidden.to_path_buf(),
            commands,
        }
    }

    /// The tenant's Computers: one per root, jailed to `<root>/<tenant>/`.
    pub fn computers(&self, tenant: &TenantName) -> Result<Arc<dyn Computers>, RootError> {
        let attachments = self
            .roots
            .iter()
            .map(|(name, root)| self.attach(tenant, name, root))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Arc::new(ComputerList::new(attachments)))
    }

    fn attach(
        &self,
        tenant: &TenantName,
        name: &str,
        root: &Path,
    ) -> Result<Attachment, RootError> {
        // A tenant name is letters, digits, `-` and `_` (checked by `TenantName`): it
        // is one path segment and cannot climb out of the root.
        let dir = root.join(tenant.as_str());
        let failed = |reason: String| RootError {
            tenant: tenant.clone(),
            name: name.to_owned(),
            dir: dir.clone(),
            reason,
        };
        super::datadir::private_dir(&dir).map_err(|error| failed(error.to_string()))?;
        let attachment = super::attach_one(name, &dir, &self.hidden).map_err(&failed)?;
        // Its commands see none of the roots but their own folder: every other tenant's
        // folder, under every root, is hidden.
        let roots: Vec<PathBuf> = self.roots.iter().map(|(_, root)| root.clone()).collect();
        self.commands
            .equip(attachment, name, &dir, &roots)
            .map_err(failed)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn each_tenant_gets_its_own_folder_under_every_root() {
        let root = tempfile::tempdir().unwrap();
        let data = tempfile::tempdir().unwrap();
        let roots = TenantRoots::new(
            vec![("workspace".to_owned(), root.path().to_path_buf())],
            data.path(),
            crate::serve::commands::CommandSetup::off(),
        );
        let acme = TenantName::new("acme").unwrap();
        let globex = TenantName::new("globex").unwrap();
        let of_acme = roots.computers(&acme).unwrap().read();
        let of_globex = roots.computers(&globex).unwrap().read();
        assert_eq!(of_acme.len(), 1);
        assert!(root.path().join("acme").is_dir());
        assert!(root.path().join("globex").is_dir());
        assert_ne!(of_acme[0].attachment_id, of_globex[0].attachment_id);
        assert_eq!(of_acme[0].name.as_str(), "workspace");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(root.path().join("acme"))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o700);
        }
    }
}
