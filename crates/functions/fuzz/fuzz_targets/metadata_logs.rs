#![no_main]
//! RAID-5's and PARAID's metadata-log decoders on arbitrary checkpoints and records
//! (`wattio_functions::fuzz::metadata_logs`).
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    wattio_functions::fuzz::metadata_logs(data);
});
