//! Serde glue for fields that may be absent, `null`, or a value (`x?: T | null`).

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Encodes `Some(None)` as `null`; pair with `skip_serializing_if = "Option::is_none"`.
pub fn serialize<T: Serialize, S: Serializer>(
    value: &Option<Option<T>>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    match value {
        Some(inner) => inner.serialize(serializer),
        None => serializer.serialize_none(),
    }
}

/// Decodes a present field (`null` or a value); pair with `default` for absence.
pub fn deserialize<'de, T: Deserialize<'de>, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Option<T>>, D::Error> {
    Option::<T>::deserialize(deserializer).map(Some)
}
