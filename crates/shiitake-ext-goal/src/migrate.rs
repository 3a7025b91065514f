//! State versions. Version 6 discards the disposable preview rows of versions 4 and
//! 5 (and anything older) instead of reading their superseded shape: a Session that
//! had a preview goal starts version 6 with none.

use std::collections::BTreeSet;

use shiitake_core::extension::{HookError, Migration, MigrationTx};

/// The step to version 6: every stored row of an older version is discarded.
pub(crate) const DISCARD_PREVIEWS: Migration = Migration {
    to_version: 6,
    name: "discard preview goal rows of versions 4 and 5",
    apply: discard_previews,
};

fn discard_previews(tx: &mut MigrationTx) -> Result<(), HookError> {
    let collections: BTreeSet<String> = tx
        .rows()
        .map(|(_, _, collection, _, _)| collection.to_owned())
        .collect();
    for collection in collections {
        tx.discard(&collection);
    }
    Ok(())
}
