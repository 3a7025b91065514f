//! libFuzzer entry of [`shiitake_fuzz::command_decoder`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| shiitake_fuzz::command_decoder(data));
