//! The label list the `/answer` flow reads for several selections: comma-separated,
//! a label holding a comma or a double quote written in quotes.

/// Why a label list did not parse.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LabelsError {
    /// A quoted label is not closed.
    #[error("a quoted label is not closed")]
    Unclosed,
    /// Something other than a comma follows a closing quote.
    #[error("expected a comma after the quoted label {0:?}")]
    AfterQuote(String),
}

/// Writes labels as the `/answer` flow expects several selections: comma-separated,
/// a label holding a comma or a double quote written in quotes with `\"` and `\\` escapes.
pub fn format_labels<S: AsRef<str>>(labels: &[S]) -> String {
    labels
        .iter()
        .map(|label| {
            let label = label.as_ref();
            if label.contains([',', '"', '\\']) || label.trim() != label {
                let escaped = label.replace('\\', "\\\\").replace('"', "\\\"");
                format!("\"{escaped}\"")
            } else {
                label.to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Reads a label list written by [`format_labels`] (or typed by a person): items
/// separated by commas, trimmed, optionally in double quotes; empty items are dropped.
pub fn parse_labels(text: &str) -> Result<Vec<String>, LabelsError> {
    let mut labels = Vec::new();
    let mut chars = text.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        match chars.peek() {
            None => return Ok(labels),
            Some('"') => {
                chars.next();
                let mut label = String::new();
                loop {
                    match chars.next() {
                        None => return Err(LabelsError::Unclosed),
                        Some('\\') => match chars.next() {
                            Some(escaped) => label.push(escaped),
                            None => return Err(LabelsError::Unclosed),
                        },
                        Some('"') => break,
                        Some(other) => label.push(other),
                    }
                }
                while chars.peek().is_some_and(|c| c.is_whitespace()) {
                    chars.next();
                }
                match chars.next() {
                    None | Some(',') => labels.push(label),
                    Some(_) => return Err(LabelsError::AfterQuote(label)),
                }
            }
            Some(_) => {
                let mut label = String::new();
                for c in chars.by_ref() {
                    if c == ',' {
                        break;
                    }
                    label.push(c);
                }
                let label = label.trim();
                if !label.is_empty() {
                    labels.push(label.to_owned());
                }
            }
        }
    }
}

/// Reads an answer's `selected`: a list of labels, or one label on its own (the natural
/// shape for a single-select question). Lists stay the canonical form; a lone string is
/// read as a list of one, so clients that send lists keep working.
pub(crate) fn one_or_more<'de, D>(deserializer: D) -> Result<Vec<String>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    struct Labels;

    impl<'de> serde::de::Visitor<'de> for Labels {
        type Value = Vec<String>;

        fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            formatter.write_str("a label (a string) or a list of labels")
        }

        fn visit_str<E: serde::de::Error>(self, label: &str) -> Result<Self::Value, E> {
            Ok(vec![label.to_owned()])
        }

        fn visit_seq<A: serde::de::SeqAccess<'de>>(
            self,
            mut seq: A,
        ) -> Result<Self::Value, A::Error> {
            let mut labels = Vec::new();
            while let Some(label) = seq.next_element::<String>()? {
                labels.push(label);
            }
            Ok(labels)
        }
    }

    deserializer.deserialize_any(Labels)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn labels_with_commas_and_quotes_are_quoted() {
        let labels = ["Plain", "Red, green", "Say \"hi\"", " spaced "];
        let written = format_labels(&labels);
        assert_eq!(written, r#"Plain, "Red, green", "Say \"hi\"", " spaced ""#);
        assert_eq!(parse_labels(&written).unwrap(), labels);
        assert_eq!(parse_labels("a,, b ,").unwrap(), ["a", "b"]);
        assert_eq!(parse_labels("\"open").unwrap_err(), LabelsError::Unclosed);
        assert!(matches!(
            parse_labels("\"a\" b"),
            Err(LabelsError::AfterQuote(_))
        ));
    }

    proptest! {
        #[test]
        fn labels_round_trip(labels in proptest::collection::vec("[ -~é,\"\\\\]{1,12}", 0..6)) {
            let labels: Vec<String> = labels;
            prop_assert_eq!(parse_labels(&format_labels(&labels)).unwrap(), labels);
        }

        #[test]
        fn parsing_never_panics(text in "\\PC{0,40}") {
            let _ = parse_labels(&text);
        }
    }
}
