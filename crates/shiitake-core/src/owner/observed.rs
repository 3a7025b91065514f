//! The owner's side of extensions that show what they read elsewhere: telling them
//! that a client reads the Session, and publishing their slots again on request.

use super::Owner;
use crate::extension::Grant;

impl Owner {
    /// Tells every running extension with the `projection` grant that a client reads
    /// this Session (a snapshot, a watch, a subscription). A hook that panics is
    /// logged and skipped: observation must never fail a read.
    pub(super) fn observed(&self) {
        let host = &self.deps.host;
        for registered in &host.extensions {
            let id = &registered.definition.id;
            if !registered.grants.has(Grant::Projection) || host.stopped(id).is_some() {
                continue;
            }
            let extension = registered.extension.clone();
            let session_id = self.record.id();
            let told = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                extension.on_observed(session_id)
            }));
            if told.is_err() {
                tracing::warn!(extension = %id, "on_observed panicked; the read goes on");
            }
        }
    }

    /// Publishes one update carrying no new rows, so watchers see the extension slots
    /// as they read now; answers whether anyone received it. Nothing is committed and
    /// the cursor does not move, as for a change of activity.
    pub(super) fn republish(&self) -> bool {
        let watched = self.publication.watched();
        if watched {
            self.publish_changes(Vec::new(), Vec::new());
        }
        watched
    }
}
