//! sqlx's errors as core's backend-neutral [`StoreError`], and which failures pass by
//! waiting ([`StoreError::Unavailable`]) on either database.

use shiitake_core::store::StoreError;

/// A sqlx error as core sees it: a failure that passes by waiting
/// ([`StoreError::Unavailable`]: the connection lost or refused, the server restarting
/// or out of connections, a full disk, an I/O error, a pool wait run out), the store
/// closing, or a database failure, with whether a unique index refused the write (an
/// idempotency key already used).
pub fn db(error: sqlx::Error) -> StoreError {
    if matches!(error, sqlx::Error::PoolClosed) {
        return StoreError::Closed;
    }
    if passes(&error) {
        return StoreError::Unavailable(error.to_string());
    }
    let unique = error
        .as_database_error()
        .is_some_and(|error| error.is_unique_violation());
    StoreError::Database {
        message: error.to_string(),
        unique,
    }
}

/// Whether a sqlx error passes by waiting.
fn passes(error: &sqlx::Error) -> bool {
    match error {
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::WorkerCrashed
        | sqlx::Error::Protocol(_) => true,
        sqlx::Error::Database(database) => database.code().is_some_and(|code| code_passes(&code)),
        _ => false,
    }
}

/// Whether a database's error code names a failure that passes by waiting. PostgreSQL
/// answers a five-character SQLSTATE; SQLite (through sqlx) its extended result code
/// as a decimal number of at most four digits, so the two never meet.
pub fn code_passes(code: &str) -> bool {
    if code.len() == 5 {
        return sqlstate_passes(code);
    }
    code.parse::<i32>().is_ok_and(sqlite_code_passes)
}

/// Whether a PostgreSQL SQLSTATE names a failure that passes by waiting: a connection
/// exception (`08…`), insufficient resources (`53…`: a full disk, no memory, too many
/// connections), an operator's intervention (`57P…`: the server shutting down or
/// starting, a backend terminated; `57014`, a statement cancelled), a system error
/// (`58…`: I/O), a serialisation failure or deadlock (`40001`, `40P01`), or a lock
/// wait run out (`55P03`).
pub fn sqlstate_passes(code: &str) -> bool {
    ["08", "53", "57P", "58"]
        .iter()
        .any(|class| code.starts_with(class))
        || matches!(code, "57014" | "40001" | "40P01" | "55P03")
}

/// Whether a SQLite (extended) result code names a failure that passes by waiting: the
/// file busy or locked, refusing writes, not openable, an I/O error, or a full disk.
pub fn sqlite_code_passes(extended: i32) -> bool {
    const BUSY: i32 = 5;
    const LOCKED: i32 = 6;
    const READONLY: i32 = 8;
    const IOERR: i32 = 10;
    const FULL: i32 = 13;
    const CANTOPEN: i32 = 14;
    matches!(
        extended & 0xff,
        BUSY | LOCKED | READONLY | IOERR | FULL | CANTOPEN
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn postgres_states_that_pass_and_those_that_do_not() {
        for code in [
            "08006", "08001", "53100", "53300", "57P01", "57P03", "58030", "40001", "40P01",
            "55P03", "57014",
        ] {
            assert!(code_passes(code), "{code} passes");
        }
        for code in ["23505", "23503", "42P01", "22P02", "XX000", "40002"] {
            assert!(!code_passes(code), "{code} does not pass");
        }
    }

    #[test]
    fn sqlite_codes_that_pass_and_those_that_do_not() {
        // SQLITE_FULL, SQLITE_IOERR_WRITE (10 | 3 << 8), SQLITE_READONLY, SQLITE_BUSY.
        for code in ["13", "778", "8", "5", "6", "14"] {
            assert!(code_passes(code), "{code} passes");
        }
        // SQLITE_CONSTRAINT_UNIQUE (2067), SQLITE_CORRUPT (11), SQLITE_ERROR (1).
        for code in ["2067", "11", "1", "x"] {
            assert!(!code_passes(code), "{code} does not pass");
        }
    }
}
