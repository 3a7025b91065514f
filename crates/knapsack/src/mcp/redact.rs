//! Removing header values from text, in the forms a server or a library may repeat
//! them: as sent, escaped inside a quoted string (once or twice), percent-encoded in a
//! URL, and the credential after its scheme (`Bearer <this>`) on its own.
//!
//! [`SecretHeaders::scrub`](super::SecretHeaders::scrub) applies this to the messages
//! Knapsack builds; [`Redactions`] applies it to a host's log output, which also holds
//! what rmcp logs itself (a refused credential's reply body, a redirect's URL).

use std::borrow::Cow;
use std::io::Write;
use std::sync::{Arc, PoisonError, RwLock};

use super::server::SecretHeaders;

/// What replaces a secret.
pub(crate) const REDACTED: &str = "<redacted>";

/// A credential after its scheme is scrubbed on its own from this length on; shorter
/// parts would blank ordinary words of a log line.
const MIN_CREDENTIAL_CHARS: usize = 6;

/// Every form of `value` to scrub, longest first (so a whole value is replaced before
/// the credential inside it).
pub(crate) fn secret_forms(value: &str) -> Vec<String> {
    let mut bases = vec![value.to_owned()];
    if let Some((_scheme, credential)) = value.split_once(' ') {
        let credential = credential.trim();
        if credential.chars().count() >= MIN_CREDENTIAL_CHARS {
            bases.push(credential.to_owned());
        }
    }
    let mut forms = Vec::new();
    for base in bases {
        let escaped = escape(&base);
        forms.push(escape(&escaped));
        forms.push(escaped);
        forms.push(percent_encoded(&base, "%20", false));
        forms.push(percent_encoded(&base, "+", false));
        forms.push(percent_encoded(&base, "%20", true));
        forms.push(base);
    }
    forms.retain(|form| !form.is_empty());
    forms.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
    forms.dedup();
    forms
}

/// `text` with each of `forms` (longest first) replaced by [`REDACTED`].
pub(crate) fn scrub_forms<'a>(forms: &[String], text: &'a str) -> Cow<'a, str> {
    let mut text = Cow::Borrowed(text);
    for form in forms {
        if text.contains(form.as_str()) {
            text = Cow::Owned(text.replace(form.as_str(), REDACTED));
        }
    }
    text
}

/// As inside a quoted string of Rust's `Debug` or JSON: `"` and `\` escaped.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\t' => out.push_str("\\t"),
            other => out.push(other),
        }
    }
    out
}

/// Percent-encoded as in a URL: every byte but the unreserved ones, a space as `space`.
fn percent_encoded(text: &str, space: &str, lower: bool) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                out.push(char::from(byte));
            }
            b' ' => out.push_str(space),
            other if lower => out.push_str(&format!("%{other:02x}")),
            other => out.push_str(&format!("%{other:02X}")),
        }
    }
    out
}

/// The header values of every MCP server a host configured, to remove from its logs.
///
/// rmcp logs failures with the server's reply in them (a 401 body that repeats the
/// token, a redirect's URL); header values are never logged by Knapsack, but only the
/// host's log writer sees everything. Cheap to clone: clones share one set, so the
/// writer made at start-up scrubs servers added later.
#[derive(Clone, Default)]
pub struct Redactions {
    forms: Arc<RwLock<Vec<String>>>,
}

impl std::fmt::Debug for Redactions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Redactions").finish_non_exhaustive()
    }
}

impl Redactions {
    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds every value of `headers`, in all its forms.
    pub fn add(&self, headers: &SecretHeaders) {
        let mut forms = self.forms.write().unwrap_or_else(PoisonError::into_inner);
        forms.extend(headers.forms().iter().cloned());
        forms.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        forms.dedup();
    }

    /// `text` with every added value replaced by `<redacted>`.
    pub fn scrub<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let forms = self.forms.read().unwrap_or_else(PoisonError::into_inner);
        scrub_forms(&forms, text)
    }

    /// `inner`, with every write scrubbed first.
    pub fn writer<W: Write>(&self, inner: W) -> RedactingWriter<W> {
        RedactingWriter {
            inner,
            redactions: self.clone(),
        }
    }
}

/// A writer that scrubs [`Redactions`] from each write before passing it on.
///
/// Each call to `write` is scrubbed on its own, so it suits writers fed one whole
/// record per call, as `tracing-subscriber`'s `fmt` layer does (it formats an event,
/// then writes it with one `write_all`); a secret split across two writes is not seen.
#[derive(Debug)]
pub struct RedactingWriter<W> {
    inner: W,
    redactions: Redactions,
}

impl<W: Write> Write for RedactingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let text = String::from_utf8_lossy(buf);
        match self.redactions.scrub(&text) {
            // Nothing to remove: the bytes as given, even if they were not UTF-8.
            Cow::Borrowed(_) => self.inner.write_all(buf)?,
            Cow::Owned(scrubbed) => self.inner.write_all(scrubbed.as_bytes())?,
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn headers(value: &str) -> SecretHeaders {
        let mut headers = SecretHeaders::default();
        headers.insert("Authorization", value).unwrap();
        headers
    }

    #[test]
    fn every_form_a_server_or_library_repeats_is_scrubbed() {
        let redactions = Redactions::new();
        redactions.add(&headers("Bearer tok\"en/9+z"));
        for (given, expected) in [
            (
                "401: credential refused: Bearer tok\"en/9+z",
                "401: credential refused: <redacted>",
            ),
            // The credential alone, as a server may echo it.
            ("unknown token tok\"en/9+z.", "unknown token <redacted>."),
            // Inside a JSON body, and that body inside a Debug string.
            (
                r#"{"error":"Bearer tok\"en/9+z"}"#,
                r#"{"error":"<redacted>"}"#,
            ),
            (
                r#"Unexpected("{\"error\":\"Bearer tok\\\"en/9+z\"}")"#,
                r#"Unexpected("{\"error\":\"<redacted>\"}")"#,
            ),
            // In a redirect's URL, percent-encoded either way.
            (
                "url (http://x/?t=Bearer%20tok%22en%2F9%2Bz)",
                "url (http://x/?t=<redacted>)",
            ),
            (
                "url (http://x/?t=tok%22en%2f9%2bz)",
                "url (http://x/?t=<redacted>)",
            ),
            (
                "url (http://x/?t=Bearer+tok%22en%2F9%2Bz)",
                "url (http://x/?t=<redacted>)",
            ),
            ("nothing secret here", "nothing secret here"),
        ] {
            assert_eq!(redactions.scrub(given), expected, "{given}");
        }
    }

    #[test]
    fn a_short_credential_is_scrubbed_only_with_its_scheme() {
        let redactions = Redactions::new();
        redactions.add(&headers("Key abc"));
        assert_eq!(
            redactions.scrub("Key abc, then abc"),
            "<redacted>, then abc"
        );
    }

    #[test]
    fn the_writer_scrubs_each_record_and_passes_the_rest_unchanged() {
        let redactions = Redactions::new();
        let mut out = Vec::new();
        {
            let mut writer = redactions.writer(&mut out);
            writer.write_all(b"before any server\n").unwrap();
            // Servers added after the writer was made are scrubbed too.
            redactions.add(&headers("Bearer s3cr3t-value"));
            writer.write_all(b"refused s3cr3t-value\n").unwrap();
            writer.write_all(&[0xff, b'\n']).unwrap();
        }
        assert_eq!(out, b"before any server\nrefused <redacted>\n\xff\n");
    }
}
