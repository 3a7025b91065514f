//! The patch grammar: parsing, line-numbered errors, print/parse round trips,
//! the presentation reader, and a corpus of malformed patches that never panics.
#![allow(clippy::unwrap_used)]

use knapsack::ChangeKind;
use knapsack::limits::TEXT_LIMIT_BYTES;
use knapsack::patch::{
    Chunk, ChunkLine, FileOperation, Patch, PatchError, PatchSummary, parse_patch, present,
    print_patch,
};
use proptest::prelude::*;

const FULL: &str = "\
*** Begin Patch
*** Add File: docs/new.md
+# New
+
*** Delete File: old.txt
*** Update File: src/lib.rs
*** Move to: src/main.rs
@@ fn main() {
-    old();
+    new();
 }
@@
 tail
+more
*** End of File
*** End Patch
";

fn full_patch() -> Patch {
    Patch {
        operations: vec![
            FileOperation::Add {
                path: "docs/new.md".into(),
                lines: vec!["# New".into(), String::new()],
            },
            FileOperation::Delete {
                path: "old.txt".into(),
            },
            FileOperation::Update {
                path: "src/lib.rs".into(),
                move_to: Some("src/main.rs".into()),
                chunks: vec![
                    Chunk {
                        context: Some("fn main() {".into()),
                        lines: vec![
                            ChunkLine::Remove("    old();".into()),
                            ChunkLine::Add("    new();".into()),
                            ChunkLine::Context("}".into()),
                        ],
                        end_of_file: false,
                    },
                    Chunk {
                        context: None,
                        lines: vec![
                            ChunkLine::Context("tail".into()),
                            ChunkLine::Add("more".into()),
                        ],
                        end_of_file: true,
                    },
                ],
            },
        ],
    }
}

#[test]
fn parses_every_construct() {
    assert_eq!(parse_patch(FULL).unwrap(), full_patch());
    assert_eq!(print_patch(&full_patch()), FULL);
}

#[test]
fn the_first_hunk_may_omit_its_marker_and_crlf_is_accepted() {
    let text = "*** Begin Patch\r\n*** Update File: a\r\n-x\r\n+y\r\n*** End Patch";
    let expected = Patch {
        operations: vec![FileOperation::Update {
            path: "a".into(),
            move_to: None,
            chunks: vec![Chunk {
                context: None,
                lines: vec![ChunkLine::Remove("x".into()), ChunkLine::Add("y".into())],
                end_of_file: false,
            }],
        }],
    };
    assert_eq!(parse_patch(text).unwrap(), expected);
}

fn syntax_line(text: &str) -> usize {
    match parse_patch(text) {
        Err(PatchError::Syntax { line, .. }) => line,
        other => panic!("expected a syntax error, got {other:?}"),
    }
}

/// Found by the fuzzer: text ending in `\r` must survive printing and parsing.
#[test]
fn a_trailing_carriage_return_in_text_round_trips() {
    let patch = Patch {
        operations: vec![FileOperation::Add {
            path: "a".into(),
            lines: vec!["x\r\r".into(), "\r".into()],
        }],
    };
    assert_eq!(parse_patch(&print_patch(&patch)), Ok(patch));
}

#[test]
fn errors_name_the_line() {
    assert_eq!(syntax_line("hello\n*** End Patch\n"), 1);
    assert_eq!(syntax_line("*** Begin Patch\n*** Add File: a\n+x\n"), 3);
    assert_eq!(
        syntax_line("*** Begin Patch\n*** Frobnicate: a\n*** End Patch\n"),
        2
    );
    assert_eq!(
        syntax_line("*** Begin Patch\n*** Update File: a\n*** End Patch\n"),
        2
    );
    assert_eq!(
        syntax_line("*** Begin Patch\n*** Update File: a\n@@\n x\n?bad\n*** End Patch\n"),
        5
    );
    assert_eq!(
        syntax_line("*** Begin Patch\n*** Update File: a\n@@\n*** End Patch\n"),
        3
    );
    assert_eq!(
        syntax_line("*** Begin Patch\n*** Add File:   \n*** End Patch\n"),
        2
    );
    assert_eq!(
        parse_patch("*** Begin Patch\n*** Update File: a\n-x\n*** End Patch\n")
            .map(|p| p.operations.len()),
        Ok(1)
    );
}

#[test]
fn patches_over_128_kib_are_refused() {
    let head = "*** Begin Patch\n*** Add File: a\n";
    let tail = "*** End Patch\n";
    let fill = TEXT_LIMIT_BYTES - head.len() - tail.len();
    // `+` and `\n` around each 62-byte body make 64-byte lines.
    let mut body = "+".to_owned() + &"x".repeat(62) + "\n";
    body = body.repeat(fill / 64);
    body.push('+');
    body.push_str(&"y".repeat(fill % 64 - 2));
    body.push('\n');
    let exact = format!("{head}{body}{tail}");
    assert_eq!(exact.len(), TEXT_LIMIT_BYTES);
    assert!(parse_patch(&exact).is_ok());
    let over = format!("{head}{body}+{tail}");
    assert_eq!(
        parse_patch(&over),
        Err(PatchError::TooLarge {
            size: TEXT_LIMIT_BYTES + 1,
            limit: TEXT_LIMIT_BYTES
        })
    );
}

#[test]
fn presentation_summarises_each_operation() {
    assert_eq!(
        present(FULL).unwrap(),
        vec![
            PatchSummary {
                path: "docs/new.md".into(),
                move_to: None,
                kind: ChangeKind::Added,
                added: 2,
                removed: 0
            },
            PatchSummary {
                path: "old.txt".into(),
                move_to: None,
                kind: ChangeKind::Deleted,
                added: 0,
                removed: 0
            },
            PatchSummary {
                path: "src/lib.rs".into(),
                move_to: Some("src/main.rs".into()),
                kind: ChangeKind::Moved,
                added: 2,
                removed: 1
            },
        ]
    );
}

/// Malformed patches: every one is an error, none panics.
#[test]
fn malformed_corpus_gives_errors() {
    let corpus = [
        "",
        "\n",
        "*** Begin Patch",
        "*** Begin Patch\n",
        "*** End Patch\n",
        "*** Begin Patch\n*** Begin Patch\n*** End Patch",
        "*** Begin Patch\n*** Add File:\n*** End Patch",
        "*** Begin Patch\n*** Delete File: \n*** End Patch",
        "*** Begin Patch\n*** Update File: a\n*** Move to: \n@@\n x\n*** End Patch",
        "*** Begin Patch\n*** Update File: a\n*** Move to: b\n*** End Patch",
        "*** Begin Patch\n*** Update File: a\n@@ ctx\n*** End Patch",
        "*** Begin Patch\n*** Update File: a\n x\n@@@\n*** End Patch",
        "*** Begin Patch\n*** Update File: a\n x\nnope\n*** End Patch",
        "*** Begin Patch\n*** Update File: a\n*** End of File\n*** End Patch",
        "*** Begin Patch\n+orphan\n*** End Patch",
        "*** Begin Patch\n x\n*** End Patch",
        "*** Begin Patch\n*** Add File: a\nno plus\n*** End Patch",
        "*** Begin Patch\n*** Add File: a\n+x\n*** End Patch\ntrailing",
        "*** Begin Patch\n*** Update File: a\n\u{0}\n*** End Patch",
        "*** Begin Patch\n*** Update File: é\n@@\n*** End of File\n*** End Patch",
        "*** Begin Patch\n***\n*** End Patch",
        "*** Begin Patch\n*** Move to: b\n*** End Patch",
    ];
    for text in corpus {
        assert!(parse_patch(text).is_err(), "accepted: {text:?}");
        assert!(present(text).is_err(), "presented: {text:?}");
    }
}

fn text_line() -> impl Strategy<Value = String> {
    "[ -~é\r]{0,12}"
}

fn path() -> impl Strategy<Value = String> {
    "[a-z]{1,6}(/[a-z0-9_.]{1,6}){0,2}"
}

fn chunk_line() -> impl Strategy<Value = ChunkLine> {
    prop_oneof![
        text_line().prop_map(ChunkLine::Context),
        text_line().prop_map(ChunkLine::Remove),
        text_line().prop_map(ChunkLine::Add),
    ]
}

fn chunk() -> impl Strategy<Value = Chunk> {
    (
        proptest::option::of(text_line()),
        proptest::collection::vec(chunk_line(), 1..5),
        any::<bool>(),
    )
        .prop_map(|(context, lines, end_of_file)| Chunk {
            context,
            lines,
            end_of_file,
        })
}

fn operation() -> impl Strategy<Value = FileOperation> {
    prop_oneof![
        (path(), proptest::collection::vec(text_line(), 0..4))
            .prop_map(|(path, lines)| FileOperation::Add { path, lines }),
        path().prop_map(|path| FileOperation::Delete { path }),
        (
            path(),
            proptest::option::of(path()),
            proptest::collection::vec(chunk(), 1..4)
        )
            .prop_map(|(path, move_to, chunks)| FileOperation::Update {
                path,
                move_to,
                chunks
            }),
    ]
}

proptest! {
    #[test]
    fn parse_of_print_is_identity(operations in proptest::collection::vec(operation(), 0..5)) {
        let patch = Patch { operations };
        prop_assert_eq!(parse_patch(&print_patch(&patch)), Ok(patch));
    }

    #[test]
    fn arbitrary_text_never_panics(text in "(\\*\\*\\* [A-Za-z :]{0,16}|[ +@-][ -~]{0,8}|@@.{0,4}|)(\n(\\*\\*\\* [A-Za-z :]{0,16}|[ +@-][ -~]{0,8}|@@.{0,4}|.{0,6})){0,12}") {
        let wrapped = format!("*** Begin Patch\n{text}\n*** End Patch\n");
        let _parsed = parse_patch(&wrapped);
        let _raw = parse_patch(&text);
        let _presented = present(&wrapped);
    }
}
