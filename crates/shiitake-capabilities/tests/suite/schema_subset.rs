//! The JSON Schema subset: valid instances pass, mutated ones fail with the right path and rule.

use proptest::prelude::*;
use serde_json::{Map, Value, json};
use shiitake_capabilities::schema::{DecodeError, Rule, Schema, SchemaError, ValidationError};

/// A schema shape in the subset, from which both the schema and valid instances are drawn.
#[derive(Debug, Clone)]
enum Shape {
    Str {
        min: usize,
        max: usize,
    },
    Int {
        min: i64,
        max: i64,
    },
    Num {
        min: f64,
        max: f64,
    },
    Bool,
    Enum(Vec<String>),
    Nullable(Box<Shape>),
    Array {
        item: Box<Shape>,
        min: usize,
        max: usize,
    },
    Object {
        props: Vec<(String, Shape, bool)>,
        closed: bool,
    },
}

impl Shape {
    fn schema(&self) -> Value {
        match self {
            Shape::Str { min, max } => {
                json!({ "type": "string", "minLength": min, "maxLength": max, "description": "s" })
            }
            Shape::Int { min, max } => json!({ "type": "integer", "minimum": min, "maximum": max }),
            Shape::Num { min, max } => {
                json!({ "type": "number", "minimum": min, "exclusiveMaximum": max })
            }
            Shape::Bool => json!({ "type": "boolean", "title": "flag" }),
            Shape::Enum(values) => json!({ "type": "string", "enum": values }),
            Shape::Nullable(inner) => json!({ "anyOf": [inner.schema(), { "type": "null" }] }),
            Shape::Array { item, min, max } => {
                json!({ "type": "array", "items": item.schema(), "minItems": min, "maxItems": max })
            }
            Shape::Object { props, closed } => {
                let properties: Map<String, Value> = props
                    .iter()
                    .map(|(n, s, _)| (n.clone(), s.schema()))
                    .collect();
                let required: Vec<&String> = props
                    .iter()
                    .filter(|(_, _, r)| *r)
                    .map(|(n, _, _)| n)
                    .collect();
                json!({
                    "type": "object",
                    "properties": properties,
                    "required": required,
                    "additionalProperties": !closed,
                })
            }
        }
    }

    fn instance(&self) -> BoxedStrategy<Value> {
        match self.clone() {
            Shape::Str { min, max } => prop::collection::vec(
                prop::sample::select(vec!['a', 'z', 'é', '日', '/']),
                min..=max,
            )
            .prop_map(|chars| Value::String(chars.into_iter().collect()))
            .boxed(),
            Shape::Int { min, max } => (min..=max).prop_map(|i| json!(i)).boxed(),
            Shape::Num { min, max } => (min..max).prop_map(|f| json!(f)).boxed(),
            Shape::Bool => any::<bool>().prop_map(Value::Bool).boxed(),
            Shape::Enum(values) => prop::sample::select(values).prop_map(Value::String).boxed(),
            Shape::Nullable(inner) => prop_oneof![Just(Value::Null), inner.instance()].boxed(),
            Shape::Array { item, min, max } => prop::collection::vec(item.instance(), min..=max)
                .prop_map(Value::Array)
                .boxed(),
            Shape::Object { props, .. } => {
                let fields: Vec<BoxedStrategy<(String, Option<Value>)>> = props
                    .into_iter()
                    .map(|(name, shape, required)| {
                        let value = shape.instance();
                        if required {
                            value.prop_map(move |v| (name.clone(), Some(v))).boxed()
                        } else {
                            proptest::option::of(value)
                                .prop_map(move |v| (name.clone(), v))
                                .boxed()
                        }
                    })
                    .collect();
                fields
                    .prop_map(|fields| {
                        Value::Object(
                            fields
                                .into_iter()
                                .filter_map(|(n, v)| v.map(|v| (n, v)))
                                .collect(),
                        )
                    })
                    .boxed()
            }
        }
    }
}

fn leaf() -> BoxedStrategy<Shape> {
    let simple = prop_oneof![
        (0usize..4, 0usize..6).prop_map(|(min, extra)| Shape::Str {
            min,
            max: min + extra
        }),
        (-100i64..100, 1i64..50).prop_map(|(min, width)| Shape::Int {
            min,
            max: min + width
        }),
        (-100.0f64..100.0, 1.0f64..50.0).prop_map(|(min, width)| Shape::Num {
            min,
            max: min + width
        }),
        Just(Shape::Bool),
        prop::collection::btree_set("[a-c]{1,3}", 1..4)
            .prop_map(|values| Shape::Enum(values.into_iter().collect())),
    ]
    .boxed();
    prop_oneof![
        4 => simple.clone(),
        1 => simple.prop_map(|s| Shape::Nullable(Box::new(s))),
    ]
    .boxed()
}

fn object(inner: BoxedStrategy<Shape>) -> BoxedStrategy<Shape> {
    (
        prop::collection::btree_map("[a-d/~]{1,3}", (inner, any::<bool>()), 0..4),
        any::<bool>(),
    )
        .prop_map(|(props, closed)| Shape::Object {
            props: props.into_iter().map(|(n, (s, r))| (n, s, r)).collect(),
            closed,
        })
        .boxed()
}

fn root() -> BoxedStrategy<Shape> {
    let nested = leaf().prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            (inner.clone(), 0usize..3, 0usize..3).prop_map(|(item, min, extra)| Shape::Array {
                item: Box::new(item),
                min,
                max: min + extra,
            }),
            object(inner),
        ]
    });
    object(nested.boxed())
}

/// How to break an instance at one pointer, and which rule must then fail there.
#[derive(Debug, Clone)]
enum Edit {
    Replace(Value),
    Remove,
    Add(String),
}

#[derive(Debug, Clone)]
struct Mutation {
    pointer: String,
    edit: Edit,
    expected_path: String,
    rule: Rule,
}

fn escape(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}

fn replace(pointer: &str, value: Value, rule: Rule) -> Mutation {
    Mutation {
        pointer: pointer.to_owned(),
        edit: Edit::Replace(value),
        expected_path: pointer.to_owned(),
        rule,
    }
}

/// Every single-rule mutation of `value` (valid for `shape`) at `pointer` and below.
fn sites(shape: &Shape, value: &Value, pointer: &str, out: &mut Vec<Mutation>) {
    match shape {
        Shape::Str { min, max } => {
            out.push(replace(pointer, json!(true), Rule::Type));
            out.push(replace(
                pointer,
                json!("é".repeat(max + 1)),
                Rule::MaxLength,
            ));
            if *min > 0 {
                out.push(replace(
                    pointer,
                    json!("é".repeat(min - 1)),
                    Rule::MinLength,
                ));
            }
        }
        Shape::Int { min, max } => {
            out.push(replace(pointer, json!("7"), Rule::Type));
            out.push(replace(pointer, json!(*min as f64 + 0.5), Rule::Type));
            out.push(replace(pointer, json!(max + 1), Rule::Maximum));
            out.push(replace(pointer, json!(min - 1), Rule::Minimum));
        }
        Shape::Num { min, max } => {
            out.push(replace(pointer, json!(null), Rule::Type));
            out.push(replace(pointer, json!(max), Rule::ExclusiveMaximum));
            out.push(replace(pointer, json!(min - 1.0), Rule::Minimum));
        }
        Shape::Bool => out.push(replace(pointer, json!(0), Rule::Type)),
        Shape::Enum(_) => {
            out.push(replace(pointer, json!("zzzz"), Rule::Enum));
            out.push(replace(pointer, json!(1), Rule::Type));
        }
        Shape::Nullable(_) => out.push(replace(pointer, json!([]), Rule::AnyOf)),
        Shape::Array { item, min, max } => {
            out.push(replace(pointer, json!({}), Rule::Type));
            let items = value.as_array().cloned().unwrap_or_default();
            if let Some(first) = items.first() {
                let mut longer = items.clone();
                longer.resize(max + 1, first.clone());
                out.push(replace(pointer, Value::Array(longer), Rule::MaxItems));
                if *min > 0 {
                    out.push(replace(
                        pointer,
                        Value::Array(items[..min - 1].to_vec()),
                        Rule::MinItems,
                    ));
                }
            }
            for (i, element) in items.iter().enumerate() {
                sites(item, element, &format!("{pointer}/{i}"), out);
            }
        }
        Shape::Object { props, closed } => {
            out.push(replace(pointer, json!("object"), Rule::Type));
            if *closed {
                out.push(Mutation {
                    pointer: pointer.to_owned(),
                    edit: Edit::Add("zz_extra".into()),
                    expected_path: format!("{pointer}/zz_extra"),
                    rule: Rule::AdditionalProperties,
                });
            }
            for (name, prop, required) in props {
                let child = format!("{pointer}/{}", escape(name));
                let Some(present) = value.get(name) else {
                    continue;
                };
                if *required {
                    out.push(Mutation {
                        pointer: child.clone(),
                        edit: Edit::Remove,
                        expected_path: child.clone(),
                        rule: Rule::Required,
                    });
                }
                sites(prop, present, &child, out);
            }
        }
    }
}

fn apply(instance: &Value, mutation: &Mutation) -> Value {
    let mut out = instance.clone();
    match &mutation.edit {
        Edit::Replace(value) => {
            if let Some(slot) = out.pointer_mut(&mutation.pointer) {
                *slot = value.clone();
            }
        }
        Edit::Remove => {
            let (parent, last) = mutation.pointer.rsplit_once('/').unwrap_or(("", ""));
            let key = last.replace("~1", "/").replace("~0", "~");
            if let Some(Value::Object(map)) = out.pointer_mut(parent) {
                map.shift_remove(&key);
            }
        }
        Edit::Add(key) => {
            if let Some(Value::Object(map)) = out.pointer_mut(&mutation.pointer) {
                map.insert(key.clone(), json!(1));
            }
        }
    }
    out
}

fn paths_and_rules(errors: &[SchemaError]) -> Vec<(String, Rule)> {
    errors.iter().map(|e| (e.path.clone(), e.rule)).collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn valid_instances_are_accepted((shape, instance) in root().prop_flat_map(|s| {
        let values = s.instance();
        (Just(s), values)
    })) {
        let schema = Schema::new(shape.schema());
        prop_assert!(!schema.is_opaque(), "{:?}", schema.opaque_reason());
        prop_assert_eq!(schema.decode(instance.clone()), Ok(instance));
    }

    #[test]
    fn mutated_instances_fail_at_the_mutated_path(
        (shape, instance, mutations, pick) in root()
            .prop_flat_map(|s| { let values = s.instance(); (Just(s), values) })
            .prop_flat_map(|(s, v)| {
                let mut found = Vec::new();
                sites(&s, &v, "", &mut found);
                let n = found.len();
                (Just(s), Just(v), Just(found), 0..n)
            })
    ) {
        let mutation = &mutations[pick];
        let broken = apply(&instance, mutation);
        let schema = Schema::new(shape.schema());
        let errors = schema.validate(&broken).map_err(|e| e.into_errors()).err().unwrap_or_default();
        prop_assert_eq!(
            paths_and_rules(&errors),
            vec![(mutation.expected_path.clone(), mutation.rule)],
            "mutation {:?} of {} gave {:?}", mutation, instance, errors
        );
    }

    #[test]
    fn opaque_schemas_accept_any_object(
        extra in prop::sample::select(vec!["$ref", "oneOf", "pattern", "uniqueItems", "x-vendor"]),
        object in prop::collection::btree_map("[a-z]{1,4}", any::<i32>(), 0..5),
    ) {
        let schema = Schema::new(json!({ "type": "object", "properties": { "a": { extra: "#" } } }));
        prop_assert!(schema.is_opaque());
        let object = json!(object);
        prop_assert_eq!(schema.decode(object.clone()), Ok(object));
        let errors = schema.validate(&json!([1])).map_err(|e| e.into_errors()).err().unwrap_or_default();
        prop_assert_eq!(paths_and_rules(&errors), vec![(String::new(), Rule::Type)]);
    }
}

#[test]
fn errors_name_path_rule_and_reason() {
    let schema = Schema::new(json!({
        "type": "object",
        "properties": {
            "header": { "type": "string", "maxLength": 12 },
            "items": { "type": "array", "items": {
                "type": "object",
                "properties": { "name": { "type": "string", "minLength": 1 } },
                "required": ["name"]
            } },
            "mode": { "enum": ["wait", "continue"] }
        },
        "required": ["header"],
        "additionalProperties": false
    }));
    let input = json!({
        "header": "a header that is long",
        "items": [{ "name": "" }, {}],
        "mode": "later",
        "extra": 1
    });
    let errors = schema.validate(&input).map_err(|e| e.into_errors());
    let error = |path: &str, rule, message: &str| SchemaError {
        path: path.into(),
        rule,
        message: message.into(),
    };
    assert_eq!(
        errors,
        Err(vec![
            error(
                "/header",
                Rule::MaxLength,
                "expected at most 12 characters, got 21"
            ),
            error(
                "/items/0/name",
                Rule::MinLength,
                "expected at least 1 characters, got 0"
            ),
            error(
                "/items/1/name",
                Rule::Required,
                "required property is missing"
            ),
            error(
                "/mode",
                Rule::Enum,
                "expected one of [\"wait\", \"continue\"]"
            ),
            error(
                "/extra",
                Rule::AdditionalProperties,
                "unknown property; expected one of: header, items, mode"
            ),
        ])
    );
}

#[test]
fn defaults_fill_absent_properties_before_validation() {
    let schema = Schema::new(json!({
        "type": "object",
        "properties": {
            "limit": { "type": "integer", "default": 20, "maximum": 100 },
            "options": {
                "type": "object",
                "properties": { "recursive": { "type": "boolean", "default": false } }
            },
            "path": { "type": "string" }
        },
        "required": ["limit", "path"]
    }));
    assert_eq!(
        schema.decode(json!({ "path": "notes.md", "options": {} })),
        Ok(json!({ "path": "notes.md", "options": { "recursive": false }, "limit": 20 }))
    );
    assert_eq!(
        schema.decode(json!({ "path": "a", "limit": 5 })),
        Ok(json!({ "path": "a", "limit": 5 }))
    );
}

#[test]
fn any_of_of_simple_types_and_type_arrays() {
    let schema = Schema::new(json!({
        "type": "object",
        "properties": {
            "offset": { "anyOf": [{ "type": "integer", "minimum": 0 }, { "type": "null" }] },
            "tag": { "type": ["string", "null"] },
            "ratio": { "type": "number", "exclusiveMinimum": 0, "maximum": 1 },
            "kind": { "const": "note" }
        }
    }));
    assert_eq!(
        schema.validate(&json!({ "offset": null, "tag": null, "ratio": 1, "kind": "note" })),
        Ok(())
    );
    let errors = schema
        .validate(&json!({ "offset": -1, "tag": 3, "ratio": 0, "kind": "task" }))
        .map_err(|e| e.into_errors());
    assert_eq!(
        errors,
        Err(vec![
            SchemaError {
                path: "/offset".into(),
                rule: Rule::AnyOf,
                message: "no alternative matched (expected a number >= 0, got -1; expected null, got number)".into(),
            },
            SchemaError {
                path: "/tag".into(),
                rule: Rule::Type,
                message: "expected string or null, got number".into(),
            },
            SchemaError {
                path: "/ratio".into(),
                rule: Rule::ExclusiveMinimum,
                message: "expected a number > 0, got 0".into(),
            },
            SchemaError {
                path: "/kind".into(),
                rule: Rule::Const,
                message: "expected \"note\"".into(),
            },
        ])
    );
}

#[test]
fn typed_decode_validates_then_deserialises() {
    #[derive(Debug, PartialEq, serde::Deserialize)]
    struct Read {
        path: String,
        limit: u32,
    }
    let schema = Schema::new(json!({
        "type": "object",
        "properties": {
            "path": { "type": "string", "minLength": 1 },
            "limit": { "type": "integer", "default": 4 }
        },
        "required": ["path"]
    }));
    let read = schema.decode_as::<Read>(json!({ "path": "notes.md" }));
    assert_eq!(
        read.ok(),
        Some(Read {
            path: "notes.md".into(),
            limit: 4
        })
    );
    assert!(matches!(
        schema.decode_as::<Read>(json!({ "path": "" })),
        Err(DecodeError::Invalid(_))
    ));
    assert!(matches!(
        schema.decode_as::<Read>(json!({ "path": "a", "limit": -1 })),
        Err(DecodeError::Shape(_))
    ));
}

#[test]
fn errors_stop_at_the_cap() {
    let schema = Schema::new(json!({ "type": "object", "additionalProperties": false }));
    // Each extra key is one `additionalProperties` error, reported in key order.
    let error_paths = |keys: usize| -> Vec<String> {
        let instance: Map<String, Value> =
            (0..keys).map(|i| (format!("k{i:02}"), json!(i))).collect();
        match schema.validate(&Value::Object(instance)) {
            Ok(()) => Vec::new(),
            Err(e) => e.into_errors().into_iter().map(|e| e.path).collect(),
        }
    };
    let first_32: Vec<String> = (0..32).map(|i| format!("/k{i:02}")).collect();
    assert_eq!(ValidationError::MAX_ERRORS, 32);
    assert_eq!(error_paths(32), first_32, "32 extra keys: all 32 errors");
    assert_eq!(
        error_paths(33),
        first_32,
        "33 extra keys: the 33rd is dropped"
    );
}
