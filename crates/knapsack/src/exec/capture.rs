//! Bounded capture of a command's output: the first and the last bytes kept, what lies
//! between counted, so an output flood costs a fixed amount of memory and still shows
//! how the command began and how it ended.

use std::collections::VecDeque;

use serde::Serialize;

/// One stream's output as a result carries it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Captured {
    /// The first bytes (lossy UTF-8: binary output shows as replacement characters).
    pub head: String,
    /// The last bytes after the cut, empty when nothing was cut.
    pub tail: String,
    /// Every byte the stream carried.
    pub total_bytes: u64,
    /// Bytes between `head` and `tail` that were not kept.
    pub cut_bytes: u64,
}

/// Collects one stream, keeping at most `limit` bytes: half from the start, half from
/// the end.
#[derive(Debug)]
pub(crate) struct Capture {
    head_limit: usize,
    tail_limit: usize,
    head: Vec<u8>,
    tail: VecDeque<u8>,
    total: u64,
}

impl Capture {
    /// A capture keeping at most `limit` bytes.
    pub(crate) fn new(limit: usize) -> Self {
        let head_limit = limit.div_ceil(2);
        Self {
            head_limit,
            tail_limit: limit - head_limit,
            head: Vec::new(),
            tail: VecDeque::new(),
            total: 0,
        }
    }

    /// Takes the next bytes of the stream.
    pub(crate) fn push(&mut self, mut bytes: &[u8]) {
        self.total += bytes.len() as u64;
        let room = self.head_limit - self.head.len();
        if room > 0 {
            let taken = room.min(bytes.len());
            self.head.extend_from_slice(&bytes[..taken]);
            bytes = &bytes[taken..];
        }
        if self.tail_limit == 0 || bytes.is_empty() {
            return;
        }
        if bytes.len() >= self.tail_limit {
            self.tail.clear();
            self.tail.extend(&bytes[bytes.len() - self.tail_limit..]);
            return;
        }
        let overflow = (self.tail.len() + bytes.len()).saturating_sub(self.tail_limit);
        self.tail.drain(..overflow);
        self.tail.extend(bytes);
    }

    /// The output as carried, once the stream ended.
    pub(crate) fn finish(self) -> Captured {
        let kept = (self.head.len() + self.tail.len()) as u64;
        let tail: Vec<u8> = self.tail.into_iter().collect();
        Captured {
            head: String::from_utf8_lossy(&self.head).into_owned(),
            tail: String::from_utf8_lossy(&tail).into_owned(),
            total_bytes: self.total,
            cut_bytes: self.total - kept,
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        /// However the stream is chunked: all of it when it fits, else exactly its
        /// first and last bytes and the count of the rest.
        #[test]
        fn keeps_the_first_and_last_bytes_and_counts_the_rest(
            data in proptest::collection::vec(any::<u8>(), 0..600),
            cuts in proptest::collection::vec(0usize..600, 0..8),
            limit in 0usize..300,
        ) {
            let mut capture = Capture::new(limit);
            let mut cuts: Vec<usize> = cuts.into_iter().map(|cut| cut.min(data.len())).collect();
            cuts.sort_unstable();
            let mut from = 0;
            for cut in cuts.into_iter().chain([data.len()]) {
                capture.push(&data[from..cut]);
                from = cut;
            }
            let (head_limit, tail_limit) = (limit.div_ceil(2), limit / 2);
            let head_len = head_limit.min(data.len());
            let tail_len = tail_limit.min(data.len() - head_len);
            let captured = capture.finish();
            prop_assert_eq!(captured.total_bytes, data.len() as u64);
            prop_assert_eq!(captured.cut_bytes, (data.len() - head_len - tail_len) as u64);
            prop_assert_eq!(captured.head, String::from_utf8_lossy(&data[..head_len]).into_owned());
            prop_assert_eq!(
                captured.tail,
                String::from_utf8_lossy(&data[data.len() - tail_len..]).into_owned()
            );
        }
    }
}
