//! `whistle.catalog/v1`: the human command flows an extension offers.
//!
//! A catalog lists commands a person can type (`/goal ...`): each names the
//! extension command it calls, its arguments, and the steps a client walks
//! through to collect arguments the person did not type. A compatible client
//! renders any catalog without knowing the extension. The format is described in
//! `docs/wire.md`.

use serde::{Deserialize, Serialize};

use crate::bounded::ExtensionId;
use crate::extension::ExtensionRunState;

/// The format tag every catalog carries.
pub const CATALOG_FORMAT: &str = "whistle.catalog/v1";

/// The `format` field: only `whistle.catalog/v1` decodes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum CatalogFormat {
    /// Version 1.
    #[default]
    #[serde(rename = "whistle.catalog/v1")]
    V1,
}

/// One extension's human command flows.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Catalog {
    /// Always `whistle.catalog/v1`.
    pub format: CatalogFormat,
    /// The extension that handles the commands.
    pub extension_id: ExtensionId,
    /// The commands.
    pub commands: Vec<CatalogCommand>,
}

/// Whether a catalog command acts on one Session or on the Agent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CatalogScope {
    /// The Session the person is in.
    Session,
    /// The whole Agent.
    Agent,
}

/// One command a person can type, such as `/goal`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CatalogCommand {
    /// What the person types after `/`.
    pub name: String,
    /// One line for menus.
    pub summary: String,
    /// Session or Agent.
    pub scope: CatalogScope,
    /// The extension command called with the collected arguments as a JSON object.
    pub call: String,
    /// Arguments, in the order they may be typed.
    #[serde(default)]
    pub arguments: Vec<CatalogArgument>,
    /// Questions asked, in order, for arguments still missing.
    #[serde(default)]
    pub steps: Vec<CatalogStep>,
    /// A server-owned conversation that replaces `steps`: the extension command a
    /// client calls (with the arguments collected so far, and no `requestId`) to learn
    /// the next [`FlowStep`]. Used when what to ask depends on state, such as
    /// which question is waiting and what its options are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flow: Option<String>,
}

/// What a flow command answers: the next thing to ask a person, the call to make,
/// or why there is nothing to do.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum FlowStep {
    /// Ask the person for one argument, then call the flow again with it added.
    Ask {
        /// The argument this fills.
        argument: String,
        /// The question to show.
        prompt: String,
        /// What values it takes.
        kind: ArgumentKind,
    },
    /// Everything is collected: show `summary`, and once the person confirms, call
    /// the command's `call` with `input` plus a fresh `requestId`.
    Confirm {
        /// What will happen, in one or two lines.
        summary: String,
        /// The call's input.
        input: serde_json::Value,
    },
    /// Nothing to do now (for example, no question waits); show the message.
    Unavailable {
        /// Why.
        message: String,
    },
}

/// One argument of a command.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CatalogArgument {
    /// The key in the call's input object.
    pub name: String,
    /// What it means.
    pub description: String,
    /// What values it takes.
    pub kind: ArgumentKind,
    /// The call fails without it.
    pub required: bool,
}

impl CatalogArgument {
    /// An argument the call fails without.
    pub fn required(
        name: impl Into<String>,
        description: impl Into<String>,
        kind: ArgumentKind,
    ) -> Self {
        Self {
            name: name.into(),
            description: description.into(),
            kind,
            required: true,
        }
    }

    /// An argument the call may go without.
    pub fn optional(
        name: impl Into<String>,
        description: impl Into<String>,
        kind: ArgumentKind,
    ) -> Self {
        Self {
            required: false,
            ..Self::required(name, description, kind)
        }
    }
}

/// The values an argument takes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ArgumentKind {
    /// Free text, at most `maxBytes` of UTF-8.
    #[serde(rename_all = "camelCase")]
    Text {
        /// Largest accepted text.
        max_bytes: u32,
    },
    /// A whole number.
    Integer,
    /// Yes or no.
    Boolean,
    /// One (or several, comma-separated) of fixed choices.
    #[serde(rename_all = "camelCase")]
    Choice {
        /// The choices.
        choices: Vec<CatalogChoice>,
        /// Several may be chosen.
        multiple: bool,
        /// Free text is accepted instead of a choice.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        free_text: bool,
    },
}

impl ArgumentKind {
    /// Free text of at most `max_bytes`, from a contract's `usize` bound (a bound past
    /// `u32::MAX` saturates there).
    ///
    /// ```
    /// use shiitake_protocol::catalog::{ArgumentKind, CatalogArgument};
    ///
    /// let prompt = CatalogArgument::optional("prompt", "The prompt", ArgumentKind::text(4096));
    /// assert_eq!(
    ///     serde_json::to_value(&prompt)?,
    ///     serde_json::json!({"name": "prompt", "description": "The prompt",
    ///                        "kind": {"type": "text", "maxBytes": 4096}, "required": false})
    /// );
    /// # Ok::<(), serde_json::Error>(())
    /// ```
    pub fn text(max_bytes: usize) -> Self {
        Self::Text {
            max_bytes: u32::try_from(max_bytes).unwrap_or(u32::MAX),
        }
    }

    /// Exactly one of `values`, each shown as itself, and no free text: the shape of an
    /// `action` argument such as `start, pause, resume or stop`.
    ///
    /// ```
    /// use shiitake_protocol::catalog::ArgumentKind;
    ///
    /// assert_eq!(
    ///     serde_json::to_value(ArgumentKind::one_of(["open", "clear"]))?,
    ///     serde_json::json!({"type": "choice", "multiple": false, "choices": [
    ///         {"label": "open", "value": "open"}, {"label": "clear", "value": "clear"}]})
    /// );
    /// # Ok::<(), serde_json::Error>(())
    /// ```
    pub fn one_of<'v>(values: impl IntoIterator<Item = &'v str>) -> Self {
        Self::Choice {
            choices: values
                .into_iter()
                .map(|value| CatalogChoice {
                    label: value.into(),
                    value: value.into(),
                })
                .collect(),
            multiple: false,
            free_text: false,
        }
    }
}

/// One fixed choice.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CatalogChoice {
    /// What the person sees and may type.
    pub label: String,
    /// What the call receives.
    pub value: String,
}

/// One question a client asks to fill an argument.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CatalogStep {
    /// The argument it fills.
    pub argument: String,
    /// The question.
    pub prompt: String,
}

/// The catalogs available in one Session, with the state of each extension.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionCatalogs {
    /// One entry per extension that publishes a catalog.
    pub catalogs: Vec<CatalogEntry>,
}

/// One extension's catalog and whether it can take commands now.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CatalogEntry {
    /// The catalog.
    pub catalog: Catalog,
    /// Running or stopped.
    pub state: ExtensionRunState,
}
