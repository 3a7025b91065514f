//! Two dialects, one text: how a statement written once becomes SQLite's or PostgreSQL's.
//!
//! A [`Statement`] is written in PostgreSQL's form, with two conventions:
//!
//! - **`$1` is the tenant.** PostgreSQL keys every row by the Agent (several share a
//!   database), so every statement's first parameter is the Agent and every
//!   tenant-keyed part is written in square brackets: `[agent_id, ]`, `[$1, ]`,
//!   `[agent_id = $1 AND ]`. A SQLite file holds one Agent: its rendering drops the
//!   bracketed parts and numbers the other parameters from `?1` (`$2` becomes `?1`),
//!   so a statement's binds are the same list on both databases, the tenant aside.
//! - **Types are spelled so both read them:** `CAST($2 AS BIGINT) IS NULL`, not
//!   PostgreSQL's `$2::bigint`.
//!
//! Where the layouts differ (SQLite keys entries by an integer Session key, migration
//! 0007), a statement is written once per dialect with [`Statement::each`], with the
//! same parameters. Each text is rendered the first time it is used and kept, so a
//! commit never formats SQL.

use std::sync::OnceLock;

/// The database a statement is rendered for.
///
/// Each store names its own; the statements, reads and encoding of ops are shared.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dialect {
    /// SQLite: one Agent per file, entries keyed by an integer Session key.
    Sqlite,
    /// PostgreSQL: rows keyed by the tenant first, leases fence commits.
    Postgres,
}

impl Dialect {
    /// The statement that makes a read transaction one snapshot, where `BEGIN` alone
    /// does not: PostgreSQL's default isolation gives each statement its own snapshot,
    /// while a SQLite read transaction in WAL mode is one snapshot already.
    pub fn snapshot(self) -> Option<&'static str> {
        match self {
            Dialect::Sqlite => None,
            Dialect::Postgres => Some("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY"),
        }
    }

    /// Whether the first parameter of every statement is the tenant.
    pub fn keys_by_tenant(self) -> bool {
        matches!(self, Dialect::Postgres)
    }

    fn index(self) -> usize {
        match self {
            Dialect::Sqlite => 0,
            Dialect::Postgres => 1,
        }
    }
}

/// One SQL statement, written once for both dialects (see the module doc).
pub(crate) struct Statement {
    written: [&'static str; 2],
    rendered: [OnceLock<Box<str>>; 2],
}

impl Statement {
    /// A statement both dialects run, tenant-keyed parts in brackets.
    pub(crate) const fn new(text: &'static str) -> Self {
        Self::each(text, text)
    }

    /// A statement whose text differs by layout, with the same parameters on both.
    pub(crate) const fn each(sqlite: &'static str, postgres: &'static str) -> Self {
        Self {
            written: [sqlite, postgres],
            rendered: [OnceLock::new(), OnceLock::new()],
        }
    }

    /// The text for `dialect`, rendered on first use and kept.
    pub(crate) fn text(&'static self, dialect: Dialect) -> &'static str {
        let at = dialect.index();
        self.rendered[at].get_or_init(|| render(self.written[at], dialect).into_boxed_str())
    }
}

impl std::fmt::Debug for Statement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Statement").field(&self.written[1]).finish()
    }
}

/// Renders a written statement: PostgreSQL keeps the bracketed parts (without the
/// brackets); SQLite drops them and numbers `$n` as `?(n-1)`. A `$1` left outside
/// brackets becomes `?0`, which SQLite refuses when it prepares the statement.
fn render(written: &str, dialect: Dialect) -> String {
    let mut out = String::with_capacity(written.len());
    let mut chars = written.chars().peekable();
    let mut in_tenant = false;
    while let Some(c) = chars.next() {
        match c {
            '[' => in_tenant = true,
            ']' => in_tenant = false,
            _ if in_tenant && dialect == Dialect::Sqlite => {}
            '$' if dialect == Dialect::Sqlite => {
                let mut number = 0usize;
                while let Some(digit) = chars.peek().and_then(|c| c.to_digit(10)) {
                    number = number.saturating_mul(10).saturating_add(digit as usize);
                    chars.next();
                }
                out.push('?');
                out.push_str(&number.saturating_sub(1).to_string());
            }
            _ => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqlite_drops_the_tenant_and_numbers_from_one() {
        let written = "UPDATE t SET a = $3 WHERE [agent_id = $1 AND ]id = $2 AND b = $12";
        assert_eq!(
            render(written, Dialect::Sqlite),
            "UPDATE t SET a = ?2 WHERE id = ?1 AND b = ?11"
        );
        assert_eq!(
            render(written, Dialect::Postgres),
            "UPDATE t SET a = $3 WHERE agent_id = $1 AND id = $2 AND b = $12"
        );
    }

    #[test]
    fn a_text_is_rendered_once_per_dialect() {
        static S: Statement = Statement::new("SELECT 1 FROM t[ WHERE agent_id = $1]");
        assert_eq!(S.text(Dialect::Sqlite), "SELECT 1 FROM t");
        assert!(std::ptr::eq(
            S.text(Dialect::Sqlite),
            S.text(Dialect::Sqlite)
        ));
        assert_eq!(
            S.text(Dialect::Postgres),
            "SELECT 1 FROM t WHERE agent_id = $1"
        );
    }
}
