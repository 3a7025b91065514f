//! The local patch engine applies a whole patch or nothing, inside the root.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::path::Path;

use knapsack::patch::{Chunk, ChunkLine, FileOperation, Patch, PatchError, invert, print_patch};
use knapsack::{ChangeKind, FileChange, Files, FilesError, LocalFiles, PatchOutput};
use proptest::prelude::*;

/// Every file under `dir` (directories as `path/`), with its bytes.
fn snapshot(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let entry = entry.unwrap();
            let path = entry.path();
            let rel = path.strip_prefix(root).unwrap().display().to_string();
            if entry.file_type().unwrap().is_dir() {
                out.insert(format!("{rel}/"), Vec::new());
                walk(root, &path, out);
            } else {
                out.insert(rel, std::fs::read(&path).unwrap());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

fn tree(files: &[(&str, &str)]) -> (tempfile::TempDir, LocalFiles) {
    let root = tempfile::tempdir().unwrap();
    for (name, content) in files {
        let path = root.path().join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }
    let port = LocalFiles::new(root.path()).unwrap();
    (root, port)
}

#[tokio::test]
async fn a_full_patch_applies() {
    let (dir, files) = tree(&[
        ("old.txt", "bye\n"),
        ("src/lib.rs", "fn main() {\n    old();\n}\ntail\n"),
    ]);
    let patch = "\
*** Begin Patch
*** Add File: docs/new.md
+# New
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
    let engine = files.patch_engine().unwrap();
    let output = engine.apply_patch(patch).await.unwrap();
    let change = |path: &str, kind| FileChange {
        path: path.into(),
        kind,
    };
    assert_eq!(
        output,
        PatchOutput {
            changes: vec![
                change("docs/new.md", ChangeKind::Added),
                change("old.txt", ChangeKind::Deleted),
                change("src/main.rs", ChangeKind::Moved),
            ]
        }
    );
    let expected: BTreeMap<String, Vec<u8>> = [
        ("docs/", ""),
        ("docs/new.md", "# New\n"),
        ("src/", ""),
        ("src/main.rs", "fn main() {\n    new();\n}\ntail\nmore\n"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.as_bytes().to_vec()))
    .collect();
    assert_eq!(snapshot(dir.path()), expected);
}

#[tokio::test]
async fn a_failing_third_hunk_leaves_the_tree_byte_identical() {
    let (dir, files) = tree(&[
        ("a.txt", "one\ntwo\n"),
        ("c.txt", "1\n2\n3\n4\n5\n6\n"),
        ("d.txt", "keep\n"),
    ]);
    let before = snapshot(dir.path());
    let patch = "\
*** Begin Patch
*** Update File: a.txt
@@
-one
+ONE
*** Add File: new/b.txt
+fresh
*** Delete File: d.txt
*** Update File: c.txt
@@
-1
+I
@@
-3
+III
@@
-not there
+never
*** End Patch
";
    let result = files.patch_engine().unwrap().apply_patch(patch).await;
    assert_eq!(
        result,
        Err(FilesError::Patch(PatchError::HunkMismatch {
            path: "c.txt".into(),
            hunk: 3,
            message: "the lines starting `not there` were not found".into()
        }))
    );
    assert_eq!(snapshot(dir.path()), before);
}

#[tokio::test]
async fn refusals_change_nothing() {
    let (dir, files) = tree(&[("a.txt", "a\n"), ("b.txt", "b\n"), ("sub/x", "x\n")]);
    let before = snapshot(dir.path());
    let engine = files.patch_engine().unwrap();
    let cases = [
        (
            "*** Begin Patch\n*** Delete File: a.txt\n*** Add File: b.txt\n+x\n*** End Patch\n",
            FilesError::Patch(PatchError::File {
                path: "b.txt".into(),
                message: "cannot add a file that already exists".into(),
            }),
        ),
        (
            "*** Begin Patch\n*** Delete File: a.txt\n*** Delete File: gone.txt\n*** End Patch\n",
            FilesError::Patch(PatchError::File {
                path: "gone.txt".into(),
                message: "cannot delete a file that does not exist".into(),
            }),
        ),
        (
            "*** Begin Patch\n*** Delete File: a.txt\n*** Add File: ../escape.txt\n+x\n*** End Patch\n",
            FilesError::OutsideRoot {
                path: "../escape.txt".into(),
            },
        ),
        (
            "*** Begin Patch\n*** Update File: a.txt\n*** Move to: b.txt\n@@\n-a\n+A\n*** End Patch\n",
            FilesError::Patch(PatchError::File {
                path: "b.txt".into(),
                message: "cannot move onto a file that already exists".into(),
            }),
        ),
        (
            "*** Begin Patch\n*** Delete File: a.txt\n*** Update File: a.txt\n@@\n-a\n+A\n*** End Patch\n",
            FilesError::Patch(PatchError::File {
                path: "a.txt".into(),
                message: "cannot update a file that does not exist".into(),
            }),
        ),
        (
            "*** Begin Patch\n*** Delete File: a.txt\n*** Oops\n*** End Patch\n",
            FilesError::Patch(PatchError::Syntax {
                line: 3,
                message: "expected `*** Add File: `, `*** Delete File: ` or `*** Update File: `, found `*** Oops`".into(),
            }),
        ),
        (
            "*** Begin Patch\n*** Delete File: a.txt\n*** Add File: sub\n+x\n*** End Patch\n",
            FilesError::Patch(PatchError::File {
                path: "sub".into(),
                message: "is a directory".into(),
            }),
        ),
        (
            "*** Begin Patch\n*** Update File: a.txt\n*** Move to: sub\n@@\n-a\n+A\n*** End Patch\n",
            FilesError::Patch(PatchError::File {
                path: "sub".into(),
                message: "is a directory".into(),
            }),
        ),
    ];
    for (patch, error) in cases {
        assert_eq!(engine.apply_patch(patch).await, Err(error), "{patch}");
        assert_eq!(snapshot(dir.path()), before, "{patch}");
    }
    assert!(!dir.path().parent().unwrap().join("escape.txt").exists());
}

#[tokio::test]
async fn operations_on_one_file_compose_in_order() {
    let (dir, files) = tree(&[("a.txt", "x\n")]);
    let patch = "*** Begin Patch\n*** Delete File: a.txt\n*** Add File: a.txt\n+y\n*** Update File: a.txt\n@@\n-y\n+z\n*** End Patch\n";
    files
        .patch_engine()
        .unwrap()
        .apply_patch(patch)
        .await
        .unwrap();
    assert_eq!(
        std::fs::read_to_string(dir.path().join("a.txt")).unwrap(),
        "z\n"
    );
}

/// A tree of files with distinct lines, and a patch that edits, deletes and adds.
/// File contents, region start, region length, file count, replacement lines, added lines.
type Scenario = (
    Vec<Vec<String>>,
    usize,
    usize,
    usize,
    Vec<String>,
    Vec<String>,
);

fn scenario() -> impl Strategy<Value = Scenario> {
    (2usize..5, 3usize..12)
        .prop_flat_map(|(files, lines)| {
            (
                Just(files),
                Just(lines),
                0..lines,
                1usize..3,
                proptest::collection::vec("[a-z ]{0,8}", 0..4),
                proptest::collection::vec("[a-z]{0,8}", 0..4),
            )
        })
        .prop_map(|(files, lines, start, len, replacement, added)| {
            let contents: Vec<Vec<String>> = (0..files)
                .map(|f| (0..lines).map(|l| format!("file {f} line {l}")).collect())
                .collect();
            let len = len.min(lines - start);
            (contents, start, len, files, replacement, added)
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn applying_then_inverting_restores_the_tree(
        (contents, start, len, files_count, replacement, added) in scenario()
    ) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let dir = tempfile::tempdir().unwrap();
        for (index, lines) in contents.iter().enumerate() {
            let mut text = lines.join("\n");
            text.push('\n');
            std::fs::write(dir.path().join(format!("f{index}.txt")), text).unwrap();
        }
        let files = LocalFiles::new(dir.path()).unwrap();
        let before = snapshot(dir.path());

        // Edit f0: remove a region and add replacements, anchored by a context line
        // before it (or after it at the top of the file), so the inverse is anchored too.
        let mut lines = Vec::new();
        if start > 0 {
            lines.push(ChunkLine::Context(contents[0][start - 1].clone()));
        }
        lines.extend(contents[0][start..start + len].iter().cloned().map(ChunkLine::Remove));
        lines.extend(replacement.iter().map(|r| ChunkLine::Add(format!("new {r}"))));
        if start == 0 {
            lines.push(ChunkLine::Context(contents[0][len].clone()));
        }
        let patch = Patch {
            operations: vec![
                FileOperation::Update {
                    path: "f0.txt".into(),
                    move_to: (files_count > 3).then(|| "moved/f0.txt".to_owned()),
                    chunks: vec![Chunk { context: None, lines, end_of_file: false }],
                },
                FileOperation::Delete { path: format!("f{}.txt", files_count - 1) },
                FileOperation::Add { path: "added/new.txt".into(), lines: added },
            ],
        };
        let deleted = before.clone();
        let inverse = invert(&patch, |path| {
            deleted.get(path).map(|bytes| String::from_utf8(bytes.clone()).unwrap())
        }).unwrap();

        runtime.block_on(async {
            let engine = files.patch_engine().unwrap();
            engine.apply_patch(&print_patch(&patch)).await.unwrap();
            prop_assert_ne!(snapshot(dir.path()), before.clone());
            engine.apply_patch(&print_patch(&inverse)).await.unwrap();
            Ok(())
        })?;
        // Directories created by the patch remain (a patch removes files, not directories).
        let mut after = snapshot(dir.path());
        after.retain(|k, _| !k.ends_with('/'));
        prop_assert_eq!(after, before);
    }
}

#[tokio::test]
async fn files_are_patched_up_to_128_kib() {
    use knapsack::FilesEditError;
    use knapsack::limits::TEXT_LIMIT_BYTES;
    let exact = "x".repeat(TEXT_LIMIT_BYTES - 3) + "\na\n";
    let over = "x".repeat(TEXT_LIMIT_BYTES - 2) + "\na\n";
    let (dir, files) = tree(&[("exact.txt", &exact), ("over.txt", &over)]);
    let engine = files.patch_engine().unwrap();
    let patch = |name: &str| {
        format!("*** Begin Patch\n*** Update File: {name}\n@@\n-a\n+b\n*** End Patch\n")
    };
    engine.apply_patch(&patch("exact.txt")).await.unwrap();
    let patched = std::fs::read_to_string(dir.path().join("exact.txt")).unwrap();
    assert_eq!(patched.len(), TEXT_LIMIT_BYTES);
    assert!(patched.ends_with("\nb\n"));
    assert_eq!(
        engine.apply_patch(&patch("over.txt")).await,
        Err(FilesError::Edit(FilesEditError::OversizedFile {
            path: "over.txt".into(),
            size: TEXT_LIMIT_BYTES as u64 + 1,
            limit: TEXT_LIMIT_BYTES as u64,
        }))
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("over.txt")).unwrap(),
        over
    );
}

#[tokio::test]
async fn a_patch_can_grow_a_file_to_128_kib_and_no_further() {
    use knapsack::limits::TEXT_LIMIT_BYTES;
    let start = "x".repeat(TEXT_LIMIT_BYTES - 4) + "\na\n";
    assert_eq!(start.len(), TEXT_LIMIT_BYTES - 1);
    let (dir, files) = tree(&[("grow.txt", &start)]);
    let engine = files.patch_engine().unwrap();
    let patch = |old: &str, new: &str| {
        format!("*** Begin Patch\n*** Update File: grow.txt\n@@\n-{old}\n+{new}\n*** End Patch\n")
    };
    let on_disk = || std::fs::read_to_string(dir.path().join("grow.txt")).unwrap();
    engine.apply_patch(&patch("a", "ab")).await.unwrap();
    let at_limit = on_disk();
    assert_eq!(at_limit.len(), TEXT_LIMIT_BYTES);
    // From exactly 128 KiB to one byte more: refused by the engine as a patch error
    // (the file read fine; it is the result that would be too large).
    assert_eq!(
        engine.apply_patch(&patch("ab", "abc")).await,
        Err(FilesError::Patch(PatchError::File {
            path: "grow.txt".into(),
            message: "the updated file would exceed 128 KiB".into(),
        }))
    );
    assert_eq!(on_disk(), at_limit);
}
