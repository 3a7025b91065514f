//! What a small model reads instead of the full text: each tool's first sentence, its
//! schema cut to what it must or simply may send, and each prompt section's first
//! sentence. A small model reads every token of the prompt before it answers, and reads
//! long schemas as things to say.

use serde_json::{Map, Value};

/// Most bytes of a short description or prompt section; longer ones are cut at a word.
pub(crate) const SHORT_TEXT_LIMIT: usize = 240;

/// Keywords a model does not need to call a tool: names for Rust readers, formats the
/// bounds already say, examples.
const DROPPED_KEYWORDS: [&str; 4] = ["title", "format", "examples", "$schema"];

/// The first sentence of `text` (up to a `.`, `!` or `?` followed by a blank or the
/// end), at most [`SHORT_TEXT_LIMIT`] bytes, cut at the last blank before the bound.
pub(crate) fn first_sentence(text: &str) -> String {
    let text = text.trim();
    let bytes = text.as_bytes();
    let end = bytes
        .iter()
        .enumerate()
        .find(|&(at, byte)| {
            matches!(byte, b'.' | b'!' | b'?')
                && bytes.get(at + 1).is_none_or(u8::is_ascii_whitespace)
        })
        .map_or(text.len(), |(at, _)| at + 1);
    bounded(&text[..end])
}

/// `text` within [`SHORT_TEXT_LIMIT`] bytes: whole, or cut at the last blank before the
/// bound (at a character boundary when there is none) and ended with `…`.
fn bounded(text: &str) -> String {
    if text.len() <= SHORT_TEXT_LIMIT {
        return text.to_owned();
    }
    let room = SHORT_TEXT_LIMIT - '…'.len_utf8();
    let mut cut = room;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    let head = &text[..cut];
    let head = head
        .rfind(char::is_whitespace)
        .map_or(head, |at| &head[..at]);
    format!("{}…", head.trim_end())
}

/// The schema a small model is shown: required properties, and optional ones that are
/// plain strings (a `path` with its default); no titles, formats or examples, the
/// top-level description left to the tool's own, each property's description cut to its
/// first sentence. Whatever it admits the full schema admits too, so the tool's own
/// check is unchanged.
pub(crate) fn compact_schema(schema: &Value) -> Value {
    compact(schema, true)
}

fn compact(schema: &Value, top: bool) -> Value {
    let Value::Object(map) = schema else {
        return schema.clone();
    };
    let required: Vec<&str> = map
        .get("required")
        .and_then(Value::as_array)
        .map(|names| names.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut out = Map::new();
    for (keyword, value) in map {
        match keyword.as_str() {
            keyword if DROPPED_KEYWORDS.contains(&keyword) => {}
            "description" if top => {}
            "description" => {
                out.insert(
                    keyword.to_owned(),
                    value
                        .as_str()
                        .map_or_else(|| value.clone(), |text| Value::from(first_sentence(text))),
                );
            }
            "properties" => {
                let Value::Object(properties) = value else {
                    out.insert(keyword.to_owned(), value.clone());
                    continue;
                };
                let kept: Map<String, Value> = properties
                    .iter()
                    .filter(|(name, property)| {
                        required.contains(&name.as_str()) || plain_string(property)
                    })
                    .map(|(name, property)| (name.clone(), compact(property, false)))
                    .collect();
                out.insert(keyword.to_owned(), Value::Object(kept));
            }
            "items" => {
                out.insert(keyword.to_owned(), compact(value, false));
            }
            _ => {
                out.insert(keyword.to_owned(), value.clone());
            }
        }
    }
    Value::Object(out)
}

/// A property whose type is exactly `string`.
fn plain_string(property: &Value) -> bool {
    property.get("type").and_then(Value::as_str) == Some("string")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_first_sentence_ends_at_a_stop_followed_by_a_blank() {
        assert_eq!(
            first_sentence("Reads a file (at most 128 KiB). Paths route as for read."),
            "Reads a file (at most 128 KiB)."
        );
        assert_eq!(
            first_sentence("Lists v1.2 entries. More."),
            "Lists v1.2 entries."
        );
        assert_eq!(first_sentence("  No stop at all  "), "No stop at all");
        assert_eq!(first_sentence("Ends here!"), "Ends here!");
        assert_eq!(first_sentence(""), "");
    }

    #[test]
    fn a_long_sentence_is_cut_at_a_word_within_the_limit() {
        let at_limit = "a".repeat(SHORT_TEXT_LIMIT);
        assert_eq!(first_sentence(&at_limit), at_limit);
        let words = "word ".repeat(SHORT_TEXT_LIMIT / 5 + 1);
        let cut = first_sentence(&words);
        assert!(cut.len() <= SHORT_TEXT_LIMIT, "{}", cut.len());
        assert!(cut.ends_with("word…"), "{cut}");
        // One past the limit without a blank: cut at a character boundary.
        let wide = "é".repeat(SHORT_TEXT_LIMIT / 2 + 1);
        let cut = first_sentence(&wide);
        assert!(cut.len() <= SHORT_TEXT_LIMIT && cut.ends_with('…'), "{cut}");
    }

    #[test]
    fn the_compact_schema_keeps_what_must_or_simply_may_be_sent() {
        let schema = json!({
            "title": "ListInput",
            "description": "`list`: the entries of one directory.",
            "type": "object",
            "required": ["pattern"],
            "additionalProperties": false,
            "properties": {
                "pattern": {"type": "string", "description": "A glob. `*` does not cross `/`."},
                "path": {"type": "string", "default": ".", "description": "The directory."},
                "recursive": {"type": "boolean", "default": false},
                "limit": {"type": ["integer", "null"], "format": "uint64", "minimum": 1},
                "items": {"type": "array", "items": {"type": "object", "title": "Item",
                    "required": ["label"],
                    "properties": {"label": {"type": "string"}, "weight": {"type": "integer"}}}}
            }
        });
        assert_eq!(
            compact_schema(&schema),
            json!({
                "type": "object",
                "required": ["pattern"],
                "additionalProperties": false,
                "properties": {
                    "pattern": {"type": "string", "description": "A glob."},
                    "path": {"type": "string", "default": ".", "description": "The directory."}
                }
            })
        );
        let nested = json!({"type": "object", "required": ["items"], "properties": {
            "items": {"type": "array", "items": {"type": "object", "title": "Item",
                "required": ["label"],
                "properties": {"label": {"type": "string"}, "weight": {"type": "integer"}}}}}});
        assert_eq!(
            compact_schema(&nested)["properties"]["items"]["items"],
            json!({"type": "object", "required": ["label"],
                   "properties": {"label": {"type": "string"}}})
        );
    }
}
