//! libFuzzer entry of [`shiitake_fuzz::schema_subset`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| shiitake_fuzz::schema_subset(data));
