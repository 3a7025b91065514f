//! What a failed validation reports: the path, the rule and a sentence.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The schema keyword an instance broke; serialises to the keyword itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Rule {
    /// `type`: the value has another JSON type (an opaque schema requires an object).
    Type,
    /// `const`: the value differs from the constant.
    Const,
    /// `enum`: the value is none of the listed values.
    Enum,
    /// `required`: a required property is absent.
    Required,
    /// `additionalProperties`: a property not listed in `properties` is present.
    AdditionalProperties,
    /// `minItems`: the array is too short.
    MinItems,
    /// `maxItems`: the array is too long.
    MaxItems,
    /// `minLength`: the string has too few characters.
    MinLength,
    /// `maxLength`: the string has too many characters.
    MaxLength,
    /// `minimum`: the number is below the bound.
    Minimum,
    /// `maximum`: the number is above the bound.
    Maximum,
    /// `exclusiveMinimum`: the number is at or below the bound.
    ExclusiveMinimum,
    /// `exclusiveMaximum`: the number is at or above the bound.
    ExclusiveMaximum,
    /// `anyOf`: no branch accepts the value.
    AnyOf,
}

impl Rule {
    /// The JSON Schema keyword, e.g. `maxLength`.
    pub fn keyword(self) -> &'static str {
        match self {
            Rule::Type => "type",
            Rule::Const => "const",
            Rule::Enum => "enum",
            Rule::Required => "required",
            Rule::AdditionalProperties => "additionalProperties",
            Rule::MinItems => "minItems",
            Rule::MaxItems => "maxItems",
            Rule::MinLength => "minLength",
            Rule::MaxLength => "maxLength",
            Rule::Minimum => "minimum",
            Rule::Maximum => "maximum",
            Rule::ExclusiveMinimum => "exclusiveMinimum",
            Rule::ExclusiveMaximum => "exclusiveMaximum",
            Rule::AnyOf => "anyOf",
        }
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.keyword())
    }
}

/// One broken rule at one place in the instance.
///
/// `path` is a JSON Pointer (RFC 6901) into the input: `""` is the whole
/// input, `/items/0/name` a nested value. A missing required property is
/// reported at the path it should have had.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SchemaError {
    /// Where, as a JSON Pointer.
    pub path: String,
    /// Which keyword.
    pub rule: Rule,
    /// A sentence for the model, e.g. `expected at most 12 characters, got 15`.
    pub message: String,
}

impl fmt::Display for SchemaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path = if self.path.is_empty() {
            "(root)"
        } else {
            &self.path
        };
        write!(f, "{path}: {}: {}", self.rule, self.message)
    }
}

/// Every rule an input broke (at least one; at most [`ValidationError::MAX_ERRORS`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ValidationError {
    errors: Vec<SchemaError>,
}

impl ValidationError {
    /// How many errors are collected before validation stops.
    pub const MAX_ERRORS: usize = 32;

    pub(crate) fn new(errors: Vec<SchemaError>) -> Self {
        Self { errors }
    }

    /// The errors, in instance order.
    pub fn errors(&self) -> &[SchemaError] {
        &self.errors
    }

    /// Takes the errors out.
    pub fn into_errors(self) -> Vec<SchemaError> {
        self.errors
    }
}

impl fmt::Display for ValidationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("invalid input: ")?;
        for (i, error) in self.errors.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{error}")?;
        }
        Ok(())
    }
}

/// Why a typed decode ([`crate::schema::Schema::decode_as`]) failed.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    /// The input broke the schema.
    #[error(transparent)]
    Invalid(#[from] ValidationError),
    /// The input met the schema but not the Rust type (the schema and the type disagree).
    #[error("input does not fit the expected type: {0}")]
    Shape(#[from] serde_json::Error),
}
