#![no_main]
//! Memory-run configs (`[memory]`, `[[process]]`, `[[dma]]`): parse, validate and run them
//! capped. Anything but a clean error is a bug.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = wattio_engine::fuzz::memory_config(data);
});
