#![no_main]
//! DiskSim parameter files (libparam), the conversion to a timing table, and `.seek`
//! tables: arbitrary input must give an error, never a panic.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    wattio_devices::disksim::fuzz_entry(data);
});
