#![no_main]
use libfuzzer_sys::fuzz_target;

// The first line is the --columns SPEC, the rest the trace.
fuzz_target!(|data: &[u8]| {
    wattio_formats::delimited::fuzz_csv(data);
});
