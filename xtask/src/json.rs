//! A small JSON reader, enough for the output of `cargo metadata`.
//!
//! xtask stays free of dependencies so that `cargo xtask` builds in a second on a
//! fresh checkout. Reading is all it needs: values keep numbers as their source
//! text and objects keep their keys in order.

/// One JSON value.
#[derive(Clone, Debug, PartialEq)]
pub enum Json {
    /// `null`.
    Null,
    /// `true` or `false`.
    Bool(bool),
    /// A number, kept as it was written.
    Number(String),
    /// A string, with its escapes decoded.
    String(String),
    /// An array.
    Array(Vec<Json>),
    /// An object, its members in source order.
    Object(Vec<(String, Json)>),
}

impl Json {
    /// Parses one JSON document; trailing whitespace is allowed, anything else is not.
    pub fn parse(text: &str) -> Result<Json, String> {
        let mut reader = Reader { text, at: 0 };
        let value = reader.value()?;
        reader.skip_whitespace();
        if reader.at == text.len() {
            Ok(value)
        } else {
            Err(reader.error("trailing characters"))
        }
    }

    /// The member `key` of an object; `None` for a missing key or a non-object.
    pub fn get(&self, key: &str) -> Option<&Json> {
        match self {
            Json::Object(members) => members
                .iter()
                .find(|(name, _)| name == key)
                .map(|(_, value)| value),
            _ => None,
        }
    }

    /// The text of a string value.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Json::String(text) => Some(text),
            _ => None,
        }
    }

    /// The items of an array value.
    pub fn as_array(&self) -> Option<&[Json]> {
        match self {
            Json::Array(items) => Some(items),
            _ => None,
        }
    }
}

struct Reader<'a> {
    text: &'a str,
    at: usize,
}

impl Reader<'_> {
    fn error(&self, what: &str) -> String {
        format!("invalid JSON at byte {}: {what}", self.at)
    }

    fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.at).copied()
    }

    fn skip_whitespace(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.at += 1;
        }
    }

    fn expect(&mut self, byte: u8) -> Result<(), String> {
        self.skip_whitespace();
        if self.peek() == Some(byte) {
            self.at += 1;
            Ok(())
        } else {
            Err(self.error(&format!("expected `{}`", char::from(byte))))
        }
    }

    fn keyword(&mut self, word: &str, value: Json) -> Result<Json, String> {
        if self.text[self.at..].starts_with(word) {
            self.at += word.len();
            Ok(value)
        } else {
            Err(self.error("unknown keyword"))
        }
    }

    fn value(&mut self) -> Result<Json, String> {
        self.skip_whitespace();
        match self.peek() {
            Some(b'{') => self.object(),
            Some(b'[') => self.array(),
            Some(b'"') => self.string().map(Json::String),
            Some(b't') => self.keyword("true", Json::Bool(true)),
            Some(b'f') => self.keyword("false", Json::Bool(false)),
            Some(b'n') => self.keyword("null", Json::Null),
            Some(b'-' | b'0'..=b'9') => Ok(self.number()),
            Some(_) => Err(self.error("unexpected character")),
            None => Err(self.error("unexpected end")),
        }
    }

    fn object(&mut self) -> Result<Json, String> {
        self.expect(b'{')?;
        let mut members = Vec::new();
        self.skip_whitespace();
        if self.peek() == Some(b'}') {
            self.at += 1;
            return Ok(Json::Object(members));
        }
        loop {
            self.skip_whitespace();
            let key = self.string()?;
            self.expect(b':')?;
            members.push((key, self.value()?));
            self.skip_whitespace();
            match self.peek() {
                Some(b',') => self.at += 1,
                Some(b'}') => {
                    self.at += 1;
                    return Ok(Json::Object(members));
                }
                _ => return Err(self.error("expected `,` or `}`")),
            }
        }
    }

    fn array(&mut self) -> Result<Json, String> {
        self.expect(b'[')?;
        let mut items = Vec::new();
        self.skip_whitespace();
        if self.peek() == Some(b']') {
            self.at += 1;
            return Ok(Json::Array(items));
        }
        loop {
            items.push(self.value()?);
            self.skip_whitespace();
            match self.peek() {
                Some(b',') => self.at += 1,
                Some(b']') => {
                    self.at += 1;
                    return Ok(Json::Array(items));
                }
                _ => return Err(self.error("expected `,` or `]`")),
            }
        }
    }

    fn number(&mut self) -> Json {
        let start = self.at;
        while matches!(
            self.peek(),
            Some(b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9')
        ) {
            self.at += 1;
        }
        Json::Number(self.text[start..self.at].to_owned())
    }

    fn string(&mut self) -> Result<String, String> {
        if self.peek() != Some(b'"') {
            return Err(self.error("expected a string"));
        }
        self.at += 1;
        let mut out = String::new();
        loop {
            // `"` and `\` are ASCII, so every slice below ends on a character boundary.
            let rest = &self.text[self.at..];
            let Some(stop) = rest.find(['"', '\\']) else {
                return Err(self.error("unterminated string"));
            };
            out.push_str(&rest[..stop]);
            self.at += stop + 1;
            if rest.as_bytes()[stop] == b'"' {
                return Ok(out);
            }
            let escape = self
                .peek()
                .ok_or_else(|| self.error("unterminated escape"))?;
            self.at += 1;
            match escape {
                b'"' => out.push('"'),
                b'\\' => out.push('\\'),
                b'/' => out.push('/'),
                b'b' => out.push('\u{8}'),
                b'f' => out.push('\u{c}'),
                b'n' => out.push('\n'),
                b'r' => out.push('\r'),
                b't' => out.push('\t'),
                b'u' => out.push(self.unicode_escape()?),
                _ => return Err(self.error("unknown escape")),
            }
        }
    }

    /// Decodes the `XXXX` after `\u`, and the low half when it is a surrogate pair.
    fn unicode_escape(&mut self) -> Result<char, String> {
        let high = self.hex4()?;
        let code = if (0xD800..0xDC00).contains(&high) && self.text[self.at..].starts_with("\\u") {
            self.at += 2;
            let low = self.hex4()?;
            0x10000 + ((high - 0xD800) << 10) + (low.wrapping_sub(0xDC00) & 0x3FF)
        } else {
            high
        };
        Ok(char::from_u32(code).unwrap_or(char::REPLACEMENT_CHARACTER))
    }

    fn hex4(&mut self) -> Result<u32, String> {
        let digits = self
            .text
            .get(self.at..self.at + 4)
            .ok_or_else(|| self.error("short \\u"))?;
        let code = u32::from_str_radix(digits, 16).map_err(|_| self.error("bad \\u escape"))?;
        self.at += 4;
        Ok(code)
    }
}

#[cfg(test)]
mod tests {
    use super::Json;

    #[test]
    fn reads_nested_values_in_order() {
        let text = r#" {"a": [1, -2.5e3, true, null], "b": {"c": "d"}, "e": []} "#;
        let expected = Json::Object(vec![
            (
                "a".to_owned(),
                Json::Array(vec![
                    Json::Number("1".to_owned()),
                    Json::Number("-2.5e3".to_owned()),
                    Json::Bool(true),
                    Json::Null,
                ]),
            ),
            (
                "b".to_owned(),
                Json::Object(vec![("c".to_owned(), Json::String("d".to_owned()))]),
            ),
            ("e".to_owned(), Json::Array(vec![])),
        ]);
        assert_eq!(Json::parse(text), Ok(expected));
    }

    #[test]
    fn decodes_string_escapes() {
        let text = r#""a\"b\\c\/d\n\u00e9\ud83c\udf44 ü""#;
        assert_eq!(
            Json::parse(text),
            Ok(Json::String("a\"b\\c/d\né🍄 ü".to_owned()))
        );
    }

    #[test]
    fn rejects_malformed_documents() {
        for text in [
            "",
            "{",
            r#"{"a" 1}"#,
            "[1,]",
            r#""open"#,
            "nul",
            "{} x",
            r#""\q""#,
        ] {
            assert!(Json::parse(text).is_err(), "accepted {text:?}");
        }
    }
}
