//! The flash model's `[timing]` parser and log-block FTL: any TOML text either errors or
//! builds a model that survives a workload with a consistent FTL.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    wattio_devices::flash::fuzz_timing_toml(data);
});
