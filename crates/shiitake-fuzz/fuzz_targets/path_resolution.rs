//! libFuzzer entry of [`shiitake_fuzz::path_resolution`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| shiitake_fuzz::path_resolution(data));
