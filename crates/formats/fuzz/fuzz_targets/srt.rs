#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    wattio_formats::fuzz_read("srt", data);
});
