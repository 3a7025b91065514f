//! Validated identifiers and text: out-of-bound values are refused while decoding.
//!
//! Every identifier on the wire is a [`BoundedId`]: 1 to [`BoundedId::MAX_BYTES`]
//! bytes of visible ASCII (`!` to `~`, no spaces or control characters). The
//! typed wrappers ([`SessionId`], [`CommandId`] ...) keep one kind of id from
//! being passed where another goes. Prompt and operator text is a
//! [`PromptText`]: not blank, at most [`PromptText::MAX_BYTES`] bytes of UTF-8.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize};

/// Why a bounded value was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BoundError {
    /// The value was empty (or, for text, only whitespace).
    #[error("{what} must not be empty")]
    Empty {
        /// The kind of value.
        what: &'static str,
    },
    /// The value was longer than its bound.
    #[error("{what} is {len} bytes, more than the {max}-byte limit")]
    TooLong {
        /// The kind of value.
        what: &'static str,
        /// Its length in bytes.
        len: usize,
        /// The bound.
        max: usize,
    },
    /// The value held a character outside its grammar.
    #[error("{what} holds {found:?} at byte {at}; only visible ASCII is allowed")]
    BadCharacter {
        /// The kind of value.
        what: &'static str,
        /// The offending character.
        found: char,
        /// Its byte offset.
        at: usize,
    },
    /// A number was outside its range.
    #[error("{what} is {value}, outside {min}..={max}")]
    OutOfRange {
        /// The kind of value.
        what: &'static str,
        /// The value given.
        value: u64,
        /// Smallest accepted value.
        min: u64,
        /// Largest accepted value.
        max: u64,
    },
}

/// An opaque identifier: 1..=128 bytes of visible ASCII.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct BoundedId(String);

impl BoundedId {
    /// Longest accepted identifier, in bytes.
    pub const MAX_BYTES: usize = 128;

    /// Validates `value` as an identifier.
    pub fn new(value: impl Into<String>) -> Result<Self, BoundError> {
        let value = value.into();
        check_visible_ascii("identifier", &value, Self::MAX_BYTES)?;
        Ok(Self(value))
    }

    /// The identifier text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

fn check_visible_ascii(what: &'static str, value: &str, max: usize) -> Result<(), BoundError> {
    if value.is_empty() {
        return Err(BoundError::Empty { what });
    }
    if value.len() > max {
        return Err(BoundError::TooLong {
            what,
            len: value.len(),
            max,
        });
    }
    match value.char_indices().find(|(_, c)| !matches!(c, '!'..='~')) {
        Some((at, found)) => Err(BoundError::BadCharacter { what, found, at }),
        None => Ok(()),
    }
}

impl<'de> Deserialize<'de> for BoundedId {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = String::deserialize(deserializer)?;
        BoundedId::new(value).map_err(refuse)
    }
}

impl fmt::Debug for BoundedId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl fmt::Display for BoundedId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A bound's refusal as a deserializer error; a length refusal is also recorded for
/// [`codec::decode_bounded`](crate::codec::decode_bounded), which decides `too_large`
/// from that record rather than from the message (which input can imitate).
pub(crate) fn refuse<E: serde::de::Error>(error: BoundError) -> E {
    if matches!(error, BoundError::TooLong { .. }) {
        crate::codec::note_too_long();
    }
    E::custom(error)
}

macro_rules! typed_id {
    ($(#[$doc:meta] $name:ident),+ $(,)?) => {$(
        #[$doc]
        #[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(BoundedId);

        impl $name {
            /// Validates `value` as this kind of identifier.
            pub fn new(value: impl Into<String>) -> Result<Self, BoundError> {
                BoundedId::new(value).map(Self)
            }

            /// The identifier text.
            pub fn as_str(&self) -> &str {
                self.0.as_str()
            }
        }

        impl From<BoundedId> for $name {
            fn from(id: BoundedId) -> Self {
                Self(id)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}({:?})", stringify!($name), self.0.as_str())
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.0.as_str())
            }
        }

        impl std::str::FromStr for $name {
            type Err = BoundError;

            fn from_str(value: &str) -> Result<Self, Self::Err> {
                Self::new(value)
            }
        }
    )+};
}

typed_id! {
    /// Names one Session of an Agent.
    SessionId,
    /// Names one accepted command of a Session.
    CommandId,
    /// The caller's idempotency key: an exact retry with the same key returns the first answer.
    RequestId,
    /// Names one lineage entry (a transcript message) of a Session.
    EntryId,
    /// Names one extension, such as `botanical-session-question`.
    ExtensionId,
    /// Names one durable event that is not a message (a compaction marker, a sandbox failure).
    EventId,
}

/// An opaque position in a Session's order: 1..=256 bytes of visible ASCII.
///
/// Clients hand a cursor back unchanged; only the Agent that minted it knows its form.
#[derive(Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(transparent)]
pub struct Cursor(String);

impl Cursor {
    /// Longest accepted cursor, in bytes.
    pub const MAX_BYTES: usize = 256;

    /// Validates `value` as a cursor.
    pub fn new(value: impl Into<String>) -> Result<Self, BoundError> {
        let value = value.into();
        check_visible_ascii("cursor", &value, Self::MAX_BYTES)?;
        Ok(Self(value))
    }

    /// The cursor text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl<'de> Deserialize<'de> for Cursor {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = String::deserialize(deserializer)?;
        Cursor::new(value).map_err(refuse)
    }
}

impl fmt::Debug for Cursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Cursor({:?})", self.0)
    }
}

impl fmt::Display for Cursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Text a person or program submits: not blank, at most 128 KiB of UTF-8.
#[derive(Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(transparent)]
pub struct PromptText(String);

impl PromptText {
    /// Largest accepted text, in UTF-8 bytes (128 KiB).
    pub const MAX_BYTES: usize = 128 * 1024;

    /// Validates `value` as prompt text.
    pub fn new(value: impl Into<String>) -> Result<Self, BoundError> {
        let value = value.into();
        if value.trim().is_empty() {
            return Err(BoundError::Empty {
                what: "prompt text",
            });
        }
        if value.len() > Self::MAX_BYTES {
            return Err(BoundError::TooLong {
                what: "prompt text",
                len: value.len(),
                max: Self::MAX_BYTES,
            });
        }
        Ok(Self(value))
    }

    /// The text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The text, owned.
    pub fn into_string(self) -> String {
        self.0
    }
}

impl<'de> Deserialize<'de> for PromptText {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = String::deserialize(deserializer)?;
        PromptText::new(value).map_err(refuse)
    }
}

impl fmt::Debug for PromptText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl fmt::Display for PromptText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// How many entries one snapshot page may hold: 1..=200, 50 when not given.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct PageLimit(u32);

impl PageLimit {
    /// Largest page.
    pub const MAX: u32 = 200;
    /// The page size used when a request names none.
    pub const DEFAULT: PageLimit = PageLimit(50);

    /// Validates `value` as a page size.
    pub fn new(value: u32) -> Result<Self, BoundError> {
        if (1..=Self::MAX).contains(&value) {
            Ok(Self(value))
        } else {
            Err(BoundError::OutOfRange {
                what: "page limit",
                value: u64::from(value),
                min: 1,
                max: u64::from(Self::MAX),
            })
        }
    }

    /// The size.
    pub fn get(self) -> u32 {
        self.0
    }
}

impl Default for PageLimit {
    fn default() -> Self {
        Self::DEFAULT
    }
}

impl<'de> Deserialize<'de> for PageLimit {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = u64::deserialize(deserializer)?;
        let narrowed = u32::try_from(value).unwrap_or(u32::MAX);
        PageLimit::new(narrowed).map_err(|_| {
            serde::de::Error::custom(BoundError::OutOfRange {
                what: "page limit",
                value,
                min: 1,
                max: u64::from(Self::MAX),
            })
        })
    }
}
