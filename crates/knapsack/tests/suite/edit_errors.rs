//! Edits distinguish conflict, missing match, ambiguous match, oversized file and
//! partial-character edits, and never change a file they refuse.
#![allow(clippy::unwrap_used)]

use knapsack::limits::TEXT_LIMIT_BYTES;
use knapsack::{
    EditInput, EditOutput, Files, FilesEditError, FilesError, LocalFiles, ReplaceRequest, edit,
};

fn port(name: &str, content: &str) -> (tempfile::TempDir, LocalFiles) {
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join(name), content).unwrap();
    let port = LocalFiles::new(root.path()).unwrap();
    (root, port)
}

fn input(old: &str, new: &str, all: bool) -> EditInput {
    EditInput {
        path: "f.txt".into(),
        old_text: old.into(),
        new_text: new.into(),
        replace_all: all,
    }
}

fn on_disk(dir: &tempfile::TempDir) -> String {
    std::fs::read_to_string(dir.path().join("f.txt")).unwrap()
}

#[tokio::test]
async fn a_unique_match_is_replaced() {
    let (d, files) = port("f.txt", "alpha beta gamma\n");
    let got = edit(&files, input("beta", "BETA", false)).await.unwrap();
    assert_eq!(
        got,
        EditOutput {
            path: "f.txt".into(),
            replacements: 1
        }
    );
    assert_eq!(on_disk(&d), "alpha BETA gamma\n");
}

#[tokio::test]
async fn missing_and_ambiguous_matches() {
    let (d, files) = port("f.txt", "a b a\n");
    assert_eq!(
        edit(&files, input("zzz", "y", false)).await,
        Err(FilesEditError::MissingMatch {
            path: "f.txt".into()
        }
        .into())
    );
    assert_eq!(
        edit(&files, input("a", "y", false)).await,
        Err(FilesEditError::AmbiguousMatch {
            path: "f.txt".into(),
            count: 2
        }
        .into())
    );
    assert_eq!(on_disk(&d), "a b a\n");
    let all = edit(&files, input("a", "y", true)).await.unwrap();
    assert_eq!(all.replacements, 2);
    assert_eq!(on_disk(&d), "y b y\n");
}

#[tokio::test]
async fn replace_refuses_a_conflict() {
    let (d, files) = port("f.txt", "now\n");
    let request = ReplaceRequest {
        path: "f.txt".into(),
        expected: "before\n".into(),
        content: "after\n".into(),
    };
    assert_eq!(
        files.replace(request).await,
        Err(FilesError::Edit(FilesEditError::Conflict {
            path: "f.txt".into()
        }))
    );
    assert_eq!(on_disk(&d), "now\n");
}

#[tokio::test]
async fn oversized_file_at_the_edge() {
    let exact = "x".repeat(TEXT_LIMIT_BYTES - 1) + "\n";
    let (d, files) = port("f.txt", &exact);
    // Exactly 128 KiB: editable, as long as the result stays within the bound.
    edit(&files, input("x\n", "y\n", false)).await.unwrap();
    assert_eq!(on_disk(&d).len(), TEXT_LIMIT_BYTES);
    assert_eq!(
        edit(&files, input("y\n", "yz\n", false)).await,
        Err(FilesEditError::OversizedFile {
            path: "f.txt".into(),
            size: TEXT_LIMIT_BYTES as u64 + 1,
            limit: TEXT_LIMIT_BYTES as u64
        }
        .into())
    );
    // One byte over: refused before matching.
    let (d, files) = port("f.txt", &("x".repeat(TEXT_LIMIT_BYTES) + "\n"));
    assert!(matches!(
        edit(&files, input("x", "y", true)).await,
        Err(FilesError::Edit(FilesEditError::OversizedFile { .. }))
    ));
    assert_eq!(on_disk(&d).len(), TEXT_LIMIT_BYTES + 1);
}

#[tokio::test]
async fn replace_takes_exactly_128_kib_and_refuses_one_byte_more() {
    let (d, files) = port("f.txt", "now\n");
    let exact = "x".repeat(TEXT_LIMIT_BYTES);
    let request = |expected: &str, content: &str| ReplaceRequest {
        path: "f.txt".into(),
        expected: expected.into(),
        content: content.into(),
    };
    files.replace(request("now\n", &exact)).await.unwrap();
    assert_eq!(on_disk(&d), exact);
    let over = "x".repeat(TEXT_LIMIT_BYTES + 1);
    assert_eq!(
        files.replace(request(&exact, &over)).await,
        Err(FilesError::Edit(FilesEditError::OversizedFile {
            path: "f.txt".into(),
            size: 131_073,
            limit: 131_072,
        }))
    );
    assert_eq!(on_disk(&d), exact);
}

#[tokio::test]
async fn partial_character_edits_are_refused() {
    // "e" followed by a combining acute accent is one user-perceived character.
    let (d, files) = port("f.txt", "cafe\u{301} ok\n");
    assert_eq!(
        edit(&files, input("cafe", "tea", false)).await,
        Err(FilesEditError::PartialCharacter {
            path: "f.txt".into(),
            offset: 4
        }
        .into())
    );
    assert_eq!(on_disk(&d), "cafe\u{301} ok\n");
    edit(&files, input("cafe\u{301}", "tea", false))
        .await
        .unwrap();
    assert_eq!(on_disk(&d), "tea ok\n");
}
