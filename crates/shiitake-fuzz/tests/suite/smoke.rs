//! Every fuzz target, bounded, on stable: over its seed corpus, then random inputs.

#![allow(clippy::unwrap_used)]

use proptest::prelude::*;

fn seeds(target: &str) -> Vec<Vec<u8>> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("corpus")
        .join(target);
    let mut seeds: Vec<Vec<u8>> = std::fs::read_dir(&dir)
        .unwrap_or_else(|error| panic!("{}: {error}", dir.display()))
        .map(|entry| std::fs::read(entry.unwrap().path()).unwrap())
        .collect();
    seeds.sort();
    assert!(!seeds.is_empty(), "no seeds in {}", dir.display());
    seeds
}

#[test]
fn every_target_takes_its_seed_corpus() {
    for target in shiitake_fuzz::TARGETS {
        for seed in seeds(target) {
            assert!(shiitake_fuzz::run(target, &seed));
        }
    }
    assert!(!shiitake_fuzz::run("no_such_target", b""));
}

/// Random mutations of a seed: bytes flipped, cut, or repeated.
fn mutated(target: &'static str) -> impl Strategy<Value = Vec<u8>> {
    let seeds = seeds(target);
    (0..seeds.len(), any::<Vec<(usize, u8)>>(), any::<usize>()).prop_map(
        move |(index, flips, cut)| {
            let mut bytes = seeds[index].clone();
            for (at, byte) in flips {
                if !bytes.is_empty() {
                    let at = at % bytes.len();
                    bytes[at] = byte;
                }
            }
            let cut = cut % (bytes.len() + 1);
            bytes.truncate(cut.max(bytes.len() / 2));
            bytes
        },
    )
}

proptest! {
    #[test]
    fn patch_grammar(data in prop_oneof![any::<Vec<u8>>(), mutated("patch_grammar")]) {
        shiitake_fuzz::patch_grammar(&data);
    }

    #[test]
    fn command_decoder(data in prop_oneof![any::<Vec<u8>>(), mutated("command_decoder")]) {
        shiitake_fuzz::command_decoder(&data);
    }

    #[test]
    fn sse_frames(data in prop_oneof![any::<Vec<u8>>(), mutated("sse_frames")]) {
        shiitake_fuzz::sse_frames(&data);
    }

    #[test]
    fn schema_subset(data in prop_oneof![any::<Vec<u8>>(), mutated("schema_subset")]) {
        shiitake_fuzz::schema_subset(&data);
    }

    #[test]
    fn path_resolution(data in prop_oneof![any::<Vec<u8>>(), mutated("path_resolution"), "[./a-z\\\\%\u{ff0e}]{0,40}".prop_map(String::into_bytes)]) {
        shiitake_fuzz::path_resolution(&data);
    }
}
