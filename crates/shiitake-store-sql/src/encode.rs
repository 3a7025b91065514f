//! How each [`Op`] becomes statements: the parameters of every write, bound once for
//! both dialects. JSON and packed messages are made here, on the committing task, so
//! a store's writer only executes.

use shiitake_core::store::{
    FencingToken, Op, RowScope, SessionHeader, StoreError, StoredWord, inbox_rank,
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
    };
    for op in ops {
        batch.op(op)?;
    }
    Ok(batch.stmts)
}

struct Batch<'a> {
    dialect: Dialect,
    holder: &'a str,
    stmts: Vec<Stmt>,
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

    /// Routes each op to the part that writes it; no wildcard here, so a new op does
    /// not compile until it has its statements.
    fn op(&mut self, op: &Op) -> Result<(), StoreError> {
        match op {
            Op::CreateSession { .. }
            | Op::PutHeader(_)
            | Op::DeleteSession { .. }
            | Op::Fence { .. }
            | Op::InsertCommand { .. }
            | Op::SetCommandState { .. }
            | Op::CountRecovery { .. }
            | Op::InsertEntry { .. } => self.session_op(op),
            Op::InsertTerminal { .. }
            | Op::InsertCompaction { .. }
            | Op::InsertSandboxFailure { .. }
            | Op::PutAttention { .. }
            | Op::DeleteAttention { .. } => self.event_op(op),
            Op::PutExtensionRow { .. }
            | Op::DeleteExtensionRow { .. }
            | Op::ReplaceExtensionRows { .. }
            | Op::PutExtensionStatus(_)
            | Op::PutExtensionRequest { .. } => self.extension_op(op),
            Op::PutTimer(_) | Op::DeleteTimer { .. } | Op::ClaimTimer { .. } => {
                self.timer_op(op);
                Ok(())
            }
        }
    }

    /// Sessions, commands and entries.
    fn session_op(&mut self, op: &Op) -> Result<(), StoreError> {
        match op {
            Op::CreateSession { header, request_id } => {
                let mut binds = header_binds(header)?;
                binds.push(request_id.as_ref().map(RequestId::as_str).into());
                self.push(&CREATE_SESSION, binds);
            }
            Op::PutHeader(header) => self.push(&PUT_HEADER, header_binds(header)?),
            Op::DeleteSession { session_id } => {
                if self.dialect == Dialect::Postgres {
                    self.push(&DELETE_FORWARDED, vec![session_id.as_str().into()]);
                }
                self.push(&DELETE_SESSION, vec![session_id.as_str().into()]);
            }
            Op::Fence { session_id, token } => self.fence(session_id, *token),
            Op::InsertCommand {
                session_id,
                command,
            } => self.push(
                &INSERT_COMMAND,
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
                ],
            ),
            Op::SetCommandState {
                session_id,
                command_id,
                state,
                run_id,
            } => {
                let mut binds = command_key(session_id, command_id);
                binds.push(state.word().into());
                binds.push(run_id.as_ref().map(CommandId::as_str).into());
                self.push(&SET_COMMAND_STATE, binds);
            }
            Op::CountRecovery {
                session_id,
                command_id,
            } => self.push(&COUNT_RECOVERY, command_key(session_id, command_id)),
            Op::InsertEntry { session_id, entry } => {
                let mut binds = vec![
                    session_id.as_str().into(),
                    entry.id.as_str().into(),
                    int(entry.sequence).into(),
                    entry.command_id.as_ref().map(CommandId::as_str).into(),
                    crate::packed::pack(&entry.message)?.into(),
                ];
                // On SQLite the insert selects the row of its Session (or its parent), so
                // one that is not there changes nothing and fails the commit instead of
                // cutting the lineage; on PostgreSQL it always inserts one row.
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
            }
            _ => {} // routed by `op`
        }
        Ok(())
    }

    /// Terminals, compactions, sandbox failures, extension state, attention, timers.
    fn event_op(&mut self, op: &Op) -> Result<(), StoreError> {
        match op {
            Op::InsertTerminal {
                session_id,
                terminal: t,
            } => self.push(
                &INSERT_TERMINAL,
                vec![
                    session_id.as_str().into(),
                    t.command_id.as_str().into(),
                    t.outcome.word().into(),
                    int(t.sequence).into(),
                    t.diagnostic.clone().into(),
                    t.anchor.as_ref().map(EntryId::as_str).into(),
                ],
            ),
            Op::InsertCompaction {
                session_id,
                compaction: c,
            } => self.push(
                &INSERT_COMPACTION,
                vec![
                    session_id.as_str().into(),
                    c.id.as_str().into(),
                    int(c.commit_sequence).into(),
                    c.first_kept.as_str().into(),
                    int(c.precedes_sequence).into(),
                    int(c.at).into(),
                    c.summary.as_str().into(),
                ],
            ),
            Op::InsertSandboxFailure {
                session_id,
                failure: f,
            } => self.push(
                &INSERT_SANDBOX_FAILURE,
                vec![
                    session_id.as_str().into(),
                    f.id.as_str().into(),
                    int(f.sequence).into(),
                    int(f.at).into(),
                    f.capability.as_str().into(),
                    f.message.as_str().into(),
                ],
            ),
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
            _ => {} // routed by `op`
        }
        Ok(())
    }

    /// Extension rows, statuses and requests, and timers.
    fn extension_op(&mut self, op: &Op) -> Result<(), StoreError> {
        match op {
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
                self.push(&DELETE_EXTENSION_ROWS, vec![extension_id.as_str().into()]);
                for row in rows {
                    let mut binds = row_key(extension_id, &row.scope, &row.collection, &row.key);
                    binds.push(row.value.to_string().into());
                    self.push(&INSERT_EXTENSION_ROW, binds);
                }
            }
            Op::PutExtensionStatus(status) => self.push(
                &PUT_EXTENSION_STATUS,
                vec![
                    status.extension_id.as_str().into(),
                    status.revision.as_str().into(),
                    i64::from(status.schema_version).into(),
                    status.stopped_reason.clone().into(),
                ],
            ),
            Op::PutExtensionRequest {
                extension_id,
                scope,
                request_id,
                payload,
                response,
            } => self.push(
                &PUT_EXTENSION_REQUEST,
                vec![
                    extension_id.as_str().into(),
                    scope.scope_id().into(),
                    request_id.as_str().into(),
                    payload.as_str().into(),
                    response.to_string().into(),
                ],
            ),
            _ => {} // routed by `op`
        }
        Ok(())
    }

    /// Timers and their claims.
    fn timer_op(&mut self, op: &Op) {
        match op {
            Op::PutTimer(timer) => self.push(
                &PUT_TIMER,
                vec![
                    timer.id.as_str().into(),
                    timer.extension_id.as_str().into(),
                    timer.session_id.as_ref().map(SessionId::as_str).into(),
                    int(timer.due_at).into(),
                    timer.cadence.clone().into(),
                    timer.payload.to_string().into(),
                    timer.kind.word().into(),
                ],
            ),
            Op::DeleteTimer { extension_id, id } => self.push(
                &DELETE_TIMER,
                vec![id.as_str().into(), extension_id.as_str().into()],
            ),
            Op::ClaimTimer { id, due_at, next } => {
                // A claim changes its row only while the timer is still due when the
                // firing saw it. PostgreSQL serialises conditional updates of one row: a
                // second claimer waits for the first, finds the due time moved, and fails.
                let mut binds = vec![id.as_str().into(), int(*due_at).into()];
                let statement = match next {
                    Some(next) => {
                        binds.push(int(*next).into());
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
            _ => {} // routed by `op`
        }
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

fn command_key(session_id: &SessionId, command_id: &CommandId) -> Vec<Bind> {
    vec![session_id.as_str().into(), command_id.as_str().into()]
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
