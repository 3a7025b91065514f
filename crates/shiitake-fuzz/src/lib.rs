//! Fuzz targets of Shiitake-rs, as plain functions over bytes.
//!
//! Each function feeds its input to one decoder or resolver and panics only when
//! a property breaks (a round trip that does not return, an escape from a root);
//! bad input itself must come back as a typed error. `fuzz_targets/` wraps each in
//! libFuzzer (`cargo +nightly fuzz run --fuzz-dir crates/shiitake-fuzz <target>`,
//! feature `libfuzzer`); `tests/suite/smoke.rs` runs each on stable over the seed
//! corpora in `corpus/` and random inputs.

use std::sync::OnceLock;

use knapsack::{Files, LocalFiles, ReadInput};
use serde_json::Value;
use shiitake_protocol::{SessionCommand, SessionFrame};

/// The target names, in the order `cargo xtask fuzz` runs them.
pub const TARGETS: [&str; 5] = [
    "patch_grammar",
    "command_decoder",
    "sse_frames",
    "schema_subset",
    "path_resolution",
];

/// Runs the target called `name` on `data`; `false` for an unknown name.
pub fn run(name: &str, data: &[u8]) -> bool {
    match name {
        "patch_grammar" => patch_grammar(data),
        "command_decoder" => command_decoder(data),
        "sse_frames" => sse_frames(data),
        "schema_subset" => schema_subset(data),
        "path_resolution" => path_resolution(data),
        _ => return false,
    }
    true
}

/// The patch grammar: a patch that parses prints back to text that parses to the same patch.
pub fn patch_grammar(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(patch) = knapsack::patch::parse_patch(text) {
        let printed = knapsack::patch::print_patch(&patch);
        let again = knapsack::patch::parse_patch(&printed).ok();
        assert!(again.as_ref() == Some(&patch), "printed: {printed:?}");
    }
}

/// The command decoder: a command that decodes encodes and decodes to itself.
pub fn command_decoder(data: &[u8]) {
    if let Ok(command) = serde_json::from_slice::<SessionCommand>(data) {
        let encoded = serde_json::to_string(&command);
        assert!(encoded.is_ok(), "a decoded command does not encode");
        if let Ok(encoded) = encoded {
            let again = serde_json::from_str::<SessionCommand>(&encoded).ok();
            assert_eq!(again.as_ref(), Some(&command), "encoded: {encoded}");
        }
    }
}

/// The client's SSE reader: any bytes, in any chunking, give events of at most 4 MiB
/// (or one error), and event data that decodes as a frame re-encodes.
pub fn sse_frames(data: &[u8]) {
    let Some((&first, body)) = data.split_first() else {
        return;
    };
    let chunk = usize::from(first) + 1;
    for item in shiitake_client::sse_events_of(body, chunk) {
        let Ok((name, data)) = item else {
            break;
        };
        assert!(name.len() + data.len() <= shiitake_client::MAX_EVENT_BYTES + 16);
        if let Ok(frame) = serde_json::from_str::<SessionFrame>(&data) {
            assert!(serde_json::to_string(&frame).is_ok());
        }
    }
}

/// The schema subset: `[schema, instance]`; validating and decoding never panic, and
/// what `decode` accepts, `validate` accepts after the decode's own defaults.
pub fn schema_subset(data: &[u8]) {
    let Ok(Value::Array(pair)) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let [schema, instance] = pair.as_slice() else {
        return;
    };
    let schema = shiitake_capabilities::Schema::new(schema.clone());
    let valid = schema.validate(instance);
    if let Ok(decoded) = schema.decode(instance.clone()) {
        assert!(
            schema.is_opaque() || valid.is_ok() || schema.validate(&decoded).is_ok(),
            "decode accepted what validate refused"
        );
    }
}

/// A fixed tree for [`path_resolution`]: a root with a file, and a secret beside it.
struct Tree {
    _dirs: (tempfile::TempDir, tempfile::TempDir),
    files: LocalFiles,
    runtime: tokio::runtime::Runtime,
}

fn tree() -> Option<&'static Tree> {
    static TREE: OnceLock<Option<Tree>> = OnceLock::new();
    TREE.get_or_init(|| {
        let outside = tempfile::tempdir().ok()?;
        std::fs::write(outside.path().join("secret.txt"), "SECRET").ok()?;
        let root = tempfile::tempdir().ok()?;
        std::fs::create_dir(root.path().join("sub")).ok()?;
        std::fs::write(root.path().join("sub/inner.txt"), "inner").ok()?;
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(outside.path(), root.path().join("out")).ok()?;
            std::os::unix::fs::symlink("sub", root.path().join("in")).ok()?;
        }
        let files = LocalFiles::new(root.path()).ok()?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .ok()?;
        Some(Tree {
            _dirs: (root, outside),
            files,
            runtime,
        })
    })
    .as_ref()
}

/// Path resolution: whatever the path, nothing outside the root is read, and
/// lexical normalisation never leaves a `..` segment.
pub fn path_resolution(data: &[u8]) {
    let Ok(path) = std::str::from_utf8(data) else {
        return;
    };
    if let Some(normal) = knapsack::normalize_relative(path) {
        assert!(normal.split('/').all(|segment| segment != ".."));
    }
    let Some(tree) = tree() else {
        return;
    };
    let input = ReadInput {
        path: path.to_owned(),
        offset: 0,
        limit: None,
    };
    if let Ok(output) = tree.runtime.block_on(tree.files.read(input)) {
        assert!(
            !output.content.contains("SECRET"),
            "{path:?} read outside the root"
        );
    }
}
