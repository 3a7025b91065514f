//! The text of a tenant token, a login code or a browser session: `<id>.<secret>`.
//!
//! The id (16 lowercase hex digits, 8 random bytes) is public: it keys the row and
//! names a token in lists. The secret (64 lowercase hex digits, 32 random bytes) is
//! shown once and never stored; the row keeps the SHA-256 digest of its text, and a
//! presented secret is hashed and compared with it in constant time.

use sha2::{Digest, Sha256};

use super::RegistryError;

/// A credential's text split in its two halves; see the module documentation.
#[derive(Clone, PartialEq, Eq)]
pub struct Credential {
    id: String,
    secret: String,
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credential")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

/// Whether `part` is exactly `len` lowercase hexadecimal digits.
fn lowercase_hex(part: &str, len: usize) -> bool {
    part.len() == len
        && part
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

fn random_hex(bytes: usize) -> Result<String, RegistryError> {
    let mut buffer = vec![0u8; bytes];
    getrandom::fill(&mut buffer).map_err(|error| RegistryError::Random(error.to_string()))?;
    Ok(buffer.iter().map(|b| format!("{b:02x}")).collect())
}

impl Credential {
    /// Digits in the id.
    pub const ID_LEN: usize = 16;
    /// Digits in the secret.
    pub const SECRET_LEN: usize = 64;

    /// Reads `<id>.<secret>` with exactly [`Self::ID_LEN`] and [`Self::SECRET_LEN`]
    /// lowercase hex digits; `None` for anything else, so a malformed credential
    /// costs no database round trip.
    pub fn parse(text: &str) -> Option<Self> {
        let (id, secret) = text.split_once('.')?;
        (lowercase_hex(id, Self::ID_LEN) && lowercase_hex(secret, Self::SECRET_LEN)).then(|| Self {
            id: id.to_owned(),
            secret: secret.to_owned(),
        })
    }

    /// A fresh credential from the system's randomness.
    pub(crate) fn generate() -> Result<Self, RegistryError> {
        Ok(Self {
            id: random_hex(Self::ID_LEN / 2)?,
            secret: random_hex(Self::SECRET_LEN / 2)?,
        })
    }

    /// The public half, which keys the row.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The whole text, `<id>.<secret>`, as handed to its holder.
    pub fn text(&self) -> String {
        format!("{}.{}", self.id, self.secret)
    }

    /// What the row keeps: the SHA-256 digest of the secret's text.
    pub(crate) fn digest(&self) -> Vec<u8> {
        Sha256::digest(self.secret.as_bytes()).to_vec()
    }

    /// Whether `stored` is this secret's digest, in time that does not depend on
    /// where the two first differ.
    pub(crate) fn matches(&self, stored: &[u8]) -> bool {
        constant_time_eq(stored, &self.digest())
    }
}

/// Whether two byte strings are equal, in time that depends only on `expected`'s length.
fn constant_time_eq(expected: &[u8], given: &[u8]) -> bool {
    let mut difference = expected.len() ^ given.len();
    for (at, byte) in expected.iter().enumerate() {
        let other = given.get(at).copied().unwrap_or(0);
        difference |= usize::from(byte ^ other);
    }
    difference == 0
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn a_generated_credential_parses_back_and_matches_only_its_digest() {
        let credential = Credential::generate().unwrap();
        let text = credential.text();
        assert_eq!(text.len(), Credential::ID_LEN + 1 + Credential::SECRET_LEN);
        assert_eq!(Credential::parse(&text), Some(credential.clone()));
        let digest = credential.digest();
        assert_eq!(digest.len(), 32);
        assert!(credential.matches(&digest));
        let other = Credential::generate().unwrap();
        assert!(!other.matches(&digest));
        assert!(!credential.matches(&digest[..31]));
        assert!(!format!("{credential:?}").contains(&credential.secret));
    }

    #[test]
    fn lengths_are_exact_and_digits_lowercase() {
        let id = "0123456789abcdef";
        let secret = "ab".repeat(32);
        assert!(Credential::parse(&format!("{id}.{secret}")).is_some());
        for bad in [
            format!("{id}.{}", &secret[1..]),
            format!("{id}.{secret}0"),
            format!("{}.{secret}", &id[1..]),
            format!("{id}0.{secret}"),
            format!("{}.{secret}", id.to_uppercase()),
            format!("{id}.{}", secret.replace('a', "g")),
            format!("{id}.{secret}.{secret}"),
            format!("{id}{secret}"),
            String::new(),
        ] {
            assert_eq!(Credential::parse(&bad), None, "{bad:?}");
        }
    }
}
