//! Reads are windows of lines bounded to 128 KiB; each bound is tested at its edge.
#![allow(clippy::unwrap_used)]

use knapsack::limits::TEXT_LIMIT_BYTES;
use knapsack::{Files, FilesError, LocalFiles, ReadInput, ReadOutput};

fn port(files: &[(&str, &[u8])]) -> (tempfile::TempDir, LocalFiles) {
    let root = tempfile::tempdir().unwrap();
    for (name, content) in files {
        std::fs::write(root.path().join(name), content).unwrap();
    }
    let port = LocalFiles::new(root.path()).unwrap();
    (root, port)
}

fn input(path: &str, offset: u64, limit: Option<u64>) -> ReadInput {
    ReadInput {
        path: path.into(),
        offset,
        limit,
    }
}

/// A text of `n` bytes made of 64-byte lines (the last may be shorter).
fn text_of(n: usize) -> String {
    let line = format!("{}\n", "x".repeat(63));
    let mut text = line.repeat(n / 64);
    text.push_str(&"y".repeat(n % 64));
    text
}

#[tokio::test]
async fn windows_of_lines() {
    let (_d, files) = port(&[("a.txt", b"l0\nl1\nl2\nl3")]);
    let got = files.read(input("a.txt", 1, Some(2))).await.unwrap();
    assert_eq!(
        got,
        ReadOutput {
            path: "a.txt".into(),
            content: "l1\nl2\n".into(),
            offset: 1,
            lines: 2,
            next_offset: Some(3),
            truncated: false,
        }
    );
    let tail = files.read(input("a.txt", 3, None)).await.unwrap();
    assert_eq!((tail.content.as_str(), tail.next_offset), ("l3", None));
    let past = files.read(input("a.txt", 10, None)).await.unwrap();
    assert_eq!((past.content.as_str(), past.lines), ("", 0));
    assert_eq!(
        files.read(input("a.txt", 0, Some(0))).await,
        Err(FilesError::InvalidRequest(
            "limit must be at least 1".into()
        ))
    );
}

#[tokio::test]
async fn exactly_128_kib_reads_whole() {
    let text = text_of(TEXT_LIMIT_BYTES);
    let (_d, files) = port(&[("edge.txt", text.as_bytes())]);
    let got = files.read(input("edge.txt", 0, None)).await.unwrap();
    assert_eq!(got.content, text);
    assert_eq!((got.truncated, got.next_offset), (false, None));
}

#[tokio::test]
async fn one_byte_over_is_truncated_on_a_line_boundary() {
    let text = text_of(TEXT_LIMIT_BYTES + 1);
    let (_d, files) = port(&[("over.txt", text.as_bytes())]);
    let got = files.read(input("over.txt", 0, None)).await.unwrap();
    assert_eq!(got.content, text[..TEXT_LIMIT_BYTES]);
    assert_eq!(got.lines, 2048);
    assert_eq!((got.truncated, got.next_offset), (true, Some(2048)));
    let rest = files.read(input("over.txt", 2048, None)).await.unwrap();
    assert_eq!((rest.content.as_str(), rest.truncated), ("y", false));
}

#[tokio::test]
async fn a_single_long_line_is_cut_on_a_character_boundary() {
    // 'é' is two bytes; a one-byte prefix shifts it across the bound.
    let mut text = String::from("a");
    while text.len() <= TEXT_LIMIT_BYTES {
        text.push('é');
    }
    text.push('\n');
    text.push_str("next\n");
    let (_d, files) = port(&[("long.txt", text.as_bytes())]);
    let got = files.read(input("long.txt", 0, None)).await.unwrap();
    assert_eq!(got.content.len(), TEXT_LIMIT_BYTES - 1);
    assert!(text.starts_with(&got.content));
    assert_eq!(
        (got.lines, got.truncated, got.next_offset),
        (1, true, Some(1))
    );
}

#[tokio::test]
async fn binary_files_and_directories_are_refused() {
    let (d, files) = port(&[("bin", b"ok\n\xff\xfe\n")]);
    std::fs::create_dir(d.path().join("dir")).unwrap();
    assert_eq!(
        files.read(input("bin", 0, None)).await,
        Err(FilesError::NotText { path: "bin".into() })
    );
    assert_eq!(
        files.read(input("dir", 0, None)).await,
        Err(FilesError::NotAFile { path: "dir".into() })
    );
    assert_eq!(
        files.read(input("missing", 0, None)).await,
        Err(FilesError::NotFound {
            path: "missing".into()
        })
    );
}
