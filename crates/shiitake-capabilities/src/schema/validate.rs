//! Checking an instance against a compiled [`Node`], and applying defaults.

use serde_json::Value;

use super::error::{Rule, SchemaError, ValidationError};
use super::{JsonType, Node, escape_pointer};

/// Collects errors while walking an instance; stops adding after the cap.
struct Walk {
    path: String,
    errors: Vec<SchemaError>,
}

impl Walk {
    fn report(&mut self, rule: Rule, message: String) {
        if self.errors.len() < ValidationError::MAX_ERRORS {
            self.errors.push(SchemaError {
                path: self.path.clone(),
                rule,
                message,
            });
        }
    }

    fn at<R>(&mut self, token: &str, f: impl FnOnce(&mut Self) -> R) -> R {
        let len = self.path.len();
        self.path.push('/');
        self.path.push_str(&escape_pointer(token));
        let result = f(self);
        self.path.truncate(len);
        result
    }
}

/// All errors of `instance` against `node` (empty when valid).
pub(crate) fn check(node: &Node, instance: &Value) -> Vec<SchemaError> {
    let mut walk = Walk {
        path: String::new(),
        errors: Vec::new(),
    };
    check_node(node, instance, &mut walk);
    walk.errors
}

/// What an opaque schema asks: any JSON object.
pub(crate) fn check_object(instance: &Value) -> Vec<SchemaError> {
    if instance.is_object() {
        Vec::new()
    } else {
        vec![SchemaError {
            path: String::new(),
            rule: Rule::Type,
            message: format!(
                "expected an object (its fields are checked by the operation), got {}",
                type_name(instance)
            ),
        }]
    }
}

fn check_node(node: &Node, value: &Value, walk: &mut Walk) {
    if let Some(types) = &node.types
        && !types.iter().any(|t| has_type(value, *t))
    {
        let names: Vec<_> = types.iter().map(|t| t.name()).collect();
        walk.report(
            Rule::Type,
            format!("expected {}, got {}", names.join(" or "), type_name(value)),
        );
        return;
    }
    if let Some(constant) = &node.constant
        && !json_eq(constant, value)
    {
        walk.report(Rule::Const, format!("expected {constant}"));
    }
    if let Some(values) = &node.enumeration
        && !values.iter().any(|v| json_eq(v, value))
    {
        walk.report(Rule::Enum, format!("expected one of {}", list(values)));
    }
    match value {
        Value::String(text) => check_string(node, text, walk),
        Value::Number(number) => {
            if let Some(n) = number.as_f64() {
                check_number(node, n, walk);
            }
        }
        Value::Array(items) => check_array(node, items, walk),
        Value::Object(map) => check_object_node(node, map, walk),
        Value::Null | Value::Bool(_) => {}
    }
    if let Some(branches) = &node.any_of {
        check_any_of(branches, value, walk);
    }
}

fn check_string(node: &Node, text: &str, walk: &mut Walk) {
    let chars = text.chars().count() as u64;
    if let Some(min) = node.min_length
        && chars < min
    {
        walk.report(
            Rule::MinLength,
            format!("expected at least {min} characters, got {chars}"),
        );
    }
    if let Some(max) = node.max_length
        && chars > max
    {
        walk.report(
            Rule::MaxLength,
            format!("expected at most {max} characters, got {chars}"),
        );
    }
}

fn check_number(node: &Node, n: f64, walk: &mut Walk) {
    let bounds = [
        (
            node.minimum,
            Rule::Minimum,
            n >= node.minimum.unwrap_or(f64::NEG_INFINITY),
            ">=",
        ),
        (
            node.maximum,
            Rule::Maximum,
            n <= node.maximum.unwrap_or(f64::INFINITY),
            "<=",
        ),
        (
            node.exclusive_minimum,
            Rule::ExclusiveMinimum,
            n > node.exclusive_minimum.unwrap_or(f64::NEG_INFINITY),
            ">",
        ),
        (
            node.exclusive_maximum,
            Rule::ExclusiveMaximum,
            n < node.exclusive_maximum.unwrap_or(f64::INFINITY),
            "<",
        ),
    ];
    for (bound, rule, ok, op) in bounds {
        if let Some(bound) = bound
            && !ok
        {
            walk.report(rule, format!("expected a number {op} {bound}, got {n}"));
        }
    }
}

fn check_array(node: &Node, items: &[Value], walk: &mut Walk) {
    let len = items.len() as u64;
    if let Some(min) = node.min_items
        && len < min
    {
        walk.report(
            Rule::MinItems,
            format!("expected at least {min} items, got {len}"),
        );
    }
    if let Some(max) = node.max_items
        && len > max
    {
        walk.report(
            Rule::MaxItems,
            format!("expected at most {max} items, got {len}"),
        );
    }
    if let Some(item_node) = &node.items {
        for (i, item) in items.iter().enumerate() {
            walk.at(&i.to_string(), |walk| check_node(item_node, item, walk));
        }
    }
}

fn check_object_node(node: &Node, map: &serde_json::Map<String, Value>, walk: &mut Walk) {
    for name in &node.required {
        if !map.contains_key(name) {
            walk.at(name, |walk| {
                walk.report(Rule::Required, "required property is missing".to_owned())
            });
        }
    }
    for (name, value) in map {
        match node.properties.iter().find(|(p, _)| p == name) {
            Some((_, child)) => walk.at(name, |walk| check_node(child, value, walk)),
            None if !node.additional_properties => {
                let known: Vec<_> = node.properties.iter().map(|(p, _)| p.as_str()).collect();
                walk.at(name, |walk| {
                    walk.report(
                        Rule::AdditionalProperties,
                        format!("unknown property; expected one of: {}", known.join(", ")),
                    )
                });
            }
            None => {}
        }
    }
}

fn check_any_of(branches: &[Node], value: &Value, walk: &mut Walk) {
    let mut reasons = Vec::new();
    for branch in branches {
        let mut inner = Walk {
            path: walk.path.clone(),
            errors: Vec::new(),
        };
        check_node(branch, value, &mut inner);
        match inner.errors.first() {
            None => return,
            Some(first) => reasons.push(first.message.clone()),
        }
    }
    walk.report(
        Rule::AnyOf,
        format!("no alternative matched ({})", reasons.join("; ")),
    );
}

/// Fills absent properties that declare a `default`, recursively (never inside `anyOf`).
pub(crate) fn apply_defaults(node: &Node, value: &mut Value) {
    match value {
        Value::Object(map) => {
            for (name, child) in &node.properties {
                match map.get_mut(name) {
                    Some(present) => apply_defaults(child, present),
                    None => {
                        if let Some(default) = &child.default {
                            map.insert(name.clone(), default.clone());
                        }
                    }
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_node) = &node.items {
                for item in items {
                    apply_defaults(item_node, item);
                }
            }
        }
        _ => {}
    }
}

fn has_type(value: &Value, ty: JsonType) -> bool {
    match ty {
        JsonType::Null => value.is_null(),
        JsonType::Boolean => value.is_boolean(),
        JsonType::Object => value.is_object(),
        JsonType::Array => value.is_array(),
        JsonType::Number => value.is_number(),
        JsonType::String => value.is_string(),
        JsonType::Integer => match value {
            Value::Number(n) => {
                n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0)
            }
            _ => false,
        },
    }
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// JSON equality with numbers compared by value, so `1` equals `1.0`.
pub(crate) fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_i64(), y.as_i64()) {
            (Some(x), Some(y)) => x == y,
            _ => match (x.as_u64(), y.as_u64()) {
                (Some(x), Some(y)) => x == y,
                _ => x.as_f64() == y.as_f64(),
            },
        },
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| json_eq(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_eq(v, w)))
        }
        _ => a == b,
    }
}

fn list(values: &[Value]) -> String {
    let shown: Vec<String> = values.iter().take(16).map(Value::to_string).collect();
    let more = if values.len() > 16 { ", ..." } else { "" };
    format!("[{}{more}]", shown.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn numbers_compare_by_value() {
        assert!(json_eq(&json!(1), &json!(1.0)));
        assert!(json_eq(
            &json!({ "a": [1, 2.0] }),
            &json!({ "a": [1.0, 2] })
        ));
        assert!(!json_eq(&json!(1), &json!(-1)));
        assert!(!json_eq(&json!("1"), &json!(1)));
    }

    #[test]
    fn integer_type_accepts_whole_floats() {
        assert!(has_type(&json!(3.0), JsonType::Integer));
        assert!(!has_type(&json!(3.5), JsonType::Integer));
        assert!(has_type(&json!(u64::MAX), JsonType::Integer));
    }
}
