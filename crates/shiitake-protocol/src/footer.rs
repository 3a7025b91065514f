//! Footer rows: what extensions show under a Session's conversation, one line each,
//! in a shape every client renders without knowing which extension wrote it.
//!
//! Snapshots and update frames carry the rows of every running extension in
//! `footer`, in the Agent's extension order (absent when there are none). A terminal
//! prints a row as one line (`! ` first when it wants attention, then `text`,
//! ` since HH:MM` when `since` is set, ` — note` when `note` is set); a page shows
//! the same plus `progress`, `detail` and buttons for `actions`. An extension adds a
//! row by describing it, and no client changes.
//!
//! ```
//! use shiitake_protocol::footer::{FooterRowV0, FooterTone};
//! use shiitake_protocol::ExtensionId;
//!
//! let row = FooterRowV0::new(ExtensionId::new("example-counter")?, "count", "counter", "3 counted")
//!     .with_note("/count reset");
//! assert_eq!(row.tone, FooterTone::Calm);
//! assert_eq!(
//!     serde_json::to_value(&row)?,
//!     serde_json::json!({"extensionId": "example-counter", "key": "count", "kind": "counter",
//!                        "text": "3 counted", "note": "/count reset"})
//! );
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::bounded::ExtensionId;

/// Most rows one extension shows in one Session; the host drops the rest.
pub const MAX_FOOTER_ROWS: usize = 32;
/// Longest `text`, `note` or `detail` line, in characters; the host cuts longer ones.
pub const MAX_FOOTER_TEXT_CHARS: usize = 400;
/// Most `detail` lines of one row.
pub const MAX_FOOTER_DETAIL: usize = 64;
/// Most actions of one row.
pub const MAX_FOOTER_ACTIONS: usize = 4;

/// Every footer row of a Session, in the Agent's extension order.
pub type SessionFooter = Vec<FooterRowV0>;

/// How much a row asks for the person's eye.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FooterTone {
    /// Information.
    #[default]
    Calm,
    /// Something waits on the person (a terminal marks it `! `, a page in amber).
    Attention,
}

impl FooterTone {
    fn is_calm(&self) -> bool {
        *self == FooterTone::Calm
    }
}

/// Progress a page draws as a bar (`done` of `total`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FooterProgress {
    /// How many are done.
    pub done: u64,
    /// How many in all.
    pub total: u64,
}

/// A Session somewhere, possibly in another Agent of the same server.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionTarget {
    /// The Agent's name in the server's directory.
    pub agent: String,
    /// The Session.
    pub session_id: String,
}

/// What pressing an action does.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum FooterActionKind {
    /// Calls `command` of the row's extension on this Session with `input` and a fresh
    /// `requestId`.
    Command {
        /// The command's wire name.
        command: String,
        /// Its input.
        #[serde(default)]
        input: Value,
    },
    /// Walks catalog flow `flow` of extension `extensionId` (on `target`, or this
    /// Session) from `preset` until it confirms, then calls `call` with what it collected.
    #[serde(rename_all = "camelCase")]
    Flow {
        /// The extension whose flow runs.
        extension_id: ExtensionId,
        /// Its flow command.
        flow: String,
        /// The command called with the confirmed input.
        call: String,
        /// Arguments known before the flow asks anything.
        #[serde(default)]
        preset: Value,
        /// Another Session to run it on.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        target: Option<SessionTarget>,
    },
    /// Opens another Session.
    Open {
        /// Where.
        target: SessionTarget,
    },
}

/// One button or link of a row.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FooterActionV0 {
    /// What the button says.
    pub label: String,
    /// A short CSS-safe name a page tags the button with (`answer`, `clear`).
    pub name: String,
    /// Shown first and stronger than the others.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub primary: bool,
    /// What it does.
    #[serde(flatten)]
    pub kind: FooterActionKind,
}

impl FooterActionV0 {
    /// A button that calls `command` of the row's extension with `input`.
    pub fn command(name: &str, label: &str, command: &str, input: Value) -> Self {
        Self {
            label: label.to_owned(),
            name: name.to_owned(),
            primary: false,
            kind: FooterActionKind::Command {
                command: command.to_owned(),
                input,
            },
        }
    }

    /// The same action shown as the row's main one.
    #[must_use]
    pub fn primary(mut self) -> Self {
        self.primary = true;
        self
    }
}

/// One line of the footer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FooterRowV0 {
    /// The extension that shows it.
    pub extension_id: ExtensionId,
    /// Names the row among its extension's rows while it shows (`plan`, an ask id).
    pub key: String,
    /// A CSS-safe family a page styles rows by (`plan`, `question`, `subagent`).
    pub kind: String,
    /// The line itself.
    pub text: String,
    /// Calm, or waiting on the person.
    #[serde(default, skip_serializing_if = "FooterTone::is_calm")]
    pub tone: FooterTone,
    /// A moment (Unix milliseconds) a client shows as ` since HH:MM` in the person's zone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<u64>,
    /// What to do about it or what it waits on, after a dash (`/answer`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// A bar a page draws.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<FooterProgress>,
    /// Lines a page lists under the row (a checklist's steps).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub detail: Vec<String>,
    /// Buttons and links.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub actions: Vec<FooterActionV0>,
}

impl FooterRowV0 {
    /// A calm row with only its text.
    pub fn new(extension_id: ExtensionId, key: &str, kind: &str, text: impl Into<String>) -> Self {
        Self {
            extension_id,
            key: key.to_owned(),
            kind: kind.to_owned(),
            text: text.into(),
            tone: FooterTone::Calm,
            since: None,
            note: None,
            progress: None,
            detail: Vec::new(),
            actions: Vec::new(),
        }
    }

    /// The row with a tone.
    #[must_use]
    pub fn with_tone(mut self, tone: FooterTone) -> Self {
        self.tone = tone;
        self
    }

    /// The row with a note after the dash.
    #[must_use]
    pub fn with_note(mut self, note: impl Into<String>) -> Self {
        self.note = Some(note.into());
        self
    }

    /// The row with a moment shown in the person's zone.
    #[must_use]
    pub fn with_since(mut self, since: u64) -> Self {
        self.since = Some(since);
        self
    }

    /// The row with a progress bar.
    #[must_use]
    pub fn with_progress(mut self, done: u64, total: u64) -> Self {
        self.progress = Some(FooterProgress { done, total });
        self
    }

    /// The row with detail lines.
    #[must_use]
    pub fn with_detail(mut self, detail: Vec<String>) -> Self {
        self.detail = detail;
        self
    }

    /// The row with one more action.
    #[must_use]
    pub fn with_action(mut self, action: FooterActionV0) -> Self {
        self.actions.push(action);
        self
    }

    /// The row held to the bounds above: long lines cut with `…`, extra detail lines
    /// and actions dropped.
    #[must_use]
    pub fn bounded(mut self) -> Self {
        cut(&mut self.text);
        if let Some(note) = &mut self.note {
            cut(note);
        }
        self.detail.truncate(MAX_FOOTER_DETAIL);
        self.detail.iter_mut().for_each(cut);
        self.actions.truncate(MAX_FOOTER_ACTIONS);
        self
    }
}

/// Cuts a line longer than [`MAX_FOOTER_TEXT_CHARS`] to that many characters, the
/// last one `…`; a line at the bound is kept whole.
fn cut(text: &mut String) {
    let mut ends = text.char_indices().map(|(at, _)| at);
    let Some(last_kept) = ends.nth(MAX_FOOTER_TEXT_CHARS - 1) else {
        return;
    };
    if ends.next().is_some() {
        text.truncate(last_kept);
        text.push('…');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(text: &str) -> FooterRowV0 {
        FooterRowV0::new(ExtensionId::new("x").unwrap(), "k", "kind", text)
    }

    #[test]
    fn text_is_cut_one_past_the_bound_and_kept_at_it() {
        let at = "é".repeat(MAX_FOOTER_TEXT_CHARS);
        assert_eq!(row(&at).bounded().text, at);
        let over = "é".repeat(MAX_FOOTER_TEXT_CHARS + 1);
        let cut = row(&over).bounded().text;
        assert_eq!(cut.chars().count(), MAX_FOOTER_TEXT_CHARS);
        assert!(cut.ends_with('…'));
    }

    #[test]
    fn detail_and_actions_are_capped() {
        let action = FooterActionV0::command("a", "A", "go", Value::Null);
        let mut many = row("t").with_detail(vec!["d".into(); MAX_FOOTER_DETAIL + 1]);
        many.actions = vec![action; MAX_FOOTER_ACTIONS + 1];
        let bounded = many.bounded();
        assert_eq!(bounded.detail.len(), MAX_FOOTER_DETAIL);
        assert_eq!(bounded.actions.len(), MAX_FOOTER_ACTIONS);
    }

    #[test]
    fn an_action_round_trips_with_its_kind_flattened() {
        let action = FooterActionV0 {
            label: "Answer".into(),
            name: "answer".into(),
            primary: true,
            kind: FooterActionKind::Flow {
                extension_id: ExtensionId::new("q").unwrap(),
                flow: "answer_flow".into(),
                call: "answer".into(),
                preset: serde_json::json!({"askId": "ask_1"}),
                target: Some(SessionTarget {
                    agent: "main".into(),
                    session_id: "s1".into(),
                }),
            },
        };
        let json = serde_json::to_value(&action).unwrap();
        assert_eq!(json["kind"], "flow");
        assert_eq!(json["extensionId"], "q");
        assert_eq!(json["target"]["sessionId"], "s1");
        let back: FooterActionV0 = serde_json::from_value(json).unwrap();
        assert_eq!(back, action);
    }
}
