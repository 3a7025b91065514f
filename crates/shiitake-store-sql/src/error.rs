//! sqlx's errors as core's backend-neutral [`StoreError`].

use shiitake_core::store::StoreError;

/// A sqlx error as core sees it: a database failure, and whether a unique index refused
/// the write (an idempotency key already used).
pub fn db(error: sqlx::Error) -> StoreError {
    let unique = error
        .as_database_error()
        .is_some_and(|error| error.is_unique_violation());
    StoreError::Database {
        message: error.to_string(),
        unique,
    }
}
