//! libFuzzer entry of [`shiitake_fuzz::patch_grammar`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| shiitake_fuzz::patch_grammar(data));
