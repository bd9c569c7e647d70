#![no_main]
//! Run configs and inline device specs: parse, validate, assemble, and run a few requests.
//! Anything but a clean error is a bug.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = wattio_engine::fuzz::config(data);
});
