//! What a person is shown of a call's arguments: bounded, and with what looks like a
//! secret replaced, so an approval never shows a token to whoever reads the footer.
//!
//! - A value under a key that names a secret (`password`, `token`, `apiKey`,
//!   `authorization`, `secret`, `credential`, `cookie`, `privateKey`, any case and
//!   spelling with `_` or `-`) is [`REDACTED`], whatever it is.
//! - A string that looks like a credential (`sk-…`, `ghp_…`, `github_pat_…`, `xox?-…`,
//!   `AKIA…`, `Bearer …`, `Basic …`, a JWT `eyJ….….…`) is [`REDACTED`].
//! - Strings are cut at [`MAX_STRING_CHARS`] characters (ending with `…`), keys at
//!   [`MAX_KEY_CHARS`]; at most [`MAX_NODES`] values are shown and at most
//!   [`MAX_TEXT_CHARS`] characters of keys and strings in all; nesting deeper than
//!   [`MAX_DEPTH`] and what is past a bound shows as `"…"`.
//!
//! The encoded preview is at most [`MAX_PREVIEW_CHARS`] characters.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

/// What a hidden value shows.
pub const REDACTED: &str = "[redacted]";
/// Longest string shown, in characters.
pub const MAX_STRING_CHARS: usize = 200;
/// Longest key shown, in characters.
pub const MAX_KEY_CHARS: usize = 64;
/// Most values shown (objects, arrays and scalars alike).
pub const MAX_NODES: usize = 64;
/// Most characters of keys and strings shown in all.
pub const MAX_TEXT_CHARS: usize = 1_500;
/// Deepest nesting shown.
pub const MAX_DEPTH: usize = 4;
/// Longest encoded preview, in characters: the text, and per value its quotes,
/// separators and a number of at most 24 characters.
pub const MAX_PREVIEW_CHARS: usize = MAX_TEXT_CHARS + MAX_NODES * 40;

/// Most facts about a call shown (the first ones by name).
pub const MAX_FACTS: usize = 8;
/// Longest fact value shown, in characters.
pub const MAX_FACT_CHARS: usize = 200;

const CUT: &str = "…";

/// What a person may see of the facts a tool gives about a call (where a command runs,
/// whether it has the network): at most [`MAX_FACTS`], names cut at [`MAX_KEY_CHARS`]
/// and values at [`MAX_FACT_CHARS`] characters, a secret-looking one [`REDACTED`].
pub fn facts(facts: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    facts
        .iter()
        .take(MAX_FACTS)
        .map(|(name, value)| {
            let shown = if names_secret(name) || looks_secret(value) {
                REDACTED.to_owned()
            } else {
                cut(value, MAX_FACT_CHARS)
            };
            (cut(name, MAX_KEY_CHARS), shown)
        })
        .collect()
}

/// The arguments as a person may see them.
pub fn preview(arguments: &Map<String, Value>) -> Value {
    let mut budget = Budget {
        nodes: MAX_NODES,
        text: MAX_TEXT_CHARS,
    };
    object(arguments, 0, &mut budget)
}

/// `{"path":"a.txt","patch":"*** Begin…"}` on one line, at most `limit` characters
/// (ending with `…` when cut): a footer row's short form of a preview.
pub fn one_line(preview: &Value, limit: usize) -> String {
    cut(&preview.to_string(), limit)
}

struct Budget {
    nodes: usize,
    text: usize,
}

impl Budget {
    /// Takes one value; `false` when none is left.
    fn node(&mut self) -> bool {
        if self.nodes == 0 {
            return false;
        }
        self.nodes -= 1;
        true
    }

    /// Text of at most `limit` characters, and at most what is left of the budget once
    /// encoded (a quote or a backslash takes two, a control character six), cut with
    /// `…`.
    fn text(&mut self, text: &str, limit: usize) -> String {
        let total = text.chars().count();
        let keep = if total > limit {
            limit.saturating_sub(1)
        } else {
            total
        };
        let mut shown = String::new();
        let mut width = 0;
        let mut cut = false;
        for (n, c) in text.chars().enumerate() {
            let needed = width + encoded_width(c);
            // Room for this character and for the cut mark, should one follow.
            if n >= keep || needed + 1 > self.text {
                cut = true;
                break;
            }
            shown.push(c);
            width = needed;
        }
        if cut {
            shown.push_str(CUT);
            width += 1;
        }
        self.text = self.text.saturating_sub(width);
        shown
    }
}

/// How many characters `c` takes in a JSON string.
fn encoded_width(c: char) -> usize {
    match c {
        '"' | '\\' | '\n' | '\r' | '\t' | '\u{8}' | '\u{c}' => 2,
        c if c.is_control() && (c as u32) < 0x20 => 6,
        _ => 1,
    }
}

fn cut(text: &str, limit: usize) -> String {
    if text.chars().count() <= limit {
        return text.to_owned();
    }
    let mut shown: String = text.chars().take(limit.saturating_sub(1)).collect();
    shown.push_str(CUT);
    shown
}

fn value(value: &Value, depth: usize, budget: &mut Budget) -> Value {
    match value {
        Value::Object(map) => object(map, depth, budget),
        Value::Array(items) if depth < MAX_DEPTH => {
            let mut shown = Vec::new();
            for item in items {
                if !budget.node() {
                    shown.push(Value::from(CUT));
                    break;
                }
                shown.push(self::value(item, depth + 1, budget));
            }
            Value::Array(shown)
        }
        Value::Array(_) => Value::from(CUT),
        Value::String(text) if looks_secret(text) => Value::from(REDACTED),
        Value::String(text) => Value::from(budget.text(text, MAX_STRING_CHARS)),
        scalar => scalar.clone(),
    }
}

fn object(map: &Map<String, Value>, depth: usize, budget: &mut Budget) -> Value {
    if depth >= MAX_DEPTH {
        return Value::from(CUT);
    }
    let mut shown = Map::new();
    for (key, item) in map {
        if !budget.node() || budget.text == 0 {
            shown.insert(CUT.to_owned(), Value::from(CUT));
            break;
        }
        let name = budget.text(key, MAX_KEY_CHARS);
        let item = if names_secret(key) {
            Value::from(REDACTED)
        } else {
            value(item, depth + 1, budget)
        };
        shown.insert(name, item);
    }
    Value::Object(shown)
}

/// Whether a key names a secret: compared without case, `_` or `-`.
fn names_secret(key: &str) -> bool {
    const SECRET: [&str; 10] = [
        "password",
        "passwd",
        "secret",
        "token",
        "apikey",
        "authorization",
        "credential",
        "cookie",
        "privatekey",
        "accesskey",
    ];
    let plain: String = key
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .map(|c| c.to_ascii_lowercase())
        .collect();
    SECRET.iter().any(|secret| plain.contains(secret))
}

/// Whether a string looks like a credential of a well-known shape.
fn looks_secret(text: &str) -> bool {
    const PREFIXES: [&str; 10] = [
        "sk-",
        "ghp_",
        "gho_",
        "ghs_",
        "github_pat_",
        "xoxb-",
        "xoxp-",
        "AKIA",
        "Bearer ",
        "Basic ",
    ];
    let text = text.trim();
    let jwt = text.starts_with("eyJ") && text.split('.').count() == 3;
    jwt || PREFIXES
        .iter()
        .any(|prefix| text.starts_with(prefix) && text.len() > prefix.len() + 8)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    #[test]
    fn facts_are_bounded_at_their_edges_and_never_show_a_secret() {
        let many: BTreeMap<String, String> = (0..=MAX_FACTS)
            .map(|n| (format!("f{n:02}"), "x".repeat(MAX_FACT_CHARS + n % 2)))
            .collect();
        let shown = facts(&many);
        assert_eq!(shown.len(), MAX_FACTS);
        assert_eq!(shown["f00"].chars().count(), MAX_FACT_CHARS);
        assert!(!shown["f00"].ends_with(CUT));
        assert_eq!(shown["f01"].chars().count(), MAX_FACT_CHARS);
        assert!(shown["f01"].ends_with(CUT));
        let secret = BTreeMap::from([
            ("apiToken".to_owned(), "plain".to_owned()),
            ("header".to_owned(), "Bearer abcdefghijklmnop".to_owned()),
            ("network".to_owned(), "off".to_owned()),
        ]);
        let shown = facts(&secret);
        assert_eq!(shown["apiToken"], REDACTED);
        assert_eq!(shown["header"], REDACTED);
        assert_eq!(shown["network"], "off");
    }

    fn args(value: Value) -> Map<String, Value> {
        match value {
            Value::Object(map) => map,
            other => panic!("not an object: {other}"),
        }
    }

    #[test]
    fn secrets_are_replaced_by_key_and_by_shape() {
        let shown = preview(&args(json!({
            "path": "notes.txt",
            "apiKey": "12345",
            "headers": {"Authorization": "whatever", "X-Trace": "abc"},
            "db_password": ["a", "b"],
            "body": "sk-abcdefghijklmnop",
            "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sig",
            "count": 3
        })));
        assert_eq!(
            shown,
            json!({
                "path": "notes.txt",
                "apiKey": REDACTED,
                "headers": {"Authorization": REDACTED, "X-Trace": "abc"},
                "db_password": REDACTED,
                "body": REDACTED,
                "jwt": REDACTED,
                "count": 3
            })
        );
        // Short words that merely start like a key are not secrets.
        assert_eq!(
            preview(&args(json!({"mode": "sk-1"}))),
            json!({"mode": "sk-1"})
        );
    }

    #[test]
    fn strings_are_cut_at_their_bound_and_deep_values_elided() {
        let exact = "a".repeat(MAX_STRING_CHARS);
        let over = "a".repeat(MAX_STRING_CHARS + 1);
        let shown = preview(&args(json!({"exact": exact, "over": over})));
        assert_eq!(shown["exact"], json!(exact));
        let cut = shown["over"].as_str().unwrap_or_default();
        assert_eq!(cut.chars().count(), MAX_STRING_CHARS);
        assert!(cut.ends_with('…'));
        let deep = preview(&args(json!({"a": {"b": {"c": {"d": {"e": 1}}}}})));
        assert_eq!(deep, json!({"a": {"b": {"c": {"d": "…"}}}}));
        let many: Map<String, Value> = (0..MAX_NODES + 5)
            .map(|n| (format!("k{n}"), json!(n)))
            .collect();
        let shown = preview(&many);
        let shown = shown.as_object().unwrap_or_else(|| panic!("an object"));
        assert_eq!(shown.len(), MAX_NODES + 1, "the bound, then one marker");
        assert_eq!(shown.get("…"), Some(&json!("…")));
    }

    fn json_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(Value::from),
            "\\PC{0,300}".prop_map(Value::from),
        ];
        leaf.prop_recursive(6, 400, 12, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..12).prop_map(Value::Array),
                proptest::collection::btree_map("\\PC{0,80}", inner, 0..12)
                    .prop_map(|map| Value::Object(map.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #[test]
        fn a_preview_is_bounded_and_never_shows_a_secret_key_s_value(
            map in proptest::collection::btree_map("\\PC{0,80}", json_value(), 0..20),
            secret in "[a-z]{9,20}",
        ) {
            let mut arguments: Map<String, Value> = map.into_iter().collect();
            arguments.insert("token".into(), Value::from(secret.clone()));
            let shown = preview(&arguments).to_string();
            prop_assert!(shown.chars().count() <= MAX_PREVIEW_CHARS, "{} chars", shown.chars().count());
            prop_assert!(!shown.contains(&secret) || arguments.iter().any(|(k, v)| k != "token" && v.to_string().contains(&secret)));
        }
    }
}
