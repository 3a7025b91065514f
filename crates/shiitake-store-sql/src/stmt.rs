//! A statement ready to run: its text, its parameters as driver-neutral values, and
//! what it must find for its commit to stand. Each store's writer binds the values
//! into its own driver (rusqlite for SQLite, sqlx for PostgreSQL).

use shiitake_core::store::StoreError;

/// A value bound to one parameter. A NULL keeps its column's type, which PostgreSQL
/// needs for every parameter.
#[derive(Clone, Debug, PartialEq)]
pub enum Bind {
    /// Text, or a NULL text.
    Text(Option<String>),
    /// A 64-bit integer, or a NULL integer.
    Int(Option<i64>),
    /// Bytes (a packed message).
    Bytes(Vec<u8>),
    /// A boolean.
    Bool(bool),
}

impl From<&str> for Bind {
    fn from(value: &str) -> Self {
        Bind::Text(Some(value.to_owned()))
    }
}

impl From<String> for Bind {
    fn from(value: String) -> Self {
        Bind::Text(Some(value))
    }
}

impl From<Option<&str>> for Bind {
    fn from(value: Option<&str>) -> Self {
        Bind::Text(value.map(str::to_owned))
    }
}

impl From<Option<String>> for Bind {
    fn from(value: Option<String>) -> Self {
        Bind::Text(value)
    }
}

impl From<i64> for Bind {
    fn from(value: i64) -> Self {
        Bind::Int(Some(value))
    }
}

impl From<Option<i64>> for Bind {
    fn from(value: Option<i64>) -> Self {
        Bind::Int(value)
    }
}

impl From<bool> for Bind {
    fn from(value: bool) -> Self {
        Bind::Bool(value)
    }
}

impl From<Vec<u8>> for Bind {
    fn from(value: Vec<u8>) -> Self {
        Bind::Bytes(value)
    }
}

/// What a writer keeps its prepared copy of a statement's text under: the text's
/// address and length. Every text is `'static` and rendered once, so the address tells
/// them apart without hashing the text at every execution (two copies of one text are
/// two keys, which only costs a second prepare).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TextKey(usize, usize);

impl TextKey {
    /// The key of `sql`.
    pub fn of(sql: &'static str) -> Self {
        Self(sql.as_ptr() as usize, sql.len())
    }
}

/// What a statement must find for its request to commit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expect {
    /// Anything.
    Any,
    /// Exactly one row, or the request fails with this conflict (a timer another
    /// process claimed; an entry whose Session or parent is not there).
    Claim(&'static str),
    /// Exactly one row, or the request is fenced: the lease moved on.
    Fence,
}

impl Expect {
    /// Checks the rows a statement changed (or, for a fence, found).
    pub fn check(self, rows: u64) -> Result<(), StoreError> {
        match self {
            Expect::Claim(conflict) if rows != 1 => Err(StoreError::Conflict(conflict.to_owned())),
            // Counted once the request's answer is final (`queue::answer`): a group that
            // fails runs again request by request and checks the fence a second time.
            Expect::Fence if rows != 1 => Err(StoreError::Fenced(
                "the Session's lease has another fencing token now".to_owned(),
            )),
            Expect::Any | Expect::Claim(_) | Expect::Fence => Ok(()),
        }
    }
}

/// One statement of a commit, with its parameters (the tenant aside: a store whose
/// dialect keys rows by the tenant binds it first).
#[derive(Clone, Debug)]
pub struct Stmt {
    /// The text, rendered for the store's dialect.
    pub sql: &'static str,
    /// The parameters from the second on (`$2`, or `?1` on SQLite), in order.
    pub binds: Vec<Bind>,
    /// What it must find.
    pub expect: Expect,
}
