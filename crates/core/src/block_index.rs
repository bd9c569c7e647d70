//! A map from block (or page) numbers to small integers, for tables keyed by a device's
//! block number: two loads through paged arrays instead of a hash-table probe.
//!
//! A page covers `PAGE` consecutive blocks and is allocated when a block in it is first
//! set, so memory follows the blocks set (1 KiB per MiB of 4 KiB blocks touched), not the
//! device's size; directories of pages cover 1 GiB of such blocks each. Consecutive blocks
//! (the blocks of one request) are adjacent in memory. The values are typically slots of
//! a slab kept beside the index (FS2's replica table, EXCES's page rankers).

/// Blocks per page (1 KiB of `u32`s, 1 MiB of device), and pages per directory
/// (8 KiB of pointers, 1 GiB of device): a device of 20 TB needs 160 KB of directories at most.
const PAGE_SHIFT: u32 = 8;
const PAGE: usize = 1 << PAGE_SHIFT;
const DIR_SHIFT: u32 = 10;
const DIR: usize = 1 << DIR_SHIFT;

type Page = Box<[u32; PAGE]>;
type Dir = Box<[Option<Page>; DIR]>;

/// Block → a `u32` below `u32::MAX` (stored + 1: 0 is none), in pages allocated on first use.
#[derive(Clone, Debug, Default)]
pub struct BlockIndex {
    dirs: Vec<Option<Dir>>,
}

impl BlockIndex {
    #[inline]
    fn page(&self, block: u64) -> Option<&Page> {
        let d = self
            .dirs
            .get((block >> (PAGE_SHIFT + DIR_SHIFT)) as usize)?;
        d.as_ref()?[(block >> PAGE_SHIFT) as usize & (DIR - 1)].as_ref()
    }

    /// The value of `block`, if set.
    #[inline]
    pub fn get(&self, block: u64) -> Option<u32> {
        let v = self.page(block)?[block as usize & (PAGE - 1)];
        (v != 0).then(|| v - 1)
    }

    /// Set `block` to `slot` (below `u32::MAX`). The directory grows to `block`: callers
    /// set only blocks of a device (bounded by its size), never a number an input chose.
    pub fn set(&mut self, block: u64, slot: u32) {
        debug_assert!(slot < u32::MAX);
        let d = (block >> (PAGE_SHIFT + DIR_SHIFT)) as usize;
        if d >= self.dirs.len() {
            self.dirs.resize_with(d + 1, || None);
        }
        let dir = self.dirs[d].get_or_insert_with(|| Box::new([const { None }; DIR]));
        let page = dir[(block >> PAGE_SHIFT) as usize & (DIR - 1)]
            .get_or_insert_with(|| Box::new([0; PAGE]));
        page[block as usize & (PAGE - 1)] = slot + 1;
    }

    /// Clear `block`; the value it had.
    pub fn take(&mut self, block: u64) -> Option<u32> {
        let d = self
            .dirs
            .get_mut((block >> (PAGE_SHIFT + DIR_SHIFT)) as usize)?;
        let page = d.as_mut()?[(block >> PAGE_SHIFT) as usize & (DIR - 1)].as_mut()?;
        let v = std::mem::take(&mut page[block as usize & (PAGE - 1)]);
        (v != 0).then(|| v - 1)
    }

    /// Blocks of `b0..b1` with an entry, in order.
    pub fn blocks_in(&self, b0: u64, b1: u64) -> impl Iterator<Item = u64> + '_ {
        (b0..b1).filter(move |&b| self.get(b).is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_across_pages_and_directories_keep_their_values() {
        let mut ix = BlockIndex::default();
        let far = 3 * (PAGE * DIR) as u64 + 17;
        for (b, v) in [
            (0, 0),
            (255, 1),
            (256, 2),
            (far, 3),
            (far + 1, u32::MAX - 1),
        ] {
            assert_eq!(ix.get(b), None);
            ix.set(b, v);
            assert_eq!(ix.get(b), Some(v));
        }
        assert_eq!(ix.get(1), None, "a neighbour in the same page");
        assert_eq!(ix.get(far - PAGE as u64), None, "a page not allocated");
        assert_eq!(ix.get(u64::MAX), None, "past every directory");
        assert_eq!(ix.blocks_in(250, 260).collect::<Vec<_>>(), vec![255, 256]);
        assert_eq!(ix.take(255), Some(1));
        assert_eq!(ix.take(255), None);
        assert_eq!(ix.take(u64::MAX), None);
        assert_eq!(
            ix.blocks_in(0, far + 2).collect::<Vec<_>>(),
            vec![0, 256, far, far + 1]
        );
    }
}
