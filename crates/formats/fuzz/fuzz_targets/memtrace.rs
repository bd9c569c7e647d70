#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // As in the columnar target: panics the Parquet crate raises on corrupt files are turned
    // into errors by the reader (`parquet_io::contain`), so the default hook comes back.
    static QUIET: std::sync::Once = std::sync::Once::new();
    QUIET.call_once(|| drop(std::panic::take_hook()));
    let scratch = std::env::temp_dir().join(format!(
        "wattio-fuzz-memtrace-{}.parquet",
        std::process::id()
    ));
    wattio_formats::memtrace::fuzz_memtrace(data, &scratch, 1 << 16);
});
