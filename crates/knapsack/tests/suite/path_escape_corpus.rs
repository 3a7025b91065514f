//! The path escape corpus of the local Files port, as one table: every way a
//! requested path might leave the root, and what the port answers.
//!
//! On Unix a backslash, a percent sign and a Unicode dot are ordinary name bytes:
//! `..\secret.txt`, `%2e%2e/secret.txt` and `．．/secret.txt` name files inside
//! the root (absent here), and nothing decodes or normalises them into `..`.
//! The last test races a directory against a symlink while reading.

#![cfg(unix)]
#![allow(clippy::unwrap_used)]

use std::os::unix::fs::symlink;
use std::path::Path;

use knapsack::{Files, FilesError, ListInput, LocalFiles, ReadInput, ReplaceRequest};

/// What a request must come to.
#[derive(Debug)]
enum Expect {
    /// Refused as outside the root.
    Outside,
    /// Refused as an invalid path (NUL, empty).
    Invalid,
    /// Inside the root but absent: the name was taken literally.
    Absent,
    /// Read inside the root, with this content.
    Reads(&'static str),
}

struct Tree {
    root: tempfile::TempDir,
    outside: tempfile::TempDir,
    files: LocalFiles,
}

fn tree() -> Tree {
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.txt"), "secret\n").unwrap();
    std::fs::create_dir(outside.path().join("dir")).unwrap();
    std::fs::write(outside.path().join("dir/secret.txt"), "secret\n").unwrap();
    let root = tempfile::tempdir().unwrap();
    let at = |name: &str| root.path().join(name);
    std::fs::create_dir(at("sub")).unwrap();
    std::fs::write(at("sub/inner.txt"), "inner\n").unwrap();
    std::fs::write(at("café.txt"), "nfc\n").unwrap();
    symlink(outside.path().join("secret.txt"), at("out_file")).unwrap();
    symlink(outside.path(), at("out_dir")).unwrap();
    symlink("sub/inner.txt", at("in_file")).unwrap();
    symlink("sub", at("in_dir")).unwrap();
    symlink("../sub/inner.txt", at("sub/up_and_in")).unwrap();
    symlink("/nonexistent/target", at("dangling")).unwrap();
    symlink("loop_b", at("loop_a")).unwrap();
    symlink("loop_a", at("loop_b")).unwrap();
    let files = LocalFiles::new(root.path()).unwrap();
    Tree {
        root,
        outside,
        files,
    }
}

fn read(path: &str) -> ReadInput {
    ReadInput {
        path: path.to_owned(),
        offset: 0,
        limit: None,
    }
}

fn check(path: &str, got: &Result<String, FilesError>, expect: &Expect) {
    let ok = match (expect, got) {
        (Expect::Outside, Err(FilesError::OutsideRoot { .. })) => true,
        (Expect::Invalid, Err(FilesError::InvalidPath { .. })) => true,
        (Expect::Absent, Err(FilesError::NotFound { .. })) => true,
        (Expect::Reads(content), Ok(got)) => got == content,
        _ => false,
    };
    assert!(ok, "{path:?}: expected {expect:?}, got {got:?}");
}

#[tokio::test]
async fn every_escape_in_the_corpus_is_refused_and_every_inside_path_reads() {
    let tree = tree();
    let root = tree.files.root().display().to_string();
    let out = tree.outside.path().display().to_string();
    let out_name = tree
        .outside
        .path()
        .file_name()
        .unwrap()
        .to_str()
        .unwrap()
        .to_owned();
    let cases: Vec<(String, Expect)> = vec![
        // `..`
        ("..".into(), Expect::Outside),
        ("../secret.txt".into(), Expect::Outside),
        ("sub/../../secret.txt".into(), Expect::Outside),
        (format!("../{out_name}/secret.txt"), Expect::Outside),
        ("./sub/./../..".into(), Expect::Outside),
        ("sub//..//..//x".into(), Expect::Outside),
        ("sub/../sub/inner.txt".into(), Expect::Reads("inner\n")),
        // Absolute paths.
        ("/etc/passwd".into(), Expect::Outside),
        (format!("{out}/secret.txt"), Expect::Outside),
        (format!("{root}/sub/inner.txt"), Expect::Reads("inner\n")),
        (format!("{root}/../{out_name}/secret.txt"), Expect::Outside),
        (format!("{root}-sibling/x"), Expect::Outside),
        ("//etc/passwd".into(), Expect::Outside),
        // Symlinks out and in.
        ("out_file".into(), Expect::Outside),
        ("out_dir".into(), Expect::Outside),
        ("out_dir/secret.txt".into(), Expect::Outside),
        ("out_dir/dir/secret.txt".into(), Expect::Outside),
        ("out_dir/new.txt".into(), Expect::Outside),
        ("dangling".into(), Expect::Outside),
        ("loop_a".into(), Expect::Outside),
        ("in_file".into(), Expect::Reads("inner\n")),
        ("in_dir/inner.txt".into(), Expect::Reads("inner\n")),
        ("sub/up_and_in".into(), Expect::Reads("inner\n")),
        // NUL and empty.
        ("sub/inner.txt\0../../secret.txt".into(), Expect::Invalid),
        ("\0".into(), Expect::Invalid),
        (String::new(), Expect::Invalid),
        // Windows forms are plain names here.
        ("C:\\secret.txt".into(), Expect::Absent),
        ("..\\secret.txt".into(), Expect::Absent),
        ("sub\\..\\..\\secret.txt".into(), Expect::Absent),
        ("\\\\server\\share\\secret.txt".into(), Expect::Absent),
        // Percent-encoding is not decoded.
        ("%2e%2e/secret.txt".into(), Expect::Absent),
        ("%2e%2e%2fsecret.txt".into(), Expect::Absent),
        ("..%2fsecret.txt".into(), Expect::Absent),
        ("sub%2f..%2f..%2fsecret.txt".into(), Expect::Absent),
        // Unicode look-alikes and normal forms are not normalised.
        ("\u{ff0e}\u{ff0e}/secret.txt".into(), Expect::Absent),
        ("\u{2024}\u{2024}/secret.txt".into(), Expect::Absent),
        ("..\u{2215}secret.txt".into(), Expect::Absent),
        ("..\u{ff0f}secret.txt".into(), Expect::Absent),
        ("cafe\u{301}.txt".into(), Expect::Absent),
        ("caf\u{e9}.txt".into(), Expect::Reads("nfc\n")),
    ];
    for (path, expect) in &cases {
        let got = tree
            .files
            .read(read(path))
            .await
            .map(|output| output.content);
        check(path, &got, expect);
    }

    // Writing and listing through the same escapes are refused too.
    for path in ["out_file", "../secret.txt", "out_dir/secret.txt"] {
        let replace = ReplaceRequest {
            path: path.into(),
            expected: "secret\n".into(),
            content: "owned\n".into(),
        };
        assert!(
            matches!(
                tree.files.replace(replace).await,
                Err(FilesError::OutsideRoot { .. })
            ),
            "{path}"
        );
    }
    for path in ["out_dir", "..", "/"] {
        let list = ListInput {
            path: path.into(),
            recursive: true,
        };
        assert!(
            matches!(
                tree.files.list(list).await,
                Err(FilesError::OutsideRoot { .. })
            ),
            "{path}"
        );
    }
    assert_eq!(
        std::fs::read_to_string(tree.outside.path().join("secret.txt")).unwrap(),
        "secret\n"
    );
    drop(tree.root);
}

/// Swaps `root/sub` between a directory and a symlink to `outside`, `rounds` times.
fn flip(root: &Path, outside: &Path, rounds: usize) {
    let sub = root.join("sub");
    let parked = root.join("parked");
    for _ in 0..rounds {
        std::fs::rename(&sub, &parked).unwrap();
        symlink(outside, &sub).unwrap();
        std::fs::remove_file(&sub).unwrap();
        std::fs::rename(&parked, &sub).unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_directory_swapped_for_a_symlink_mid_read_never_leaks_the_outside() {
    let tree = tree();
    // The file the swap would expose has the same name as the one inside.
    std::fs::write(tree.outside.path().join("inner.txt"), "secret\n").unwrap();
    let (root, outside) = (
        tree.root.path().to_path_buf(),
        tree.outside.path().to_path_buf(),
    );
    let flipper = std::thread::spawn(move || flip(&root, &outside, 3000));
    let mut reads = 0;
    while !flipper.is_finished() {
        if let Ok(output) = tree.files.read(read("sub/inner.txt")).await {
            assert_eq!(output.content, "inner\n", "the read left the root");
            reads += 1;
        }
    }
    flipper.join().unwrap();
    assert!(reads > 0, "no read ever succeeded");
}
