//! Messages as both stores keep them: zstd against a fixed dictionary.
//!
//! A lineage message is mostly its schema (`"role"`, `"usage"`, `"cacheRead"`, ...), which a
//! message of a few hundred bytes cannot compress on its own. Each stored message is
//! compressed against a dictionary of the message schema, so the schema costs a few bytes
//! and only the values are stored (docs/benchmarks.md, "bytes per run").
//!
//! The first byte says how a stored message is encoded:
//! - `{`: plain JSON, as every release before the dictionary wrote it, and as a message is
//!   written when compressing would not make it smaller;
//! - `0x01`: a zstd frame against `messages-v1.dict` (written until v2 came);
//! - `0x02`: a zstd frame against `messages-v2.dict`, what [`pack`] writes now.
//!
//! v2 is v1's content with zstd's entropy tables in front (Huffman for literals, FSE for
//! the sequences), counted from made-up messages of every shape the schema has: v1 has
//! none, so a message packed against it built its tables again, which was half of what
//! zstd cost a committed message (docs/benchmarks.md, "CPU per committed message").
//! `cargo xtask dictionary` makes it (from `xtask/dictionary/`: the samples `samples.py`
//! writes, finalised by `finalize.c` against the zstd that zstd-sys vendors), and
//! `--check` shows that it makes these bytes again.
//!
//! A dictionary is never edited once released: a new one takes a new tag, and the old one
//! stays to read what it wrote.

use std::cell::RefCell;
use std::io::Cursor;
use std::sync::LazyLock;

use shiitake_protocol::Message;
use zstd::bulk::{Compressor, Decompressor};
use zstd::dict::{DecoderDictionary, EncoderDictionary};

use shiitake_core::store::StoreError;

/// The tag of a message compressed against `messages-v1.dict`.
const DICTIONARY_V1: u8 = 1;
/// The tag of a message compressed against `messages-v2.dict`.
const DICTIONARY_V2: u8 = 2;
/// The first byte of a message stored as plain JSON (an object).
const PLAIN_JSON: u8 = b'{';
/// zstd's level: level 3 (its default) compresses these messages within a few percent of
/// level 9 at half the time.
const LEVEL: i32 = 3;
/// The largest message a stored frame may expand to. A frame claiming more is corrupt:
/// nothing the runner commits comes near it.
const MAX_UNPACKED: usize = 64 << 20;
/// The largest JSON buffer a thread keeps for the next message: one of a large tool
/// result is let go once it is packed.
const KEPT_JSON: usize = 64 << 10;

const V1_BYTES: &[u8] = include_bytes!("messages-v1.dict");
const V2_BYTES: &[u8] = include_bytes!("messages-v2.dict");
static V2_ENCODER: LazyLock<EncoderDictionary<'static>> =
    LazyLock::new(|| EncoderDictionary::copy(V2_BYTES, LEVEL));
static V1_DECODER: LazyLock<DecoderDictionary<'static>> =
    LazyLock::new(|| DecoderDictionary::copy(V1_BYTES));
static V2_DECODER: LazyLock<DecoderDictionary<'static>> =
    LazyLock::new(|| DecoderDictionary::copy(V2_BYTES));

thread_local! {
    // A compression context is costly to make (it sizes its tables); each thread that
    // packs keeps one, and the buffer its messages are serialised into: the tasks that
    // commit to SQLite, and PostgreSQL's writer task.
    static PACKER: RefCell<Packer> = const {
        RefCell::new(Packer {
            compressor: None,
            json: Vec::new(),
        })
    };
    static DECOMPRESSOR: RefCell<Option<Decompressor<'static>>> = const { RefCell::new(None) };
}

/// One thread's compression context and JSON buffer.
struct Packer {
    compressor: Option<Compressor<'static>>,
    json: Vec<u8>,
}

impl Packer {
    fn pack(&mut self, message: &Message) -> Result<Vec<u8>, StoreError> {
        self.json.clear();
        let packed = serde_json::to_writer(&mut self.json, message)
            .map_err(|error| StoreError::Corrupt(format!("message: {error}")))
            .map(|()| self.compress());
        if self.json.capacity() > KEPT_JSON {
            self.json = Vec::new();
        }
        packed
    }

    /// The frame of the JSON in the buffer after its tag, or that JSON when compressing
    /// fails or would not make it smaller.
    fn compress(&mut self) -> Vec<u8> {
        let json = &self.json;
        let compressor = match &mut self.compressor {
            Some(compressor) => compressor,
            slot => match new_compressor() {
                Ok(compressor) => slot.insert(compressor),
                // Compression failing is not a reason to lose the message: JSON always reads.
                Err(_) => return json.clone(),
            },
        };
        // The frame goes straight after its tag, into the vector that is stored.
        let mut packed = Vec::with_capacity(1 + zstd::zstd_safe::compress_bound(json.len()));
        packed.push(DICTIONARY_V2);
        let mut frame = Cursor::new(packed);
        frame.set_position(1);
        match compressor.compress_to_buffer(json, &mut frame) {
            Ok(size) if size + 1 < json.len() => frame.into_inner(),
            Ok(_) | Err(_) => json.clone(),
        }
    }
}

/// The stored bytes of a message: compressed when that is smaller, else its JSON.
///
/// Both stores call it when they write an entry; a store never sees anything else.
pub fn pack(message: &Message) -> Result<Vec<u8>, StoreError> {
    PACKER.with(|cell| cell.borrow_mut().pack(message))
}

/// Reads a stored message back, whichever way it was stored; bytes that are not a
/// message are [`StoreError::Corrupt`].
pub fn unpack(stored: &[u8]) -> Result<Message, StoreError> {
    let dictionary = match stored.first() {
        Some(&PLAIN_JSON) => return parse(stored),
        Some(&DICTIONARY_V1) => &*V1_DECODER,
        Some(&DICTIONARY_V2) => &*V2_DECODER,
        Some(other) => return Err(corrupt(&format!("unknown encoding {other:#04x}"))),
        None => return Err(corrupt("empty")),
    };
    let frame = &stored[1..];
    let size = zstd::zstd_safe::get_frame_content_size(frame)
        .ok()
        .flatten()
        .ok_or_else(|| corrupt("a compressed message without its size"))?;
    let size = usize::try_from(size)
        .ok()
        .filter(|size| *size <= MAX_UNPACKED)
        .ok_or_else(|| corrupt(&format!("a compressed message of {size} bytes")))?;
    let json = DECOMPRESSOR.with(|cell| {
        let mut slot = cell.borrow_mut();
        let decompressor = match slot.as_mut() {
            Some(decompressor) => decompressor,
            None => slot.insert(Decompressor::new()?),
        };
        decompressor.set_prepared_dictionary(dictionary)?;
        decompressor.decompress(frame, size)
    });
    parse(&json.map_err(|error| corrupt(&error.to_string()))?)
}

fn new_compressor() -> std::io::Result<Compressor<'static>> {
    let mut compressor = Compressor::with_prepared_dictionary(&V2_ENCODER)?;
    // The tag already names the dictionary. The frame's checksum (4 bytes) makes a
    // damaged message read as Corrupt instead of as different words; frames without
    // one (the flag is in each frame's header) still read.
    compressor.include_dictid(false)?;
    compressor.include_checksum(true)?;
    compressor.include_contentsize(true)?;
    Ok(compressor)
}

fn parse(json: &[u8]) -> Result<Message, StoreError> {
    serde_json::from_slice(json).map_err(|error| corrupt(&error.to_string()))
}

fn corrupt(what: &str) -> StoreError {
    StoreError::Corrupt(format!("message: {what}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use shiitake_protocol::message::{UserContent, UserMessage};

    fn user(text: String, timestamp: u64) -> Message {
        Message::User(UserMessage {
            content: UserContent::Text(text),
            timestamp,
            extra: Default::default(),
        })
    }

    fn tool_result(text: String, is_error: bool) -> Message {
        serde_json::from_value(serde_json::json!({
            "role": "toolResult", "toolCallId": "call_1", "toolName": "files__read",
            "content": [{"type": "text", "text": text}], "isError": is_error, "timestamp": 7
        }))
        .unwrap()
    }

    /// `message` as the release before v2 packed it: against v1, with a checksum.
    fn pack_v1(message: &Message) -> Vec<u8> {
        let mut compressor = Compressor::with_dictionary(LEVEL, V1_BYTES).unwrap();
        compressor.include_dictid(false).unwrap();
        compressor.include_checksum(true).unwrap();
        compressor.include_contentsize(true).unwrap();
        let mut packed = vec![DICTIONARY_V1];
        packed.extend(
            compressor
                .compress(&serde_json::to_vec(message).unwrap())
                .unwrap(),
        );
        packed
    }

    #[test]
    fn a_typical_message_is_stored_in_under_half_its_json() {
        let message: Message = serde_json::from_value(serde_json::json!({
            "role": "assistant",
            "content": [{"type": "toolCall", "id": "call_25_1", "name": "files__read",
                         "arguments": {"path": "src/lib.rs"}}],
            "api": "openai-completions", "provider": "openai", "model": "gpt-4.1",
            "usage": {"input": 34, "output": 6, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 40,
                      "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}},
            "stopReason": "toolUse", "timestamp": 1796078883273u64
        }))
        .unwrap();
        let json = serde_json::to_vec(&message).unwrap();
        let packed = pack(&message).unwrap();
        assert_eq!(packed[0], DICTIONARY_V2);
        assert!(
            packed.len() * 2 < json.len(),
            "{} of {}",
            packed.len(),
            json.len()
        );
        assert_eq!(unpack(&packed).unwrap(), message);
    }

    /// A tool result packed against v1 when frames carried no checksum yet.
    const PACKED_BY_V1: [u8; 61] = [
        0x01, 0x28, 0xb5, 0x2f, 0xfd, 0x20, 0xb9, 0x9d, 0x01, 0x00, 0xb0, 0x31, 0x72, 0x6e, 0x6f,
        0x74, 0x65, 0x73, 0x2e, 0x74, 0x62, 0x75, 0x79, 0x20, 0x6d, 0x69, 0x6c, 0x6b, 0x5c, 0x5c,
        0x6e, 0x37, 0x7d, 0x09, 0x00, 0xf0, 0x97, 0xf4, 0xf6, 0xc5, 0x01, 0x2c, 0x23, 0x5f, 0x1c,
        0x10, 0x33, 0x09, 0xa6, 0x6f, 0xdd, 0x1a, 0xd9, 0x8d, 0x82, 0x52, 0xbe, 0xd8, 0x25, 0x0d,
        0x02,
    ];

    /// The same tool result packed against v2 (with a checksum), when v2 came.
    const PACKED_BY_V2: [u8; 58] = [
        0x02, 0x28, 0xb5, 0x2f, 0xfd, 0x24, 0xb9, 0x65, 0x01, 0x00, 0x63, 0x01, 0x04, 0x19, 0x68,
        0x27, 0x93, 0x4a, 0xa5, 0x56, 0x63, 0xae, 0x29, 0x37, 0xef, 0xf9, 0x5a, 0xdc, 0x02, 0x09,
        0xfc, 0xf0, 0xaf, 0xdb, 0xc3, 0xbe, 0x2b, 0xf9, 0x1f, 0x31, 0xef, 0x6a, 0xca, 0x58, 0x83,
        0xdc, 0x0a, 0x3a, 0x29, 0x76, 0x17, 0x85, 0x19, 0x01, 0x86, 0xf7, 0x67, 0x93,
    ];

    #[test]
    fn bytes_written_by_each_dictionary_still_read() {
        // Packed once by each release and kept: if a dictionary changes, or zstd reads
        // its frames differently, stored Sessions would no longer read.
        for stored in [&PACKED_BY_V1[..], &PACKED_BY_V2[..]] {
            assert_eq!(
                unpack(stored).unwrap(),
                tool_result(
                    "{\"path\":\"notes.txt\",\"text\":\"buy milk\\n\"}".into(),
                    false
                ),
                "tag {}",
                stored[0]
            );
        }
    }

    #[test]
    fn a_damaged_frame_never_reads_as_another_message() {
        let message = tool_result(
            "{\"path\":\"notes.txt\",\"text\":\"buy milk\\n\"}".into(),
            false,
        );
        let packed = pack(&message).unwrap();
        let mut corrupt = 0;
        for at in 1..packed.len() {
            for bit in 0..8 {
                let mut damaged = packed.clone();
                damaged[at] ^= 1 << bit;
                match unpack(&damaged) {
                    Ok(read) => assert_eq!(read, message, "byte {at} bit {bit}"),
                    Err(StoreError::Corrupt(_)) => corrupt += 1,
                    Err(other) => panic!("byte {at} bit {bit}: {other:?}"),
                }
            }
        }
        // Only a flip that leaves the content alone (say, of a header flag) reads back.
        assert!(corrupt > (packed.len() - 1) * 8 * 9 / 10, "{corrupt}");
    }

    #[test]
    fn a_large_message_reads_back_and_its_buffer_is_not_kept() {
        let message = tool_result("line of a large file\n".repeat(5_000), false);
        assert_eq!(unpack(&pack(&message).unwrap()).unwrap(), message);
        let kept = PACKER.with(|cell| cell.borrow().json.capacity());
        assert!(kept <= KEPT_JSON, "{kept}");
    }

    #[test]
    fn plain_json_as_older_releases_stored_it_reads() {
        let message = tool_result("a line\n".into(), true);
        let stored = serde_json::to_vec(&message).unwrap();
        assert_eq!(unpack(&stored).unwrap(), message);
    }

    #[test]
    fn unknown_tags_and_bad_frames_are_corrupt() {
        for stored in [
            &b""[..],
            b"\x02abc",
            b"\x03abc",
            b"\x01",
            b"\x01not a frame",
            b"[1]",
            b"{oops",
        ] {
            assert!(
                matches!(unpack(stored), Err(StoreError::Corrupt(_))),
                "{stored:?}"
            );
        }
    }

    #[test]
    fn a_frame_of_the_bound_passes_it_and_one_past_is_refused_unread() {
        for (size, refused) in [(MAX_UNPACKED, false), (MAX_UNPACKED + 1, true)] {
            let mut stored = vec![DICTIONARY_V1];
            stored.extend(zstd::bulk::compress(&vec![b' '; size], 1).unwrap());
            // Spaces are no message either way: the bound decides only which error.
            let error = unpack(&stored).unwrap_err().to_string();
            assert_eq!(
                error.contains("a compressed message of"),
                refused,
                "{size}: {error}"
            );
        }
    }

    proptest! {
        #[test]
        fn messages_read_back_as_written(text in ".{0,400}", timestamp: u64, is_error: bool) {
            for message in [user(text.clone(), timestamp), tool_result(text.clone(), is_error)] {
                prop_assert_eq!(unpack(&pack(&message).unwrap()).unwrap(), message);
            }
        }

        #[test]
        fn messages_packed_against_v1_still_read(text in ".{0,400}", is_error: bool) {
            let message = tool_result(text, is_error);
            prop_assert_eq!(unpack(&pack_v1(&message)).unwrap(), message);
        }

        #[test]
        fn any_stored_bytes_read_or_fail_without_panic(
            tag in prop_oneof![
                Just(DICTIONARY_V1), Just(DICTIONARY_V2), Just(PLAIN_JSON), any::<u8>()
            ],
            rest in proptest::collection::vec(any::<u8>(), 0..200),
        ) {
            let mut stored = vec![tag];
            stored.extend(rest);
            let _ = unpack(&stored);
        }
    }
}
