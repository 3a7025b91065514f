//! A finite JSON number that encodes the way JavaScript's `JSON.stringify` does.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Largest integer that an `f64` holds exactly (2^53).
const EXACT_INTEGER_LIMIT: f64 = 9_007_199_254_740_992.0;

/// A finite `f64` that writes whole values without a fraction (`0`, not `0.0`).
///
/// Messages written by the TypeScript implementation carry dollar amounts such as
/// `0` and `0.0015`; this type re-encodes them byte for byte.
#[derive(Clone, Copy, Debug, Default, PartialEq, PartialOrd)]
pub struct JsNumber(f64);

impl JsNumber {
    /// Zero.
    pub const ZERO: JsNumber = JsNumber(0.0);

    /// The number, or `None` for NaN and infinities, which JSON cannot carry.
    pub fn new(value: f64) -> Option<Self> {
        value.is_finite().then_some(Self(value))
    }

    /// The value.
    pub fn get(self) -> f64 {
        self.0
    }
}

impl From<u32> for JsNumber {
    fn from(value: u32) -> Self {
        Self(f64::from(value))
    }
}

impl Serialize for JsNumber {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let value = self.0;
        if value.fract() == 0.0 && value.abs() <= EXACT_INTEGER_LIMIT {
            // Exact: the value is a whole number within the i64-safe range.
            #[allow(clippy::cast_possible_truncation)]
            serializer.serialize_i64(value as i64)
        } else {
            serializer.serialize_f64(value)
        }
    }
}

impl<'de> Deserialize<'de> for JsNumber {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = f64::deserialize(deserializer)?;
        JsNumber::new(value).ok_or_else(|| serde::de::Error::custom("number is not finite"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_numbers_have_no_fraction() {
        let encoded = serde_json::to_string(&[JsNumber::ZERO, JsNumber::from(3)]).unwrap();
        assert_eq!(encoded, "[0,3]");
    }

    #[test]
    fn fractions_round_trip_exactly() {
        let value: JsNumber = serde_json::from_str("0.0015").unwrap();
        assert_eq!(serde_json::to_string(&value).unwrap(), "0.0015");
    }

    #[test]
    fn non_finite_is_refused() {
        assert_eq!(JsNumber::new(f64::NAN), None);
        assert_eq!(JsNumber::new(f64::INFINITY), None);
    }
}
