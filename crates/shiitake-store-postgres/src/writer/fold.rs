//! A group's statements folded by shape: when every request of a group writes one
//! Session of its own, through the statements that touch their Session's rows alone
//! (`shiitake_store_sql::per_session`), the same statement of every request runs once,
//! over arrays (`UPDATE … FROM unnest(…)`, `INSERT … SELECT … FROM unnest(…)`).
//!
//! A group of 20 acceptances was 40 statements and is 2; a 10-step run went from 63
//! statements to about 24, and acceptances became about 1.14× as fast
//! (docs/benchmarks.md, "Folded statements"). Requests of distinct Sessions touch
//! distinct rows, so running the first statement of every request, then the second,
//! and so on, changes the same rows, to the same values, as running them request by
//! request. A folded statement must change one row per request where each statement
//! had to (a fenced header, a claimed entry); when it changes fewer, or fails, the
//! group is run again request by request, which finds the one that failed.

use std::collections::HashSet;

use shiitake_core::store::StoreError;
use shiitake_store_sql::{Bind, Dialect, Expect, Stmt, TextKey, per_session};
use tokio_postgres::types::{ToSql, Type};

/// One statement run for several requests at once.
pub(super) struct Fold<'a> {
    /// The statement each request runs, as [`shiitake_store_sql::encode`] wrote it.
    pub(super) sql: &'static str,
    /// How many statements of the same text each request ran before this one.
    occurrence: usize,
    /// What each request's statement must find.
    expect: Expect,
    /// The requests it runs for, by index in the group, with their tenant and statement.
    rows: Vec<(usize, &'a str, &'a Stmt)>,
}

/// A request of a group as the planner sees it: its index in the group, its tenant
/// and its statements.
pub(super) type Request<'a> = (usize, &'a str, &'a [Stmt]);

/// The group's statements as folds, in an order that keeps each request's own order,
/// or `None` when the group is not folded: fewer than two requests, a statement that
/// is not per-Session, two requests of one Session, binds of another type, or
/// requests whose statements come in orders no one sequence of folds keeps.
pub(super) fn plan<'a>(requests: &[Request<'a>]) -> Option<Vec<Fold<'a>>> {
    if requests.len() < 2 {
        return None;
    }
    let mut sessions = HashSet::with_capacity(requests.len());
    let mut folds: Vec<Fold<'a>> = Vec::new();
    for &(at, agent, statements) in requests {
        if !sessions.insert((agent, session_of(statements)?)) {
            return None;
        }
        // The fold of this request's previous statement: the next one must come later.
        let mut previous = None;
        for (nth, stmt) in statements.iter().enumerate() {
            if !per_session(Dialect::Postgres, stmt.sql) {
                return None;
            }
            let occurrence = statements[..nth]
                .iter()
                .filter(|earlier| std::ptr::eq(earlier.sql, stmt.sql))
                .count();
            let found = folds.iter().position(|fold| {
                TextKey::of(fold.sql) == TextKey::of(stmt.sql) && fold.occurrence == occurrence
            });
            let index = match found {
                Some(index) if folds[index].takes(stmt) => index,
                Some(_) => return None,
                None => {
                    folds.push(Fold {
                        sql: stmt.sql,
                        occurrence,
                        expect: stmt.expect,
                        rows: Vec::new(),
                    });
                    folds.len() - 1
                }
            };
            if previous.is_some_and(|previous| index <= previous) {
                return None;
            }
            previous = Some(index);
            folds[index].rows.push((at, agent, stmt));
        }
    }
    Some(folds)
}

/// The Session every statement of a request names in `$2`, when they all name one.
fn session_of(statements: &[Stmt]) -> Option<&str> {
    let mut session = None;
    for stmt in statements {
        let Some(Bind::Text(Some(id))) = stmt.binds.first() else {
            return None;
        };
        match session {
            Some(known) if known != id.as_str() => return None,
            _ => session = Some(id.as_str()),
        }
    }
    session
}

impl<'a> Fold<'a> {
    /// Whether `stmt` can join: it must find what the others must, and bind values of
    /// the same types (a NULL keeps its column's type).
    fn takes(&self, stmt: &Stmt) -> bool {
        let Some((_, _, first)) = self.rows.first() else {
            return true;
        };
        self.expect == stmt.expect
            && first.binds.len() == stmt.binds.len()
            && first
                .binds
                .iter()
                .zip(&stmt.binds)
                .all(|(a, b)| std::mem::discriminant(a) == std::mem::discriminant(b))
    }

    /// The first request this fold runs for, which a failure of it is reported against
    /// (the group is then run again request by request, which finds the real one).
    pub(super) fn first_request(&self) -> usize {
        self.rows.first().map_or(0, |(at, _, _)| *at)
    }

    /// How many requests it runs for.
    pub(super) fn len(&self) -> u64 {
        self.rows.len() as u64
    }

    /// Its parameters: the tenants, then each bind of every request, column by column.
    pub(super) fn columns(&self) -> Vec<Column<'a>> {
        let mut columns = Vec::new();
        columns.push(Column::Text(
            self.rows.iter().map(|(_, agent, _)| Some(*agent)).collect(),
        ));
        let Some((_, _, first)) = self.rows.first() else {
            return columns;
        };
        for (nth, bind) in first.binds.iter().enumerate() {
            let values = self
                .rows
                .iter()
                .filter_map(|(_, _, stmt)| stmt.binds.get(nth));
            columns.push(match bind {
                Bind::Text(_) => Column::Text(values.map(text).collect()),
                Bind::Int(_) => Column::Int(values.map(int).collect()),
                Bind::Bytes(_) => Column::Bytes(values.map(bytes).collect()),
                Bind::Bool(_) => Column::Bool(values.map(boolean).collect()),
            });
        }
        columns
    }

    /// What the rows the folded statement changed say of its requests: every request
    /// whose statement had to find its row did, or the fold failed. Which request
    /// failed, and how, is for the group's run request by request to find (a folded group holds
    /// two requests at least), so this error reaches no caller and counts no fence.
    pub(super) fn check(&self, rows: u64) -> Result<(), StoreError> {
        match self.expect {
            Expect::Claim(_) | Expect::Fence if rows != self.len() => Err(StoreError::Conflict(
                format!("a folded statement found {rows} of its {} rows", self.len()),
            )),
            _ => Ok(()),
        }
    }
}

// `takes` let only binds of the fold's types in: the other arms are never taken.
fn text(bind: &Bind) -> Option<&str> {
    match bind {
        Bind::Text(value) => value.as_deref(),
        _ => None,
    }
}

fn int(bind: &Bind) -> Option<i64> {
    match bind {
        Bind::Int(value) => *value,
        _ => None,
    }
}

fn bytes(bind: &Bind) -> &[u8] {
    match bind {
        Bind::Bytes(value) => value,
        _ => &[],
    }
}

fn boolean(bind: &Bind) -> bool {
    matches!(bind, Bind::Bool(true))
}

/// One parameter of a folded statement: a value of every request, as an array.
pub(super) enum Column<'a> {
    Text(Vec<Option<&'a str>>),
    Int(Vec<Option<i64>>),
    Bytes(Vec<&'a [u8]>),
    Bool(Vec<bool>),
}

impl Column<'_> {
    /// The array's type, as the folded text casts it.
    pub(super) fn sql_type(&self) -> Type {
        match self {
            Column::Text(_) => Type::TEXT_ARRAY,
            Column::Int(_) => Type::INT8_ARRAY,
            Column::Bytes(_) => Type::BYTEA_ARRAY,
            Column::Bool(_) => Type::BOOL_ARRAY,
        }
    }

    pub(super) fn value(&self) -> &(dyn ToSql + Sync) {
        match self {
            Column::Text(values) => values,
            Column::Int(values) => values,
            Column::Bytes(values) => values,
            Column::Bool(values) => values,
        }
    }
}

/// The set-based text of a per-Session statement: each `$k` becomes `u.pk`, the k-th
/// column of `unnest($1::T1[], …, $n::Tn[]) AS u(p1, …, pn)`, which an `INSERT … VALUES`
/// selects from and an `UPDATE` joins (`FROM` before its `WHERE`). `None` for any other
/// form.
pub(super) fn set_based(sql: &str, types: &[Type]) -> Option<String> {
    let body = columns_for_parameters(sql);
    let unnest = unnest(types);
    if body.starts_with("INSERT INTO ") {
        let (head, values) = body.split_once(") VALUES (")?;
        let values = values.strip_suffix(')')?;
        return Some(format!("{head}) SELECT {values} FROM {unnest}"));
    }
    if body.starts_with("UPDATE ") {
        let (set, condition) = body.split_once(" WHERE ")?;
        return Some(format!("{set} FROM {unnest} WHERE {condition}"));
    }
    None
}

/// `sql` with every parameter `$k` written `u.pk`.
fn columns_for_parameters(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len() + sql.len() / 4);
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '$' && chars.peek().is_some_and(char::is_ascii_digit) {
            out.push_str("u.p");
            while let Some(digit) = chars.next_if(char::is_ascii_digit) {
                out.push(digit);
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// `unnest($1::T1[], …) AS u(p1, …)` for parameters of these array types.
fn unnest(types: &[Type]) -> String {
    let arrays: Vec<String> = types
        .iter()
        .enumerate()
        .map(|(at, ty)| format!("${}::{}", at + 1, array_name(ty)))
        .collect();
    let names: Vec<String> = (1..=types.len()).map(|n| format!("p{n}")).collect();
    format!("unnest({}) AS u({})", arrays.join(", "), names.join(", "))
}

fn array_name(ty: &Type) -> &'static str {
    match *ty {
        Type::INT8_ARRAY => "int8[]",
        Type::BYTEA_ARRAY => "bytea[]",
        Type::BOOL_ARRAY => "bool[]",
        _ => "text[]",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::AgentKey;
    use crate::writer::prepare;
    use shiitake_core::store::{
        CommandKind, CommandState, FencingToken, Op, SessionHeader, StoredCommand, StoredEntry,
    };
    use shiitake_protocol::message::{Message, UserMessage};
    use shiitake_protocol::{CommandId, EntryId, SessionId};

    fn session(n: u32) -> SessionId {
        SessionId::new(format!("ses_{n:04}")).unwrap()
    }

    fn fence(n: u32) -> Op {
        Op::Fence {
            session_id: session(n),
            token: FencingToken(7),
        }
    }

    fn header(n: u32) -> Op {
        Op::PutHeader(SessionHeader::new(session(n), 1))
    }

    fn command(n: u32) -> Op {
        Op::InsertCommand {
            session_id: session(n),
            command: StoredCommand {
                id: CommandId::new(format!("cmd_{n:04}")).unwrap(),
                request_id: None,
                origin: None,
                kind: CommandKind::Prompt,
                payload: "{}".to_owned(),
                accepted_sequence: 1,
                state: CommandState::Pending,
                run_id: None,
                recoveries: 0,
            },
        }
    }

    fn entry(n: u32, sequence: u64) -> Op {
        Op::InsertEntry {
            session_id: session(n),
            entry: StoredEntry {
                id: EntryId::new(format!("ent_{n:04}_{sequence}")).unwrap(),
                parent: (sequence > 1)
                    .then(|| EntryId::new(format!("ent_{n:04}_{}", sequence - 1)).unwrap()),
                sequence,
                command_id: None,
                message: Message::User(UserMessage::text("hi", 1)),
            },
        }
    }

    /// The folds of these requests' ops (tenant `a`): each fold's statement and requests.
    fn folds(requests: &[Vec<Op>]) -> Option<Vec<(&'static str, Vec<usize>)>> {
        let agent = AgentKey::new("a").unwrap();
        let prepared: Vec<_> = requests
            .iter()
            .map(|ops| prepare("holder", &agent, ops).unwrap())
            .collect();
        let requests: Vec<Request<'_>> = prepared
            .iter()
            .enumerate()
            .map(|(at, request)| (at, request.agent.as_str(), request.statements.as_slice()))
            .collect();
        plan(&requests).map(|folds| {
            folds
                .iter()
                .map(|fold| (fold.sql, fold.rows.iter().map(|(at, _, _)| *at).collect()))
                .collect()
        })
    }

    #[test]
    fn acceptances_of_distinct_sessions_fold_into_one_statement_each() {
        let acceptance = |n| vec![fence(n), command(n), header(n)];
        let folded = folds(&[acceptance(1), acceptance(2), acceptance(3)]).unwrap();
        assert_eq!(folded.len(), 2);
        // The fenced header first (a stale owner is refused by its fence before any
        // row of its collides with the new owner's), then the commands.
        assert!(
            folded[0].0.starts_with("UPDATE sessions") && folded[0].0.contains("FOR KEY SHARE")
        );
        assert!(folded[1].0.starts_with("INSERT INTO commands"));
        assert!(
            folded
                .iter()
                .all(|(_, requests)| *requests == vec![0, 1, 2])
        );
    }

    #[test]
    fn a_second_entry_of_a_request_is_a_fold_of_its_own_after_the_first() {
        let folded = folds(&[
            vec![entry(1, 2), entry(1, 3), header(1)],
            vec![entry(2, 5), header(2)],
        ])
        .unwrap();
        let requests: Vec<Vec<usize>> = folded.iter().map(|(_, r)| r.clone()).collect();
        // Each request's first child entry, request 1's second, then both headers.
        assert_eq!(requests, vec![vec![0, 1], vec![0], vec![0, 1]]);
        assert!(std::ptr::eq(folded[0].0, folded[1].0));
        assert!(folded[2].0.starts_with("UPDATE sessions"));
    }

    #[test]
    fn groups_that_cannot_fold_run_as_they_are() {
        // One request: nothing to fold.
        assert!(folds(&[vec![command(1), header(1)]]).is_none());
        // Two requests of one Session.
        assert!(folds(&[vec![command(1)], vec![header(1)]]).is_none());
        // A statement that is not among the per-Session ones.
        let recovery = Op::CountRecovery {
            session_id: session(2),
            command_id: CommandId::new("cmd_0002").unwrap(),
        };
        assert!(folds(&[vec![command(1), header(1)], vec![command(2), recovery]]).is_none());
        // Orders no one sequence keeps.
        assert!(folds(&[vec![command(1), header(1)], vec![header(2), command(2)]]).is_none());
        // A request that names two Sessions.
        assert!(folds(&[vec![command(1), header(2)], vec![command(3), header(3)]]).is_none());
    }

    #[test]
    fn an_insert_selects_its_values_from_the_arrays() {
        let sql = "INSERT INTO t (agent_id, a, b) VALUES ($1, $2, $3)";
        assert_eq!(
            set_based(
                sql,
                &[Type::TEXT_ARRAY, Type::INT8_ARRAY, Type::BYTEA_ARRAY]
            )
            .unwrap(),
            "INSERT INTO t (agent_id, a, b) SELECT u.p1, u.p2, u.p3 FROM \
             unnest($1::text[], $2::int8[], $3::bytea[]) AS u(p1, p2, p3)"
        );
    }

    #[test]
    fn an_update_joins_the_arrays_before_its_condition_and_subqueries_read_them() {
        let sql = "UPDATE t SET a = $3, b = COALESCE($10, b) WHERE agent_id = $1 AND id = $2 \
                   AND EXISTS (SELECT 1 FROM l WHERE id = $2 AND k = $11 FOR KEY SHARE)";
        let types = vec![Type::TEXT_ARRAY; 11];
        let folded = set_based(sql, &types).unwrap();
        assert!(
            folded.starts_with(
                "UPDATE t SET a = u.p3, b = COALESCE(u.p10, b) FROM unnest($1::text[], "
            )
        );
        assert!(folded.ends_with(
            "AS u(p1, p2, p3, p4, p5, p6, p7, p8, p9, p10, p11) WHERE agent_id = u.p1 AND \
             id = u.p2 AND EXISTS (SELECT 1 FROM l WHERE id = u.p2 AND k = u.p11 FOR KEY SHARE)"
        ));
    }

    #[test]
    fn other_forms_are_not_folded() {
        assert_eq!(
            set_based("DELETE FROM t WHERE id = $1", &[Type::TEXT_ARRAY]),
            None
        );
        assert_eq!(
            set_based("INSERT INTO t (a) SELECT $1", &[Type::TEXT_ARRAY]),
            None
        );
    }
}
