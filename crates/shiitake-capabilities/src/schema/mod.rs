//! A small, documented JSON Schema subset: decode operation inputs, describe operations.
//!
//! An operation's input schema is compiled once by [`Schema::new`]. If every
//! keyword in it belongs to the subset below, inputs are validated fully and
//! defaults are applied; if any keyword falls outside it, the schema is
//! **opaque**: any JSON object is accepted and the operation (for example a
//! remote MCP server) validates it. Compiling never fails.
//!
//! | keyword | meaning here |
//! | --- | --- |
//! | `type` | one of `null boolean object array number integer string`, or an array of them |
//! | `properties`, `required` | per-property schemas; required names must be present |
//! | `additionalProperties` | `true`/`false` (or `{}` = `true`); a schema here is outside the subset |
//! | `enum`, `const` | JSON equality, numbers compared by value (`1 == 1.0`) |
//! | `items`, `minItems`, `maxItems` | one schema for every item; tuple `items` is outside |
//! | `minLength`, `maxLength` | counted in Unicode scalar values (chars) |
//! | `minimum`, `maximum`, `exclusiveMinimum`, `exclusiveMaximum` | numbers compared as `f64`; boolean `exclusive*` (draft 4) modifies `minimum`/`maximum` |
//! | `anyOf` | branches in the subset, without a nested `anyOf` |
//! | `default` | applied to an absent property of an object on [`Schema::decode`] (not inside `anyOf`) |
//! | `description`, `title`, `examples`, `format`, `$schema`, `$id`, `$comment`, `deprecated`, `readOnly`, `writeOnly` | annotations, not checked |
//!
//! Everything else (`$ref`, `oneOf`, `allOf`, `not`, `pattern`,
//! `patternProperties`, `if`, `prefixItems`, `uniqueItems`, unknown keywords,
//! boolean schemas ...) makes the whole schema opaque.

mod error;
mod validate;

use serde::de::DeserializeOwned;
use serde_json::Value;

pub use error::{DecodeError, Rule, SchemaError, ValidationError};

/// Keywords that only annotate; they never reject an instance.
const ANNOTATIONS: &[&str] = &[
    "description",
    "title",
    "examples",
    "format",
    "$schema",
    "$id",
    "$comment",
    "deprecated",
    "readOnly",
    "writeOnly",
];

/// A compiled input (or output) schema: the JSON as advertised plus how it validates.
///
/// Cheap to clone and compare by its JSON; see the module doc for the subset.
#[derive(Debug, Clone)]
pub struct Schema {
    raw: Value,
    kind: Kind,
}

#[derive(Debug, Clone)]
enum Kind {
    Subset(Box<Node>),
    Opaque(OpaqueReason),
}

/// Where a schema first leaves the subset, so `describe` can say why it is opaque.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct OpaqueReason {
    /// JSON Pointer into the schema of the offending keyword or value.
    pub path: String,
    /// What is outside the subset.
    pub reason: String,
}

/// A JSON type as named by `type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum JsonType {
    Null,
    Boolean,
    Object,
    Array,
    Number,
    Integer,
    String,
}

impl JsonType {
    fn parse(text: &str) -> Option<Self> {
        Some(match text {
            "null" => Self::Null,
            "boolean" => Self::Boolean,
            "object" => Self::Object,
            "array" => Self::Array,
            "number" => Self::Number,
            "integer" => Self::Integer,
            "string" => Self::String,
            _ => return None,
        })
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Null => "null",
            Self::Boolean => "boolean",
            Self::Object => "object",
            Self::Array => "array",
            Self::Number => "number",
            Self::Integer => "integer",
            Self::String => "string",
        }
    }
}

/// One compiled schema node of the subset.
#[derive(Debug, Clone, Default)]
pub(crate) struct Node {
    pub(crate) types: Option<Vec<JsonType>>,
    pub(crate) properties: Vec<(String, Node)>,
    pub(crate) required: Vec<String>,
    pub(crate) additional_properties: bool,
    pub(crate) enumeration: Option<Vec<Value>>,
    pub(crate) constant: Option<Value>,
    pub(crate) items: Option<Box<Node>>,
    pub(crate) min_items: Option<u64>,
    pub(crate) max_items: Option<u64>,
    pub(crate) min_length: Option<u64>,
    pub(crate) max_length: Option<u64>,
    pub(crate) minimum: Option<f64>,
    pub(crate) maximum: Option<f64>,
    pub(crate) exclusive_minimum: Option<f64>,
    pub(crate) exclusive_maximum: Option<f64>,
    pub(crate) any_of: Option<Vec<Node>>,
    pub(crate) default: Option<Value>,
}

impl Schema {
    /// Compiles `raw`; a schema outside the subset becomes opaque rather than an error.
    pub fn new(raw: Value) -> Self {
        let kind = match compile(&raw, &mut String::new(), false) {
            Ok(node) => Kind::Subset(Box::new(node)),
            Err(reason) => Kind::Opaque(reason),
        };
        Self { raw, kind }
    }

    /// `{"type":"object"}`: accepts any object; for operations without parameters of note.
    pub fn any_object() -> Self {
        Self::new(serde_json::json!({ "type": "object" }))
    }

    /// The schema JSON as advertised, which `describe` returns as `inputSchema`.
    pub fn raw(&self) -> &Value {
        &self.raw
    }

    /// Whether the schema is outside the subset (so any object is accepted).
    pub fn is_opaque(&self) -> bool {
        matches!(self.kind, Kind::Opaque(_))
    }

    /// Where and why the schema is outside the subset, if it is.
    pub fn opaque_reason(&self) -> Option<&OpaqueReason> {
        match &self.kind {
            Kind::Opaque(reason) => Some(reason),
            Kind::Subset(_) => None,
        }
    }

    /// Checks `instance` without changing it.
    pub fn validate(&self, instance: &Value) -> Result<(), ValidationError> {
        let errors = match &self.kind {
            Kind::Subset(node) => validate::check(node, instance),
            Kind::Opaque(_) => validate::check_object(instance),
        };
        if errors.is_empty() {
            Ok(())
        } else {
            Err(ValidationError::new(errors))
        }
    }

    /// Applies defaults to absent properties, then validates; returns the input to pass on.
    pub fn decode(&self, mut instance: Value) -> Result<Value, ValidationError> {
        if let Kind::Subset(node) = &self.kind {
            validate::apply_defaults(node, &mut instance);
        }
        self.validate(&instance)?;
        Ok(instance)
    }

    /// [`Schema::decode`], then deserialises into `T`; the typed door for operation handlers.
    pub fn decode_as<T: DeserializeOwned>(&self, instance: Value) -> Result<T, DecodeError> {
        let value = self.decode(instance)?;
        Ok(serde_json::from_value(value)?)
    }
}

impl PartialEq for Schema {
    fn eq(&self, other: &Self) -> bool {
        self.raw == other.raw
    }
}

/// Escapes one JSON Pointer token (RFC 6901).
pub(crate) fn escape_pointer(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}

fn opaque(path: &str, key: &str, reason: impl Into<String>) -> OpaqueReason {
    OpaqueReason {
        path: format!("{path}/{}", escape_pointer(key)),
        reason: reason.into(),
    }
}

fn compile(raw: &Value, path: &mut String, in_any_of: bool) -> Result<Node, OpaqueReason> {
    let Value::Object(map) = raw else {
        return Err(OpaqueReason {
            path: path.clone(),
            reason: "only object schemas are in the subset".into(),
        });
    };
    let mut node = Node {
        additional_properties: true,
        ..Node::default()
    };
    let mut exclusive_min_flag = false;
    let mut exclusive_max_flag = false;
    for (key, value) in map {
        let bad = |why: &str| opaque(path, key, why);
        match key.as_str() {
            "type" => node.types = Some(compile_types(value).ok_or_else(|| bad("unknown type"))?),
            "properties" => {
                let Value::Object(props) = value else {
                    return Err(bad("`properties` must be an object"));
                };
                for (name, schema) in props {
                    let len = path.len();
                    path.push_str("/properties/");
                    path.push_str(&escape_pointer(name));
                    let child = compile(schema, path, in_any_of);
                    path.truncate(len);
                    node.properties.push((name.clone(), child?));
                }
            }
            "required" => {
                node.required = value
                    .as_array()
                    .and_then(|names| {
                        names
                            .iter()
                            .map(|n| n.as_str().map(str::to_owned))
                            .collect()
                    })
                    .ok_or_else(|| bad("`required` must be an array of strings"))?;
            }
            "additionalProperties" => {
                node.additional_properties = match value {
                    Value::Bool(allowed) => *allowed,
                    Value::Object(empty) if empty.is_empty() => true,
                    _ => return Err(bad("a schema for additional properties")),
                }
            }
            "enum" => {
                let values = value
                    .as_array()
                    .ok_or_else(|| bad("`enum` must be an array"))?;
                node.enumeration = Some(values.clone());
            }
            "const" => node.constant = Some(value.clone()),
            "items" => {
                let len = path.len();
                path.push_str("/items");
                let child = compile(value, path, in_any_of);
                path.truncate(len);
                node.items = Some(Box::new(child?));
            }
            "minItems" => node.min_items = Some(count(value).ok_or_else(|| bad("not a count"))?),
            "maxItems" => node.max_items = Some(count(value).ok_or_else(|| bad("not a count"))?),
            "minLength" => node.min_length = Some(count(value).ok_or_else(|| bad("not a count"))?),
            "maxLength" => node.max_length = Some(count(value).ok_or_else(|| bad("not a count"))?),
            "minimum" => node.minimum = Some(value.as_f64().ok_or_else(|| bad("not a number"))?),
            "maximum" => node.maximum = Some(value.as_f64().ok_or_else(|| bad("not a number"))?),
            "exclusiveMinimum" => match value {
                Value::Bool(flag) => exclusive_min_flag = *flag,
                _ => {
                    node.exclusive_minimum =
                        Some(value.as_f64().ok_or_else(|| bad("not a number"))?)
                }
            },
            "exclusiveMaximum" => match value {
                Value::Bool(flag) => exclusive_max_flag = *flag,
                _ => {
                    node.exclusive_maximum =
                        Some(value.as_f64().ok_or_else(|| bad("not a number"))?)
                }
            },
            "anyOf" => {
                if in_any_of {
                    return Err(bad("nested `anyOf`"));
                }
                let shape = bad("`anyOf` must be a non-empty array");
                node.any_of = Some(compile_any_of(value, path).map_err(|e| e.unwrap_or(shape))?);
            }
            "default" => node.default = Some(value.clone()),
            other if ANNOTATIONS.contains(&other) => {}
            _ => return Err(bad("keyword outside the subset")),
        }
    }
    if exclusive_min_flag {
        node.exclusive_minimum = node.minimum.take();
    }
    if exclusive_max_flag {
        node.exclusive_maximum = node.maximum.take();
    }
    Ok(node)
}

/// Compiles `anyOf` branches; `Err(None)` means the keyword's own shape is wrong.
fn compile_any_of(value: &Value, path: &mut String) -> Result<Vec<Node>, Option<OpaqueReason>> {
    let branches = value.as_array().filter(|b| !b.is_empty()).ok_or(None)?;
    let mut nodes = Vec::with_capacity(branches.len());
    for (i, branch) in branches.iter().enumerate() {
        let len = path.len();
        path.push_str(&format!("/anyOf/{i}"));
        let node = compile(branch, path, true);
        path.truncate(len);
        nodes.push(node.map_err(Some)?);
    }
    Ok(nodes)
}

fn compile_types(value: &Value) -> Option<Vec<JsonType>> {
    match value {
        Value::String(name) => Some(vec![JsonType::parse(name)?]),
        Value::Array(names) if !names.is_empty() => names
            .iter()
            .map(|n| n.as_str().and_then(JsonType::parse))
            .collect(),
        _ => None,
    }
}

fn count(value: &Value) -> Option<u64> {
    value.as_u64().or_else(|| {
        value
            .as_f64()
            .filter(|f| *f >= 0.0 && f.fract() == 0.0)
            .map(|f| f as u64)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn subset_keywords_compile() {
        let schema = Schema::new(json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "title": "t",
            "properties": {
                "a": { "type": ["string", "null"], "minLength": 1, "format": "uri" },
                "b": { "anyOf": [{ "type": "integer" }, { "type": "null" }] },
                "c": { "type": "array", "items": { "enum": [1, 2] }, "maxItems": 3 },
                "d": { "type": "number", "minimum": 0, "exclusiveMaximum": true, "maximum": 1 }
            },
            "required": ["a"],
            "additionalProperties": false
        }));
        assert_eq!(schema.opaque_reason(), None);
    }

    #[test]
    fn outside_keywords_make_opaque() {
        let cases = [
            (
                json!({ "type": "object", "properties": { "x": { "$ref": "#/$defs/x" } } }),
                "/properties/x/$ref",
            ),
            (json!({ "oneOf": [] }), "/oneOf"),
            (
                json!({ "anyOf": [{ "anyOf": [{ "type": "null" }] }] }),
                "/anyOf/0/anyOf",
            ),
            (
                json!({ "additionalProperties": { "type": "string" } }),
                "/additionalProperties",
            ),
            (json!({ "items": [{ "type": "string" }] }), "/items"),
            (json!(true), ""),
        ];
        let got: Vec<_> = cases
            .iter()
            .map(|(raw, _)| {
                Schema::new(raw.clone())
                    .opaque_reason()
                    .map(|r| r.path.clone())
            })
            .collect();
        let want: Vec<_> = cases.iter().map(|(_, p)| Some((*p).to_owned())).collect();
        assert_eq!(got, want);
    }
}
