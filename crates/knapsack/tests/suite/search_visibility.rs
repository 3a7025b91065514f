//! Listing and search see only what one visibility policy allows: no `.git`,
//! gitignore grammar with nested negation, excluded ancestors stay excluded;
//! exact-path reads ignore the policy. Results stop at 256 with a flag.
#![allow(clippy::unwrap_used)]

use knapsack::limits::{GREP_LINE_LIMIT_BYTES, RESULT_LIMIT, TEXT_LIMIT_BYTES};
use knapsack::{
    EntriesOutput, Entry, EntryKind, Files, FilesError, GlobInput, GrepInput, GrepMatch,
    GrepOutput, ListInput, LocalFiles, ReadInput, SearchVisibility,
};

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

fn file(path: &str) -> Entry {
    Entry {
        path: path.into(),
        kind: EntryKind::File,
    }
}

fn dir(path: &str) -> Entry {
    Entry {
        path: path.into(),
        kind: EntryKind::Dir,
    }
}

fn list_all(path: &str) -> ListInput {
    ListInput {
        path: path.into(),
        recursive: true,
    }
}

fn grep_input(pattern: &str, path: &str) -> GrepInput {
    GrepInput {
        pattern: pattern.into(),
        path: path.into(),
        glob: None,
        case_insensitive: false,
    }
}

fn ignored_tree() -> (tempfile::TempDir, LocalFiles) {
    tree(&[
        (".git/config", "needle\n"),
        (".gitignore", "*.log\nbuild/\n"),
        ("a.log", "needle\n"),
        ("build/out.txt", "needle\n"),
        ("build/.gitignore", "!*\n"),
        ("src/main.rs", "needle\n"),
        ("src/.gitignore", "!keep.log\n"),
        ("src/keep.log", "needle\n"),
        ("src/drop.log", "needle\n"),
        ("src/.git", "gitdir: elsewhere\n"),
    ])
}

#[tokio::test]
async fn list_hides_git_ignored_files_and_excluded_ancestors() {
    let (_d, files) = ignored_tree();
    let got = files.list(list_all(".")).await.unwrap();
    assert_eq!(
        got,
        EntriesOutput {
            entries: vec![
                file(".gitignore"),
                dir("src"),
                file("src/.gitignore"),
                file("src/keep.log"),
                file("src/main.rs"),
            ],
            truncated: false,
        }
    );
    // Listing inside an excluded directory, or inside .git, shows nothing.
    for hidden in ["build", ".git"] {
        let got = files.list(list_all(hidden)).await.unwrap();
        assert_eq!(got.entries, vec![], "{hidden}");
    }
}

#[tokio::test]
async fn grep_and_glob_use_the_same_policy() {
    let (_d, files) = ignored_tree();
    let got = files.grep(grep_input("needle", ".")).await.unwrap();
    let hit = |path: &str| GrepMatch {
        path: path.into(),
        line: 1,
        text: "needle".into(),
    };
    assert_eq!(
        got,
        GrepOutput {
            matches: vec![hit("src/keep.log"), hit("src/main.rs")],
            truncated: false,
            skipped: vec![],
        }
    );
    let globbed = files
        .glob(GlobInput {
            pattern: "**/*.log".into(),
            path: ".".into(),
        })
        .await
        .unwrap();
    assert_eq!(globbed.entries, vec![file("src/keep.log")]);
    // Grep of one hidden file finds nothing; an exact read still works.
    let direct = files.grep(grep_input("needle", "a.log")).await.unwrap();
    assert_eq!(direct.matches, vec![]);
    let read = files
        .read(ReadInput {
            path: "build/out.txt".into(),
            offset: 0,
            limit: None,
        })
        .await
        .unwrap();
    assert_eq!(read.content, "needle\n");
}

#[test]
fn the_policy_over_supplied_ignore_text() {
    let mut policy = SearchVisibility::new(|dir: &str| match dir {
        "" => vec!["target/\n*.tmp\n/top-only\n".to_owned()],
        "docs" => vec!["!draft.tmp\n".to_owned(), "secret/\n".to_owned()],
        _ => vec![],
    });
    let cases = [
        ("", true, true),
        ("src/lib.rs", false, true),
        ("x.tmp", false, false),
        ("docs/draft.tmp", false, true),
        ("docs/other.tmp", false, false),
        ("docs/secret", true, false),
        ("docs/secret/a.md", false, false),
        ("target", true, false),
        ("target/debug/x", false, false),
        ("top-only", false, false),
        ("docs/top-only", false, true),
        (".git", true, false),
        ("a/.git/b", false, false),
        (".github/workflows", true, true),
    ];
    for (path, is_dir, visible) in cases {
        assert_eq!(policy.is_visible(path, is_dir), visible, "{path}");
    }
}

#[tokio::test]
async fn ignore_files_are_read_bounded() {
    // A rule after the first 128 KiB of an ignore file is not seen.
    let padding = "#".repeat(TEXT_LIMIT_BYTES - 1) + "\n";
    let (_d, files) = tree(&[(".gitignore", &(padding + "late.txt\n")), ("late.txt", "x")]);
    let got = files.list(list_all(".")).await.unwrap();
    assert_eq!(got.entries, vec![file(".gitignore"), file("late.txt")]);
}

#[tokio::test]
async fn an_ignore_file_is_read_up_to_exactly_128_kib() {
    // The file ends in the rule `late.txt` with no newline, so the bound decides whether
    // the rule's last byte is read: a 131073-byte file is read as far as `late.tx`.
    let ignore_file = |size: usize| "#".repeat(size - "\nlate.txt".len()) + "\nlate.txt";
    assert_eq!(ignore_file(TEXT_LIMIT_BYTES).len(), 131_072);
    let visible = |gitignore: String| async move {
        let (_d, files) = tree(&[
            (".gitignore", &gitignore),
            ("kept.txt", "x"),
            ("late.txt", "x"),
        ]);
        files.list(list_all(".")).await.unwrap().entries
    };
    assert_eq!(
        visible(ignore_file(TEXT_LIMIT_BYTES)).await,
        vec![file(".gitignore"), file("kept.txt")]
    );
    // One byte more: `late.tx` hides nothing.
    assert_eq!(
        visible(ignore_file(TEXT_LIMIT_BYTES + 1)).await,
        vec![file(".gitignore"), file("kept.txt"), file("late.txt")]
    );
}

#[tokio::test]
async fn results_stop_at_256_with_a_flag() {
    let root = tempfile::tempdir().unwrap();
    for i in 0..RESULT_LIMIT {
        std::fs::write(root.path().join(format!("f{i:03}.txt")), "hit\nhit\n").unwrap();
    }
    let files = LocalFiles::new(root.path()).unwrap();
    let at_limit = files.list(list_all(".")).await.unwrap();
    assert_eq!((at_limit.entries.len(), at_limit.truncated), (256, false));
    let glob = GlobInput {
        pattern: "*.txt".into(),
        path: ".".into(),
    };
    let globbed = files.glob(glob.clone()).await.unwrap();
    assert_eq!((globbed.entries.len(), globbed.truncated), (256, false));

    std::fs::write(root.path().join("z.txt"), "").unwrap();
    let over = files.list(list_all(".")).await.unwrap();
    assert_eq!((over.entries.len(), over.truncated), (256, true));
    assert_eq!(over.entries.last().unwrap().path, "f255.txt");
    let globbed = files.glob(glob).await.unwrap();
    assert_eq!((globbed.entries.len(), globbed.truncated), (256, true));

    // 128 files x 2 lines is exactly 256 matches; one more line is truncated.
    let grep_dir = root.path().join("g");
    std::fs::create_dir(&grep_dir).unwrap();
    for i in 0..128 {
        std::fs::write(grep_dir.join(format!("{i:03}")), "hit\nhit\n").unwrap();
    }
    let exact = files.grep(grep_input("hit", "g")).await.unwrap();
    assert_eq!((exact.matches.len(), exact.truncated), (256, false));
    std::fs::write(grep_dir.join("zzz"), "hit\n").unwrap();
    let over = files.grep(grep_input("hit", "g")).await.unwrap();
    // Files are searched in parallel, but the kept matches are the first in walk order.
    let expected: Vec<GrepMatch> = (0..128)
        .flat_map(|i| {
            (1..=2).map(move |line| GrepMatch {
                path: format!("g/{i:03}"),
                line,
                text: "hit".into(),
            })
        })
        .collect();
    assert_eq!(
        over,
        GrepOutput {
            matches: expected,
            truncated: true,
            skipped: vec![],
        }
    );
}

#[tokio::test]
async fn grep_lines_are_cut_at_1024_bytes_on_a_character_boundary() {
    let exact = "x".repeat(GREP_LINE_LIMIT_BYTES);
    let over = "x".repeat(GREP_LINE_LIMIT_BYTES + 1);
    // 1023 bytes, then a 2-byte character that would end at byte 1025.
    let split = "x".repeat(GREP_LINE_LIMIT_BYTES - 1) + "\u{e9}";
    let text = format!("{exact}\n{over}\n{split}\n");
    let (_d, files) = tree(&[("long.txt", &text)]);
    let got = files.grep(grep_input("x", "long.txt")).await.unwrap();
    let texts: Vec<&str> = got.matches.iter().map(|m| m.text.as_str()).collect();
    let lengths: Vec<usize> = texts.iter().map(|t| t.len()).collect();
    assert_eq!(lengths, vec![1024, 1024, 1023]);
    assert_eq!(texts, vec![&exact[..], &exact[..], &split[..1023]]);
}

#[tokio::test]
async fn glob_segments_case_and_bad_patterns() {
    let (_d, files) = tree(&[
        ("a.rs", "Fn x\n"),
        ("src/b.rs", "fn y\n"),
        ("src/c.txt", ""),
    ]);
    let glob = |pattern: &str| GlobInput {
        pattern: pattern.into(),
        path: ".".into(),
    };
    assert_eq!(
        files.glob(glob("*.rs")).await.unwrap().entries,
        vec![file("a.rs")]
    );
    assert_eq!(
        files.glob(glob("**/*.rs")).await.unwrap().entries,
        vec![file("a.rs"), file("src/b.rs")]
    );
    let mut input = grep_input("fn", ".");
    input.case_insensitive = true;
    input.glob = Some("src/**".into());
    let got = files.grep(input).await.unwrap();
    assert_eq!(
        got.matches,
        vec![GrepMatch {
            path: "src/b.rs".into(),
            line: 1,
            text: "fn y".into()
        }]
    );
    assert!(matches!(
        files.glob(glob("a[")).await,
        Err(FilesError::InvalidPattern { .. })
    ));
    assert!(matches!(
        files.grep(grep_input("(", ".")).await,
        Err(FilesError::InvalidPattern { .. })
    ));
}
