//! FxHash (rustc's): a fast, deterministic hasher for the small integer keys of hot paths
//! (block numbers, I/O ids, timer keys), where SipHash dominated the profile. Not for keys
//! an adversary chooses to collide: every map keyed this way is bounded by its owner.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

#[derive(Default, Clone, Copy)]
pub struct Fx(u64);

impl Hasher for Fx {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.write_u64(*b as u64);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    fn write_u32(&mut self, v: u32) {
        self.write_u64(v as u64)
    }
    fn write_u16(&mut self, v: u16) {
        self.write_u64(v as u64)
    }
    fn write_u8(&mut self, v: u8) {
        self.write_u64(v as u64)
    }
    fn write_usize(&mut self, v: usize) {
        self.write_u64(v as u64)
    }
}

pub type FxBuild = BuildHasherDefault<Fx>;
pub type FxHashMap<K, V> = HashMap<K, V, FxBuild>;
pub type FxHashSet<K> = HashSet<K, FxBuild>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::BuildHasher;

    #[test]
    fn the_same_key_hashes_the_same_in_every_process() {
        // Hand-computed: (0.rotl(5) ^ 1) × 0x517cc1b727220a95 mod 2^64.
        assert_eq!(FxBuild::default().hash_one(1u64), 0x517c_c1b7_2722_0a95);
        let m: FxHashMap<u64, u32> = (0..1000).map(|k| (k, k as u32)).collect();
        assert_eq!(m[&777], 777);
    }
}
