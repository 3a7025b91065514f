//! libFuzzer entry of [`shiitake_fuzz::sse_frames`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| shiitake_fuzz::sse_frames(data));
