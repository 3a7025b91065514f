//! Serde glue for the two strict field forms of the seed's grammar that serde's
//! `Option` does not keep apart on its own.
//!
//! Derived `Deserialize` reads a missing `Option` field as `None` and `null` as
//! `None`, so `x: T | null` (the key required) and `x?: T` (the key optional, never
//! `null`) would both accept what the grammar refuses. A field that names one of
//! these functions with `deserialize_with` is no longer defaulted when absent (the
//! first) or refuses `null` (the second, paired with `default` for absence).

use serde::de::{Deserialize, Deserializer, Error};

use crate::bounded::Cursor;

/// `x: T | null`: the key must be present; `null` is `None`. Without `default`, serde
/// reports an absent key as ``missing field `x` ``.
pub fn required_nullable<'de, T: Deserialize<'de>, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<T>, D::Error> {
    Option::<T>::deserialize(deserializer)
}

/// `next?: string` of a `SessionSummaryPage`: a present key holds a cursor; `null` is
/// refused. Paired with `default`, so an absent key (the last page) is `None`.
pub fn next_cursor<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Cursor>, D::Error> {
    match Option::<Cursor>::deserialize(deserializer)? {
        Some(cursor) => Ok(Some(cursor)),
        None => Err(D::Error::custom(
            "`next` is null; a page's `next` is a cursor, and the last page leaves the key out",
        )),
    }
}
