//! Core's failures, and how they become the canonical `ShiitakeError`.

use shiitake_protocol::ShiitakeError;

use crate::store::StoreError;

impl From<StoreError> for ShiitakeError {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::Closed => ShiitakeError::unavailable("the Agent is closing"),
            StoreError::Database { .. } | StoreError::Migration(_) | StoreError::Unavailable(_) => {
                ShiitakeError::unavailable(format!("storage failed: {error}"))
            }
            StoreError::Corrupt(_) => ShiitakeError::internal(error.to_string()),
            StoreError::Conflict(_) => ShiitakeError::conflict(error.to_string()),
            StoreError::Fenced(_) => ShiitakeError::unavailable(format!(
                "the Session moved to another process; try again ({error})"
            )),
        }
    }
}
