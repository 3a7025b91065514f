//! The owner transaction an extension hook works in: namespaced state and effects.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use shiitake_protocol::{CommandId, ExtensionId, PromptDelivery, PromptText, RequestId, SessionId};

use super::cadence::next_after as next_cron;
use super::{Grant, Grants, HookError, StateScope};

/// The rows of one extension in one scope: (collection, key) → value.
pub(crate) type Rows = BTreeMap<(String, String), Value>;

/// Who admitted a prompt: an extension and the correlation it chose.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Origin {
    /// The extension that admitted it.
    pub extension_id: ExtensionId,
    /// The extension's own tag, such as a goal revision; hooks and runs see it.
    pub correlation: String,
}

/// The Agent that sent a prompt on another Agent's behalf, recorded when the host
/// admits it with [`crate::LocalSession::send_from`].
///
/// Runs and hooks see it, so an extension can treat work another Agent sent
/// differently from a person's (a question can wait on the sender first). It grants
/// nothing: it is a record of who asked, set only by the in-process host.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Sender {
    /// The sending Agent's name, as people see it (`waiting on <agent>`).
    pub agent: String,
    /// The sending Agent's Session that sent the work.
    pub session_id: SessionId,
}

/// Where an accepted prompt came from besides the command door's caller: the
/// extension that admitted it and/or the Agent that sent it. Stored with the command.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Provenance {
    #[serde(flatten, default)]
    pub(crate) origin: Option<Origin>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) sender: Option<Sender>,
}

impl Provenance {
    /// Nothing beyond the caller: nothing is stored.
    pub(crate) fn is_empty(&self) -> bool {
        self.origin.is_none() && self.sender.is_none()
    }

    /// The stored form, `None` when empty (so plain prompts store no origin).
    pub(crate) fn to_stored(&self) -> Option<Value> {
        if self.is_empty() {
            None
        } else {
            serde_json::to_value(self).ok()
        }
    }

    /// Reads the stored form; an unreadable one counts as none.
    pub(crate) fn from_stored(stored: Option<&Value>) -> Self {
        stored
            .and_then(|value| serde_json::from_value(value.clone()).ok())
            .unwrap_or_default()
    }
}

/// A timer's id: a ULID.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct TimerId(pub(crate) String);

impl TimerId {
    /// Rebuilds an id an extension stored (from [`TimerId::as_str`]), to clear its timer.
    /// Clearing only ever touches the extension's own timers, so a wrong id clears nothing.
    pub fn new(id: impl Into<String>) -> Self {
        Self(id.into())
    }

    /// The id text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// When a timer fires.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Due {
    /// At these Unix milliseconds.
    At(u64),
    /// This long from now.
    After(Duration),
    /// On a Unix cron cadence, evaluated in UTC: 5 fields (minute first) or 6–7 fields
    /// (seconds first, then an optional year); repeats until cleared. See [`cadence`](super::cadence).
    Cron(String),
}

/// A change a hook asked for besides its rows; committed with them.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Effect {
    Admit {
        command_id: CommandId,
        text: PromptText,
        delivery: PromptDelivery,
        correlation: String,
    },
    SetTimer {
        id: TimerId,
        due_at: u64,
        cadence: Option<String>,
        payload: Value,
    },
    ClearTimer(TimerId),
    /// A [`Delivery`](super::Delivery), encoded.
    AdmitInto(Value),
    AppendLine {
        text: PromptText,
    },
    RaiseAttention {
        kind: String,
        inbox: bool,
        text: String,
    },
    ClearAttention {
        kind: String,
    },
}

/// Read-only committed state of one extension (projections, run contributions).
#[derive(Clone, Copy, Debug)]
pub struct StateView<'a> {
    pub(crate) session_id: Option<&'a SessionId>,
    pub(crate) session: Option<&'a Rows>,
    pub(crate) agent: Option<&'a Rows>,
}

fn decode<T: DeserializeOwned>(value: &Value, collection: &str, key: &str) -> Result<T, HookError> {
    serde_json::from_value(value.clone()).map_err(|error| {
        HookError::Failed(format!(
            "stored {collection}/{key} does not decode: {error}"
        ))
    })
}

impl StateView<'_> {
    /// The Session this view is of, so a projection of Agent-scope state can show
    /// what concerns this Session.
    pub fn session_id(&self) -> Option<&SessionId> {
        self.session_id
    }

    fn rows(&self, scope: StateScope) -> Option<&Rows> {
        match scope {
            StateScope::Session => self.session,
            StateScope::Agent => self.agent,
        }
    }

    /// One value, if present and decodable.
    pub fn get<T: DeserializeOwned>(
        &self,
        scope: StateScope,
        collection: &str,
        key: &str,
    ) -> Option<T> {
        let value = self
            .rows(scope)?
            .get(&(collection.to_owned(), key.to_owned()))?;
        decode(value, collection, key).ok()
    }

    /// Every decodable value of a collection, by key.
    pub fn scan<T: DeserializeOwned>(
        &self,
        scope: StateScope,
        collection: &str,
    ) -> Vec<(String, T)> {
        let Some(rows) = self.rows(scope) else {
            return Vec::new();
        };
        rows.iter()
            .filter(|((c, _), _)| c == collection)
            .filter_map(|((c, k), v)| decode(v, c, k).ok().map(|t| (k.clone(), t)))
            .collect()
    }
}

/// One owner transaction of one extension.
pub struct Tx<'a> {
    pub(crate) extension_id: &'a ExtensionId,
    pub(crate) grants: &'a Grants,
    pub(crate) scopes: &'a [StateScope],
    pub(crate) session_id: Option<&'a SessionId>,
    pub(crate) session_rows: &'a Rows,
    pub(crate) agent_rows: &'a Rows,
    /// `false` in a settled hook whose extension said it leaves Agent state alone.
    pub(crate) agent_state: bool,
    pub(crate) writes: BTreeMap<(StateScope, String, String), Option<Value>>,
    pub(crate) effects: Vec<Effect>,
    pub(crate) now: u64,
    /// `Some` in an Agent-scope command: the Sessions its commit needs.
    pub(crate) required_sessions: Option<Vec<SessionId>>,
}

impl<'a> Tx<'a> {
    fn require(&self, grant: Grant) -> Result<(), HookError> {
        if self.grants.has(grant) {
            Ok(())
        } else {
            Err(HookError::NotGranted(grant))
        }
    }

    fn committed(&self, scope: StateScope) -> Result<&'a Rows, HookError> {
        self.require(Grant::State)?;
        if !self.scopes.contains(&scope) {
            return Err(HookError::Failed(format!(
                "{} state is not declared by {}",
                scope.as_str(),
                self.extension_id
            )));
        }
        match scope {
            StateScope::Session if self.session_id.is_none() => Err(HookError::Invalid(
                "Session state is not available outside a Session".into(),
            )),
            StateScope::Session => Ok(self.session_rows),
            StateScope::Agent if !self.agent_state => Err(HookError::Failed(format!(
                "{} said its settled hook does not use Agent state \
                 (settled_uses_agent_state), and it asked for it",
                self.extension_id
            ))),
            StateScope::Agent => Ok(self.agent_rows),
        }
    }

    /// The Session this transaction belongs to; `None` for Agent-scope hooks.
    pub fn session_id(&self) -> Option<&SessionId> {
        self.session_id
    }

    /// Unix milliseconds when the transaction began.
    pub fn now(&self) -> u64 {
        self.now
    }

    /// Makes this command stand only if the Session `session_id` exists: an Agent-scope
    /// command that targets a Session (a schedule, a subscription) refuses a typo or a
    /// deleted Session at once, instead of failing later when it acts.
    ///
    /// A hook does no I/O, so the host checks after the hook returns and before it
    /// commits: a missing Session answers the caller `not_found` and commits nothing.
    /// Only an Agent-scope command may ask; any other hook gets `Invalid`. A Session
    /// deleted after the commit is the extension's to handle, as before.
    pub fn require_session(&mut self, session_id: &SessionId) -> Result<(), HookError> {
        match &mut self.required_sessions {
            Some(required) => {
                if !required.contains(session_id) {
                    required.push(session_id.clone());
                }
                Ok(())
            }
            None => Err(HookError::Invalid(
                "only an Agent-scope command can require a Session".into(),
            )),
        }
    }

    /// Reads one value (this transaction's own writes first).
    pub fn get<T: DeserializeOwned>(
        &self,
        scope: StateScope,
        collection: &str,
        key: &str,
    ) -> Result<Option<T>, HookError> {
        let committed = self.committed(scope)?;
        let written = self
            .writes
            .get(&(scope, collection.to_owned(), key.to_owned()));
        let value = match written {
            Some(write) => write.as_ref(),
            None => committed.get(&(collection.to_owned(), key.to_owned())),
        };
        value
            .map(|value| decode(value, collection, key))
            .transpose()
    }

    /// Every value of a collection, by key, with this transaction's writes applied.
    pub fn scan<T: DeserializeOwned>(
        &self,
        scope: StateScope,
        collection: &str,
    ) -> Result<Vec<(String, T)>, HookError> {
        let committed = self.committed(scope)?;
        let mut merged: BTreeMap<String, Option<&Value>> = committed
            .iter()
            .filter(|((c, _), _)| c == collection)
            .map(|((_, k), v)| (k.clone(), Some(v)))
            .collect();
        for ((s, c, k), write) in &self.writes {
            if *s == scope && c == collection {
                merged.insert(k.clone(), write.as_ref());
            }
        }
        merged
            .into_iter()
            .filter_map(|(key, value)| value.map(|value| (key, value)))
            .map(|(key, value)| decode(value, collection, &key).map(|t| (key, t)))
            .collect()
    }

    /// Writes one value.
    pub fn put<T: Serialize>(
        &mut self,
        scope: StateScope,
        collection: &str,
        key: &str,
        value: &T,
    ) -> Result<(), HookError> {
        self.committed(scope)?;
        let value = serde_json::to_value(value).map_err(|error| {
            HookError::Failed(format!("{collection}/{key} does not encode: {error}"))
        })?;
        self.writes
            .insert((scope, collection.to_owned(), key.to_owned()), Some(value));
        Ok(())
    }

    /// Deletes one value.
    pub fn delete(
        &mut self,
        scope: StateScope,
        collection: &str,
        key: &str,
    ) -> Result<(), HookError> {
        self.committed(scope)?;
        self.writes
            .insert((scope, collection.to_owned(), key.to_owned()), None);
        Ok(())
    }

    /// Admits a prompt into this Session through the accepted-command door, tagged with this
    /// extension and `correlation`; it is queued work once the transaction commits.
    ///
    /// Answers the command id the prompt will have, so the extension can record which
    /// work is its own (its messages carry that id) before the run starts.
    pub fn admit(
        &mut self,
        text: &str,
        delivery: PromptDelivery,
        correlation: impl Into<String>,
    ) -> Result<CommandId, HookError> {
        self.require(Grant::Admissions)?;
        if self.session_id.is_none() {
            return Err(HookError::Invalid(
                "a prompt can only be admitted into a Session".into(),
            ));
        }
        let text = PromptText::new(text).map_err(|error| HookError::Invalid(error.to_string()))?;
        let command_id = crate::ids::command_id();
        self.effects.push(Effect::Admit {
            command_id: command_id.clone(),
            text,
            delivery,
            correlation: correlation.into(),
        });
        Ok(command_id)
    }

    /// Admits a prompt into the named Session through its accepted-command door,
    /// from any hook (Agent-scope ones included), tagged with this extension and
    /// `correlation`.
    ///
    /// The prompt is delivered right after this transaction commits (also after a
    /// restart, if the process stops in between), and the door's answer comes to
    /// [`Extension::on_admission`](super::Extension::on_admission). `request_id`
    /// names the occurrence: admitting it again, from any process, queues nothing
    /// new (the door answers the original `Accepted`), so choose one per occurrence,
    /// such as `<schedule>:<due time>`.
    pub fn admit_into(
        &mut self,
        session_id: &SessionId,
        request_id: RequestId,
        text: &str,
        delivery: PromptDelivery,
        correlation: impl Into<String>,
    ) -> Result<(), HookError> {
        self.require(Grant::Admissions)?;
        let text = PromptText::new(text).map_err(|error| HookError::Invalid(error.to_string()))?;
        let delivery = super::Delivery {
            session_id: session_id.clone(),
            request_id,
            text,
            delivery,
            correlation: correlation.into(),
        };
        let payload = serde_json::to_value(&delivery)
            .map_err(|error| HookError::Failed(format!("admission does not encode: {error}")))?;
        self.effects.push(Effect::AdmitInto(payload));
        Ok(())
    }

    /// Adds one chat line to this Session's transcript without a run: a user message
    /// marked `"author": "extension"` with this extension's `extensionId`, so clients
    /// can show it as the extension's note (a goal that was achieved).
    ///
    /// It goes through the accepted-command door like an operator line: committed
    /// with this transaction, appended now when no work runs, else at the running
    /// work's next model-call boundary or when it ends, also after a restart.
    pub fn append_line(&mut self, text: &str) -> Result<(), HookError> {
        self.require(Grant::Admissions)?;
        if self.session_id.is_none() {
            return Err(HookError::Invalid(
                "a line can only be added to a Session".into(),
            ));
        }
        let text = PromptText::new(text).map_err(|error| HookError::Invalid(error.to_string()))?;
        self.effects.push(Effect::AppendLine { text });
        Ok(())
    }

    /// Sets a durable timer; its hook runs in the transaction that claims it.
    pub fn set_timer(&mut self, due: Due, payload: Value) -> Result<TimerId, HookError> {
        self.require(Grant::Timers)?;
        let (due_at, cadence) = match due {
            Due::At(at) => (at, None),
            Due::After(wait) => (
                self.now
                    .saturating_add(u64::try_from(wait.as_millis()).unwrap_or(u64::MAX)),
                None,
            ),
            Due::Cron(expression) => (next_cron(&expression, self.now)?, Some(expression)),
        };
        let id = TimerId(ulid::Ulid::generate().to_string());
        self.effects.push(Effect::SetTimer {
            id: id.clone(),
            due_at,
            cadence,
            payload,
        });
        Ok(id)
    }

    /// Clears a timer this extension set.
    pub fn clear_timer(&mut self, id: &TimerId) -> Result<(), HookError> {
        self.require(Grant::Timers)?;
        self.effects.push(Effect::ClearTimer(id.clone()));
        Ok(())
    }

    /// Raises attention on this Session; `inbox` attention makes its inbox state `needs_you`.
    pub fn raise_attention(
        &mut self,
        kind: &str,
        inbox: bool,
        text: &str,
    ) -> Result<(), HookError> {
        self.require(Grant::Attention)?;
        if self.session_id.is_none() {
            return Err(HookError::Invalid("attention belongs to a Session".into()));
        }
        self.effects.push(Effect::RaiseAttention {
            kind: kind.to_owned(),
            inbox,
            text: text.to_owned(),
        });
        Ok(())
    }

    /// Clears attention of this kind raised by this extension.
    pub fn clear_attention(&mut self, kind: &str) -> Result<(), HookError> {
        self.require(Grant::Attention)?;
        if self.session_id.is_none() {
            return Err(HookError::Invalid("attention belongs to a Session".into()));
        }
        self.effects.push(Effect::ClearAttention {
            kind: kind.to_owned(),
        });
        Ok(())
    }
}
