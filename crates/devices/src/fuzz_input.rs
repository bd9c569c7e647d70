//! What the timing fuzz targets share: the input as a `[timing]` table, and a workload
//! stream seeded from the input's bytes (so that a crash replays from its input alone).

/// `data` as a TOML table, if it is UTF-8 TOML.
pub(crate) fn timing_table(data: &[u8]) -> Option<toml::Table> {
    toml::from_str(std::str::from_utf8(data).ok()?).ok()
}

/// Xorshift64 seeded by the FNV-1a hash of `data`.
pub(crate) struct Stream(u64);

impl Stream {
    pub(crate) fn of(data: &[u8]) -> Stream {
        Stream(data.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
            (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
        }))
    }

    pub(crate) fn next(&mut self) -> u64 {
        // A zero state would stay zero: a stuck stream is still a valid (dull) workload.
        let x = &mut self.0;
        *x ^= *x << 13;
        *x ^= *x >> 7;
        *x ^= *x << 17;
        *x
    }
}
