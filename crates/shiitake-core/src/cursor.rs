//! The opaque cursor: a lineage epoch and a sequence, `v1.<epoch>.<sequence>`.

use shiitake_protocol::Cursor;

/// A decoded position in one Session's order on one lineage.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Position {
    /// The lineage epoch; a branch starts a new one.
    pub epoch: u64,
    /// The last committed sequence this position covers.
    pub sequence: u64,
}

impl Position {
    /// The wire form.
    #[allow(clippy::expect_used)]
    pub fn encode(self) -> Cursor {
        // Written digit by digit rather than with `format!`: every frame carries one.
        let mut text = String::with_capacity(3 + 20 + 1 + 20);
        text.push_str("v1.");
        push_decimal(&mut text, self.epoch);
        text.push('.');
        push_decimal(&mut text, self.sequence);
        // Infallible: at most 3 + 20 + 1 + 20 visible ASCII bytes.
        Cursor::new(text).expect("cursors are valid")
    }

    /// Reads a cursor minted by [`encode`](Self::encode); `None` for anything else.
    pub fn decode(cursor: &Cursor) -> Option<Self> {
        let mut parts = cursor.as_str().split('.');
        let (Some("v1"), Some(epoch), Some(sequence), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return None;
        };
        Some(Self {
            epoch: epoch.parse().ok()?,
            sequence: sequence.parse().ok()?,
        })
    }
}

/// Appends `n` in decimal.
fn push_decimal(text: &mut String, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut start = digits.len();
    loop {
        start -= 1;
        digits[start] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    text.extend(digits[start..].iter().map(|&digit| char::from(digit)));
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn decode_inverts_encode(epoch in any::<u64>(), sequence in any::<u64>()) {
            let position = Position { epoch, sequence };
            prop_assert_eq!(Position::decode(&position.encode()), Some(position));
        }

        #[test]
        fn the_wire_form_is_v1_epoch_sequence(epoch in any::<u64>(), sequence in any::<u64>()) {
            let cursor = Position { epoch, sequence }.encode();
            prop_assert_eq!(cursor.as_str(), format!("v1.{epoch}.{sequence}"));
        }

        #[test]
        fn foreign_cursors_do_not_decode(text in "[!-~]{1,40}") {
            let cursor = Cursor::new(text.clone()).unwrap();
            if let Some(position) = Position::decode(&cursor) {
                let encoded = position.encode();
                prop_assert_eq!(encoded.as_str(), text.as_str());
            }
        }
    }
}
