//! A call's fingerprint: its tool and its whole arguments, hashed, so a parked call a
//! person allowed once matches the model's next identical call and nothing else.
//!
//! The arguments are written canonically (object keys sorted, at every depth) and
//! hashed with FNV-1a 64, written out here so the fingerprint stays the same across
//! builds and releases (it is stored). It is a match key, not a secret: a collision
//! could only let one other call of the same tool through once.

use serde_json::{Map, Value};

/// `<16 hex digits>` for `tool` with `arguments`.
pub fn fingerprint(tool: &str, arguments: &Map<String, Value>) -> String {
    let mut text = String::new();
    text.push_str(tool);
    text.push('\n');
    canonical(&Value::Object(arguments.clone()), &mut text);
    format!("{:016x}", fnv1a(text.as_bytes()))
}

/// `<16 hex digits>` for `text`: a short, stable key for a long text (a command a
/// Session allowed).
pub fn of_text(text: &str) -> String {
    format!("{:016x}", fnv1a(text.as_bytes()))
}

fn fnv1a(bytes: &[u8]) -> u64 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    bytes.iter().fold(OFFSET, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(PRIME)
    })
}

/// `value` as JSON with every object's keys in order.
fn canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (n, key) in keys.into_iter().enumerate() {
                if n > 0 {
                    out.push(',');
                }
                out.push_str(&Value::from(key.as_str()).to_string());
                out.push(':');
                if let Some(item) = map.get(key) {
                    canonical(item, out);
                }
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (n, item) in items.iter().enumerate() {
                if n > 0 {
                    out.push(',');
                }
                canonical(item, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn map(value: Value) -> Map<String, Value> {
        match value {
            Value::Object(map) => map,
            _ => Map::new(),
        }
    }

    #[test]
    fn key_order_does_not_count_and_anything_else_does() {
        let a = fingerprint("t", &map(json!({"x": 1, "y": {"b": 2, "a": [1, 2]}})));
        let b = fingerprint("t", &map(json!({"y": {"a": [1, 2], "b": 2}, "x": 1})));
        assert_eq!(a, b);
        assert_ne!(
            a,
            fingerprint("u", &map(json!({"x": 1, "y": {"b": 2, "a": [1, 2]}})))
        );
        assert_ne!(
            a,
            fingerprint("t", &map(json!({"x": 1, "y": {"b": 2, "a": [2, 1]}})))
        );
        assert_eq!(a.len(), 16);
        // Stored, so stable: FNV-1a 64 of "t\n{}".
        assert_eq!(
            fingerprint("t", &Map::new()),
            format!("{:016x}", fnv1a(b"t\n{}"))
        );
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
    }
}
