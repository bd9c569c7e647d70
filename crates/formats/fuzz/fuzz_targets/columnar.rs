#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // libfuzzer-sys's panic hook aborts on every panic, even one the reader contains: the
    // reader turns panics inside the Parquet crate into errors on purpose (see
    // `parquet_io::contain`). Back to the default hook (print, unwind); a panic that escapes
    // the reader still aborts, since libfuzzer-sys aborts when the target unwinds.
    static QUIET: std::sync::Once = std::sync::Once::new();
    QUIET.call_once(|| drop(std::panic::take_hook()));
    wattio_formats::fuzz_columnar(data, 1 << 20);
});
