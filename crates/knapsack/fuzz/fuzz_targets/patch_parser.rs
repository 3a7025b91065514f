//! Fuzzes the patch parser: any input must parse or fail without panicking, and
//! every parsed patch must survive a print/parse round trip.
#![no_main]

use knapsack::patch::{parse_patch, present, print_patch};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(patch) = parse_patch(text) {
        let printed = print_patch(&patch);
        assert_eq!(parse_patch(&printed).ok(), Some(patch));
    }
    let _summary = present(text);
});
