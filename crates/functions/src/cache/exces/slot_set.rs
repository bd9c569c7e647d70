//! A set of ECD slots as a bitmap: the planner's outgoing list (mapped pages that left the
//! top-k set). Pages enter and leave it at every top-k change; the planner reads it once a
//! reconfiguration, in slot order. One bit a slot (8 KiB for 65,536 slots) and O(1)
//! membership changes, where an ordered tree paid a descent for each.

#[derive(Clone, Debug, Default)]
pub struct SlotSet {
    words: Vec<u64>,
    len: usize,
}

impl SlotSet {
    /// An empty set of slots `0..slots`.
    pub fn new(slots: usize) -> SlotSet {
        SlotSet {
            words: vec![0; slots.div_ceil(64)],
            len: 0,
        }
    }

    pub fn insert(&mut self, slot: u32) -> bool {
        let (w, bit) = (slot as usize / 64, 1u64 << (slot % 64));
        let new = self.words[w] & bit == 0;
        self.words[w] |= bit;
        self.len += new as usize;
        new
    }

    pub fn remove(&mut self, slot: u32) -> bool {
        let (w, bit) = (slot as usize / 64, 1u64 << (slot % 64));
        let had = self.words[w] & bit != 0;
        self.words[w] &= !bit;
        self.len -= had as usize;
        had
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The slots in ascending order.
    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.words.iter().enumerate().flat_map(|(w, &word)| {
            let mut rest = word;
            std::iter::from_fn(move || {
                if rest == 0 {
                    return None;
                }
                let b = rest.trailing_zeros();
                rest &= rest - 1;
                Some(w as u32 * 64 + b)
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn agrees_with_an_ordered_set() {
        // A fixed pseudo-random sequence of inserts and removes over 200 slots (four
        // words, the last partly used), checked after every step.
        let mut s = SlotSet::new(200);
        let mut want = BTreeSet::new();
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..5000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let slot = (x % 200) as u32;
            if x & (1 << 40) != 0 {
                assert_eq!(s.insert(slot), want.insert(slot));
            } else {
                assert_eq!(s.remove(slot), want.remove(&slot));
            }
            assert_eq!(s.len, want.len());
            assert_eq!(s.is_empty(), want.is_empty());
        }
        assert!(!want.is_empty());
        assert_eq!(
            s.iter().collect::<Vec<_>>(),
            want.iter().copied().collect::<Vec<_>>()
        );
        assert!(s.insert(199) || want.contains(&199));
        assert_eq!(s.iter().last(), Some(199));
    }
}
