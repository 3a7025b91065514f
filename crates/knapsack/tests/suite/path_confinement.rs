//! Every escape attempt is refused by the local port; paths inside the root work.
#![allow(clippy::unwrap_used)]

use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::symlink;

use knapsack::{
    Files, FilesError, ListInput, LocalFiles, ReadInput, ReplaceRequest, validate_path,
};

fn setup() -> (tempfile::TempDir, tempfile::TempDir, LocalFiles) {
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.txt"), "secret\n").unwrap();
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir(root.path().join("sub")).unwrap();
    std::fs::write(root.path().join("sub/inner.txt"), "inner\n").unwrap();
    let files = LocalFiles::new(root.path()).unwrap();
    (root, outside, files)
}

fn read(path: &str) -> ReadInput {
    ReadInput {
        path: path.to_owned(),
        offset: 0,
        limit: None,
    }
}

fn outside(path: &str) -> FilesError {
    FilesError::OutsideRoot {
        path: path.to_owned(),
    }
}

#[tokio::test]
async fn dot_dot_escapes_are_refused() {
    let (_root, out, files) = setup();
    let name = out.path().file_name().unwrap().to_str().unwrap().to_owned();
    for path in [
        "..".to_owned(),
        "../secret.txt".to_owned(),
        "sub/../../secret.txt".to_owned(),
        format!("../{name}/secret.txt"),
        "./sub/../..".to_owned(),
    ] {
        assert_eq!(files.read(read(&path)).await, Err(outside(&path)), "{path}");
    }
}

#[tokio::test]
async fn dot_dot_inside_the_root_is_allowed() {
    let (_root, _out, files) = setup();
    let got = files.read(read("sub/../sub/inner.txt")).await.unwrap();
    assert_eq!(got.content, "inner\n");
}

#[tokio::test]
async fn absolute_paths_outside_are_refused_and_inside_are_allowed() {
    let (_root, out, files) = setup();
    let secret = out.path().join("secret.txt").display().to_string();
    assert_eq!(files.read(read(&secret)).await, Err(outside(&secret)));
    assert_eq!(
        files.read(read("/etc/passwd")).await,
        Err(outside("/etc/passwd"))
    );
    let inside = files.root().join("sub/inner.txt").display().to_string();
    assert_eq!(files.read(read(&inside)).await.unwrap().content, "inner\n");
    // A sibling directory whose name extends the root's is not inside it.
    let sibling = format!("{}-other/x", files.root().display());
    assert_eq!(files.read(read(&sibling)).await, Err(outside(&sibling)));
}

#[tokio::test]
async fn symlinks_that_leave_the_root_are_refused() {
    let (root, out, files) = setup();
    symlink(out.path().join("secret.txt"), root.path().join("link.txt")).unwrap();
    symlink(out.path(), root.path().join("linkdir")).unwrap();
    symlink("/nonexistent/target", root.path().join("dangling")).unwrap();
    for path in ["link.txt", "linkdir/secret.txt", "linkdir", "dangling"] {
        assert_eq!(files.read(read(path)).await, Err(outside(path)), "{path}");
    }
    // Writing through an escaping link is refused too, and nothing outside changes.
    let request = ReplaceRequest {
        path: "link.txt".into(),
        expected: "secret\n".into(),
        content: "owned\n".into(),
    };
    assert_eq!(files.replace(request).await, Err(outside("link.txt")));
    let list = ListInput {
        path: "linkdir".into(),
        recursive: false,
    };
    assert_eq!(files.list(list).await, Err(outside("linkdir")));
    let creating = "linkdir/new.txt";
    assert_eq!(files.read(read(creating)).await, Err(outside(creating)));
    assert_eq!(
        std::fs::read_to_string(out.path().join("secret.txt")).unwrap(),
        "secret\n"
    );
}

#[tokio::test]
async fn symlinks_that_stay_inside_the_root_are_followed() {
    let (root, _out, files) = setup();
    symlink(
        root.path().join("sub/inner.txt"),
        root.path().join("alias.txt"),
    )
    .unwrap();
    symlink("sub", root.path().join("subalias")).unwrap();
    assert_eq!(
        files.read(read("alias.txt")).await.unwrap().content,
        "inner\n"
    );
    assert_eq!(
        files
            .read(read("subalias/inner.txt"))
            .await
            .unwrap()
            .content,
        "inner\n"
    );
}

#[tokio::test]
async fn nul_bytes_and_empty_paths_are_invalid() {
    let (_root, _out, files) = setup();
    assert_eq!(
        files.read(read("sub/inner.txt\0../../etc/passwd")).await,
        Err(FilesError::InvalidPath {
            path: "sub/inner.txt\\0../../etc/passwd".into(),
            reason: "the path contains a NUL byte".into(),
        })
    );
    assert_eq!(
        files.read(read("")).await,
        Err(FilesError::InvalidPath {
            path: String::new(),
            reason: "the path is empty".into(),
        })
    );
    let long = "a/".repeat(2049);
    assert!(matches!(
        files.read(read(&long)).await,
        Err(FilesError::InvalidPath { .. })
    ));
}

#[tokio::test]
async fn a_path_of_exactly_4096_bytes_is_accepted_and_one_more_is_not() {
    let too_long = |path: &str| FilesError::InvalidPath {
        path: path.to_owned(),
        reason: "the path is longer than 4096 bytes".into(),
    };
    let at_limit = "a/".repeat(2048);
    assert_eq!(at_limit.len(), 4096);
    assert_eq!(validate_path(&at_limit), Ok(at_limit.as_str()));
    let over = at_limit.clone() + "a";
    assert_eq!(validate_path(&over), Err(too_long(&over)));

    // Through the port: `.` and empty segments keep a 4096-byte path short on disk.
    let (_root, _out, files) = setup();
    let at_limit = "./".repeat(2041) + "sub//inner.txt";
    assert_eq!(at_limit.len(), 4096);
    assert_eq!(
        files.read(read(&at_limit)).await.unwrap().content,
        "inner\n"
    );
    let over = "./".repeat(2041) + "sub///inner.txt";
    assert_eq!(files.read(read(&over)).await, Err(too_long(&over)));
}

#[tokio::test]
async fn names_that_are_not_utf8_are_refused_and_not_listed() {
    let (root, _out, files) = setup();
    let bad = std::ffi::OsStr::from_bytes(b"bad\xff");
    let created = std::fs::write(root.path().join(bad), "x");
    if created.is_err() {
        // Some filesystems refuse such names; then there is nothing to test.
        return;
    }
    symlink(root.path().join(bad), root.path().join("to-bad")).unwrap();
    assert_eq!(
        files.read(read("to-bad")).await,
        Err(FilesError::InvalidName {
            path: "to-bad".into()
        })
    );
    let listed = files
        .list(ListInput {
            path: ".".into(),
            recursive: false,
        })
        .await
        .unwrap();
    let names: Vec<String> = listed.entries.into_iter().map(|e| e.path).collect();
    assert_eq!(names, vec!["sub", "to-bad"]);
}
