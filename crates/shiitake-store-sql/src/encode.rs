//! How each [`Op`] becomes statements: the parameters of every write, bound once for
//! both dialects. JSON and packed messages are made here, on the committing task, so
//! a store's writer only executes.

use shiitake_core::store::{
    ExtensionRow, ExtensionStatusRow, FencingToken, Op, RowScope, SessionHeader, StoreError,
    StoredCommand, StoredCompaction, StoredEntry, StoredSandboxFailure, StoredTerminal, StoredWord,
    TimerRow, inbox_rank,
};
use shiitake_protocol::{CommandId, EntryId, ExtensionId, RequestId, SessionId};

use crate::dialect::{Dialect, Statement};
use crate::rows::int;
use crate::statements::*;
use crate::stmt::{Bind, Expect, Stmt};

/// The statements of one commit, in order, for `dialect`. `holder` is this process's
/// name in lease rows, which a fence checks; a dialect without leases (SQLite: one
/// process owns every Session of its file) fences nothing and ignores it.
pub fn encode(dialect: Dialect, holder: &str, ops: &[Op]) -> Result<Vec<Stmt>, StoreError> {
    let mut batch = Batch {
        dialect,
        holder,
        stmts: Vec::with_capacity(ops.len() + 1),
        fence_on_header: header_fence(dialect, ops),
        carried: None,
    };
    batch.carried = batch.fence_on_header.map(|(session_id, _)| session_id);
    // The fenced header first: a stale owner's commit is then refused by its fence,
    // not by the first row that collides with the new owner's.
    let early = early_header(&batch, ops);
    if let Some(at) = early {
        batch.op(&ops[at])?;
    }
    for (at, op) in ops.iter().enumerate() {
        if Some(at) != early {
            batch.op(op)?;
        }
    }
    Ok(batch.stmts)
}

/// Where in `ops` the header update carrying the fence is, when it can go first: the
/// commit does not create its Session (the update would find no row yet).
fn early_header(batch: &Batch<'_>, ops: &[Op]) -> Option<usize> {
    let (fenced, _) = batch.fence_on_header?;
    let creates = ops
        .iter()
        .any(|op| matches!(op, Op::CreateSession { header, .. } if &header.id == fenced));
    if creates {
        return None;
    }
    ops.iter()
        .position(|op| matches!(op, Op::PutHeader(header) if &header.id == fenced))
}

/// Whether `sql`, a statement [`encode`] made for `dialect`, changes rows of its
/// Session (`$2`) alone and binds plain values, so that a writer may fold the same
/// statement of several Sessions' commits into one over arrays.
pub fn per_session(dialect: Dialect, sql: &'static str) -> bool {
    PER_SESSION
        .iter()
        .any(|statement| std::ptr::eq(statement.text(dialect), sql))
}

struct Batch<'a> {
    dialect: Dialect,
    holder: &'a str,
    stmts: Vec<Stmt>,
    /// The commit's fence, when it rides on the header update of its Session instead
    /// of a statement of its own ([`header_fence`]); taken by that update.
    fence_on_header: Option<(&'a SessionId, FencingToken)>,
    /// The Session whose fence a header update carries, so its fence op adds nothing.
    carried: Option<&'a SessionId>,
}

/// The fence of `ops` that the header update of its Session can carry: on PostgreSQL,
/// when the commit has one fence and rewrites that Session's header. Each statement
/// of a group costs its own execution, so an acceptance (a command, the header, the
/// fence) is two statements instead of three (docs/benchmarks.md).
fn header_fence(dialect: Dialect, ops: &[Op]) -> Option<(&SessionId, FencingToken)> {
    if dialect != Dialect::Postgres {
        return None;
    }
    let mut fences = ops.iter().filter_map(|op| match op {
        Op::Fence { session_id, token } => Some((session_id, *token)),
        _ => None,
    });
    let fence = fences.next()?;
    if fences.next().is_some() {
        return None;
    }
    ops.iter()
        .any(|op| matches!(op, Op::PutHeader(header) if &header.id == fence.0))
        .then_some(fence)
}

impl Batch<'_> {
    fn push(&mut self, statement: &'static Statement, binds: Vec<Bind>) {
        self.expect(statement, binds, Expect::Any);
    }

    fn expect(&mut self, statement: &'static Statement, binds: Vec<Bind>, expect: Expect) {
        self.stmts.push(Stmt {
            sql: statement.text(self.dialect),
            binds,
            expect,
        });
    }

    /// Appends the statements of one op. No wildcard: a new op does not compile until
    /// it has its statements.
    fn op(&mut self, op: &Op) -> Result<(), StoreError> {
        match op {
            Op::CreateSession { header, request_id } => {
                let mut binds = header_binds(header)?;
                binds.push(request_id.as_ref().map(RequestId::as_str).into());
                self.push(&CREATE_SESSION, binds);
            }
            Op::PutHeader(header) => self.header(header)?,
            Op::DeleteSession { session_id } => self.delete_session(session_id),
            // Checked by the header's update instead.
            Op::Fence { session_id, .. } if self.carried == Some(session_id) => {}
            Op::Fence { session_id, token } => self.fence(session_id, *token),
            Op::InsertCommand {
                session_id,
                command,
            } => self.push(&INSERT_COMMAND, command_binds(session_id, command)),
            Op::SetCommandState {
                session_id,
                command_id,
                state,
                run_id,
            } => {
                let mut binds = vec![session_id.as_str().into(), command_id.as_str().into()];
                binds.push(state.word().into());
                binds.push(run_id.as_ref().map(CommandId::as_str).into());
                self.push(&SET_COMMAND_STATE, binds);
            }
            Op::CountRecovery {
                session_id,
                command_id,
            } => self.push(
                &COUNT_RECOVERY,
                vec![session_id.as_str().into(), command_id.as_str().into()],
            ),
            Op::InsertEntry { session_id, entry } => self.entry(session_id, entry)?,
            Op::InsertTerminal {
                session_id,
                terminal,
            } => self.push(&INSERT_TERMINAL, terminal_binds(session_id, terminal)),
            Op::InsertCompaction {
                session_id,
                compaction,
            } => self.push(&INSERT_COMPACTION, compaction_binds(session_id, compaction)),
            Op::InsertSandboxFailure {
                session_id,
                failure,
            } => self.push(&INSERT_SANDBOX_FAILURE, failure_binds(session_id, failure)),
            Op::PutAttention {
                session_id,
                extension_id,
                kind,
                inbox,
                text,
            } => {
                let mut binds = attention_key(session_id, extension_id, kind);
                binds.extend([(*inbox).into(), text.as_str().into()]);
                self.push(&PUT_ATTENTION, binds);
            }
            Op::DeleteAttention {
                session_id,
                extension_id,
                kind,
            } => self.push(
                &DELETE_ATTENTION,
                attention_key(session_id, extension_id, kind),
            ),
            Op::PutExtensionRow {
                extension_id,
                scope,
                collection,
                key,
                value,
            } => {
                let mut binds = row_key(extension_id, scope, collection, key);
                binds.push(value.to_string().into());
                self.push(&PUT_EXTENSION_ROW, binds);
            }
            Op::DeleteExtensionRow {
                extension_id,
                scope,
                collection,
                key,
            } => self.push(
                &DELETE_EXTENSION_ROW,
                row_key(extension_id, scope, collection, key),
            ),
            Op::ReplaceExtensionRows { extension_id, rows } => {
                self.replace_rows(extension_id, rows)
            }
            Op::PutExtensionStatus(status) => {
                self.push(&PUT_EXTENSION_STATUS, status_binds(status))
            }
            Op::PutExtensionRequest {
                extension_id,
                scope,
                request_id,
                payload,
                response,
            } => {
                let binds = vec![
                    extension_id.as_str().into(),
                    scope.scope_id().into(),
                    request_id.as_str().into(),
                    payload.as_str().into(),
                    response.to_string().into(),
                ];
                self.push(&PUT_EXTENSION_REQUEST, binds);
            }
            Op::PutTimer(timer) => self.push(&PUT_TIMER, timer_binds(timer)),
            Op::DeleteTimer { extension_id, id } => self.push(
                &DELETE_TIMER,
                vec![id.as_str().into(), extension_id.as_str().into()],
            ),
            Op::ClaimTimer { id, due_at, next } => self.claim_timer(id, *due_at, *next),
        }
        Ok(())
    }

    /// PostgreSQL also drops the requests forwarded to the Session's owner, which have
    /// no foreign key to cascade from.
    fn delete_session(&mut self, session_id: &SessionId) {
        if self.dialect == Dialect::Postgres {
            self.push(&DELETE_FORWARDED, vec![session_id.as_str().into()]);
        }
        self.push(&DELETE_SESSION, vec![session_id.as_str().into()]);
    }

    /// Every row of an extension, after a migration: the old ones go, the new ones come.
    fn replace_rows(&mut self, extension_id: &ExtensionId, rows: &[ExtensionRow]) {
        self.push(&DELETE_EXTENSION_ROWS, vec![extension_id.as_str().into()]);
        for row in rows {
            let mut binds = row_key(extension_id, &row.scope, &row.collection, &row.key);
            binds.push(row.value.to_string().into());
            self.push(&INSERT_EXTENSION_ROW, binds);
        }
    }

    /// On SQLite the insert selects the row of its Session (or its parent), so one that
    /// is not there changes nothing and fails the commit instead of cutting the lineage;
    /// on PostgreSQL it always inserts one row.
    fn entry(&mut self, session_id: &SessionId, entry: &StoredEntry) -> Result<(), StoreError> {
        let mut binds = vec![
            session_id.as_str().into(),
            entry.id.as_str().into(),
            int(entry.sequence).into(),
            entry.command_id.as_ref().map(CommandId::as_str).into(),
            crate::packed::pack(&entry.message)?.into(),
        ];
        match &entry.parent {
            None => self.expect(
                &INSERT_ROOT_ENTRY,
                binds,
                Expect::Claim("an entry of a Session that does not exist"),
            ),
            Some(parent) => {
                binds.push(parent.as_str().into());
                self.expect(
                    &INSERT_CHILD_ENTRY,
                    binds,
                    Expect::Claim("an entry whose parent is not in its Session"),
                );
            }
        }
        Ok(())
    }

    /// A claim changes its row only while the timer is still due when the firing saw
    /// it. PostgreSQL serialises conditional updates of one row: a second claimer waits
    /// for the first, finds the due time moved, and fails.
    fn claim_timer(&mut self, id: &str, due_at: u64, next: Option<u64>) {
        let mut binds = vec![id.into(), int(due_at).into()];
        let statement = match next {
            Some(next) => {
                binds.push(int(next).into());
                &CLAIM_TIMER_MOVE
            }
            None => &CLAIM_TIMER_DELETE,
        };
        self.expect(
            statement,
            binds,
            Expect::Claim("a timer was already claimed"),
        );
    }

    /// A header rewrite; the first of the fenced Session's carries the commit's fence.
    fn header(&mut self, header: &SessionHeader) -> Result<(), StoreError> {
        let mut binds = header_binds(header)?;
        match self.fence_on_header {
            Some((session_id, token)) if *session_id == header.id => {
                self.fence_on_header = None;
                binds.extend([int(token.0).into(), self.holder.into()]);
                self.expect(&PUT_HEADER_FENCED, binds, Expect::Fence);
            }
            _ => self.push(&PUT_HEADER, binds),
        }
        Ok(())
    }

    fn fence(&mut self, session_id: &SessionId, token: FencingToken) {
        match self.dialect {
            // One process owns every Session of a SQLite file: there is no lease to check.
            Dialect::Sqlite => {}
            Dialect::Postgres => {
                let binds = vec![
                    session_id.as_str().into(),
                    int(token.0).into(),
                    self.holder.into(),
                ];
                self.expect(&FENCE, binds, Expect::Fence);
            }
        }
    }
}

/// `$2` .. `$13`: the header, written whole.
fn header_binds(header: &SessionHeader) -> Result<Vec<Bind>, StoreError> {
    let preference = header
        .model_preference
        .as_ref()
        .map(serde_json::to_string)
        .transpose()
        .map_err(|error| StoreError::Corrupt(format!("model preference: {error}")))?;
    Ok(vec![
        header.id.as_str().into(),
        int(header.created_at).into(),
        int(header.last_activity_at).into(),
        header.settled_at.map(int).into(),
        header.title.as_str().into(),
        int(header.head_sequence).into(),
        header.leaf.as_ref().map(EntryId::as_str).into(),
        int(header.epoch).into(),
        preference.into(),
        header.inbox_state.word().into(),
        i64::from(inbox_rank(header.inbox_state)).into(),
        header.open_from.as_ref().map(CommandId::as_str).into(),
    ])
}

fn command_binds(session_id: &SessionId, command: &StoredCommand) -> Vec<Bind> {
    vec![
        session_id.as_str().into(),
        command.id.as_str().into(),
        command.request_id.as_ref().map(RequestId::as_str).into(),
        command.kind.word().into(),
        command.payload.as_str().into(),
        int(command.accepted_sequence).into(),
        command.state.word().into(),
        command.run_id.as_ref().map(CommandId::as_str).into(),
        i64::from(command.recoveries).into(),
        command.origin.as_ref().map(ToString::to_string).into(),
    ]
}

fn terminal_binds(session_id: &SessionId, terminal: &StoredTerminal) -> Vec<Bind> {
    vec![
        session_id.as_str().into(),
        terminal.command_id.as_str().into(),
        terminal.outcome.word().into(),
        int(terminal.sequence).into(),
        terminal.diagnostic.clone().into(),
        terminal.anchor.as_ref().map(EntryId::as_str).into(),
    ]
}

fn compaction_binds(session_id: &SessionId, compaction: &StoredCompaction) -> Vec<Bind> {
    vec![
        session_id.as_str().into(),
        compaction.id.as_str().into(),
        int(compaction.commit_sequence).into(),
        compaction.first_kept.as_str().into(),
        int(compaction.precedes_sequence).into(),
        int(compaction.at).into(),
        compaction.summary.as_str().into(),
    ]
}

fn failure_binds(session_id: &SessionId, failure: &StoredSandboxFailure) -> Vec<Bind> {
    vec![
        session_id.as_str().into(),
        failure.id.as_str().into(),
        int(failure.sequence).into(),
        int(failure.at).into(),
        failure.capability.as_str().into(),
        failure.message.as_str().into(),
    ]
}

fn status_binds(status: &ExtensionStatusRow) -> Vec<Bind> {
    vec![
        status.extension_id.as_str().into(),
        status.revision.as_str().into(),
        i64::from(status.schema_version).into(),
        status.stopped_reason.clone().into(),
    ]
}

fn timer_binds(timer: &TimerRow) -> Vec<Bind> {
    vec![
        timer.id.as_str().into(),
        timer.extension_id.as_str().into(),
        timer.session_id.as_ref().map(SessionId::as_str).into(),
        int(timer.due_at).into(),
        timer.cadence.clone().into(),
        timer.payload.to_string().into(),
        timer.kind.word().into(),
    ]
}

fn attention_key(session_id: &SessionId, extension_id: &ExtensionId, kind: &str) -> Vec<Bind> {
    vec![
        session_id.as_str().into(),
        extension_id.as_str().into(),
        kind.into(),
    ]
}

/// `$2` .. `$6`: the key of one extension row.
fn row_key(extension_id: &ExtensionId, scope: &RowScope, collection: &str, key: &str) -> Vec<Bind> {
    vec![
        extension_id.as_str().into(),
        scope.kind().word().into(),
        scope.scope_id().into(),
        collection.into(),
        key.into(),
    ]
}

#[cfg(test)]
mod tests {
    use shiitake_core::store::SessionHeader;

    use super::*;

    fn session(id: &str) -> SessionId {
        SessionId::new(id.to_owned()).expect("a session id")
    }

    fn fence(id: &str) -> Op {
        Op::Fence {
            session_id: session(id),
            token: FencingToken(7),
        }
    }

    fn header(id: &str) -> Op {
        Op::PutHeader(SessionHeader::new(session(id), 1))
    }

    fn texts(dialect: Dialect, ops: &[Op]) -> Vec<(&'static str, Expect, usize)> {
        encode(dialect, "holder-1", ops)
            .expect("encodes")
            .into_iter()
            .map(|stmt| (stmt.sql, stmt.expect, stmt.binds.len()))
            .collect()
    }

    #[test]
    fn on_postgres_the_fence_rides_on_the_header_of_its_session() {
        let found = texts(Dialect::Postgres, &[fence("ses_a"), header("ses_a")]);
        let fenced = PUT_HEADER_FENCED.text(Dialect::Postgres);
        // The header's twelve binds, then the token and the holder.
        assert_eq!(found, vec![(fenced, Expect::Fence, 14)]);
    }

    #[test]
    fn a_fence_without_its_sessions_header_keeps_its_own_statement() {
        let fence_text = FENCE.text(Dialect::Postgres);
        let header_text = PUT_HEADER.text(Dialect::Postgres);
        // Another Session's header: the fence cannot ride on it.
        let found = texts(Dialect::Postgres, &[fence("ses_a"), header("ses_b")]);
        assert_eq!(
            found,
            vec![
                (fence_text, Expect::Fence, 3),
                (header_text, Expect::Any, 12)
            ]
        );
        // No header at all.
        let found = texts(Dialect::Postgres, &[fence("ses_a")]);
        assert_eq!(found, vec![(fence_text, Expect::Fence, 3)]);
    }

    #[test]
    fn only_the_first_header_of_the_fenced_session_carries_the_fence() {
        let found = texts(
            Dialect::Postgres,
            &[fence("ses_a"), header("ses_a"), header("ses_a")],
        );
        assert_eq!(
            found,
            vec![
                (PUT_HEADER_FENCED.text(Dialect::Postgres), Expect::Fence, 14),
                (PUT_HEADER.text(Dialect::Postgres), Expect::Any, 12),
            ]
        );
    }

    /// A stale owner's commit must be refused by its fence, before any of its rows
    /// collides with what the new owner wrote: the fenced header goes first.
    #[test]
    fn the_header_carrying_the_fence_goes_before_the_rest_of_the_commit() {
        let found = texts(
            Dialect::Postgres,
            &[fence("ses_a"), header("ses_b"), header("ses_a")],
        );
        assert_eq!(
            found,
            vec![
                (PUT_HEADER_FENCED.text(Dialect::Postgres), Expect::Fence, 14),
                (PUT_HEADER.text(Dialect::Postgres), Expect::Any, 12),
            ]
        );
    }

    #[test]
    fn sqlite_has_no_fence_to_fold() {
        let found = texts(Dialect::Sqlite, &[fence("ses_a"), header("ses_a")]);
        assert_eq!(
            found,
            vec![(PUT_HEADER.text(Dialect::Sqlite), Expect::Any, 12)]
        );
    }

    #[test]
    fn per_session_statements_are_known_by_their_rendered_text() {
        for dialect in [Dialect::Postgres, Dialect::Sqlite] {
            assert!(per_session(dialect, PUT_HEADER.text(dialect)));
            assert!(per_session(dialect, INSERT_CHILD_ENTRY.text(dialect)));
            // Creation may be refused by a unique request id; the fence reads a lease.
            assert!(!per_session(dialect, CREATE_SESSION.text(dialect)));
            assert!(!per_session(dialect, COUNT_RECOVERY.text(dialect)));
        }
        assert!(!per_session(
            Dialect::Postgres,
            FENCE.text(Dialect::Postgres)
        ));
        // The same text elsewhere is not the statement: it is known by where it lives.
        let copy: &'static str = Box::leak(PUT_HEADER.text(Dialect::Postgres).into());
        assert!(!per_session(Dialect::Postgres, copy));
    }
}
