//! The NBD server state machine, handshake and transmission phases, fed arbitrary client
//! bytes in irregular pieces.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    wattio_live::proto::fuzz_server(data);
});
