//! EXCES's persistent indirection map: its layout on the ECD and its records, kept in a
//! [`Journal`](wattio_core::journal::Journal) (docs/metadata.md) in the blocks of the ECD
//! right after the k cache pages.
//!
//! The log says, per ECD page, which disk page it holds. A **record** is a list of entries
//! (`slot` u32, `page` u64, little-endian; `page = UNMAPPED` frees the slot); a
//! **snapshot** is the whole map, one u64 per ECD page. A later entry naming a page
//! another slot holds moves it (the other slot is freed). Dirty bits are not persisted:
//! after a restart every mapped page is dirty, as the paper's recovery assumes.

use std::collections::HashMap;
use wattio_core::journal::JournalConfig;

/// The map value of an ECD page that holds no disk page.
pub const UNMAPPED: u64 = u64::MAX;
/// Bytes of one record entry.
pub const ENTRY: usize = 12;
/// Entries per record: a record with its 32-byte header fits one 4 KiB log block.
pub const ENTRIES_PER_RECORD: usize = (4096 - 32) / ENTRY;

/// The snapshot slot size for `k` ECD pages.
pub fn snapshot_bytes(k: u64) -> u64 {
    8 * k
}

/// The journal after the snapshots: 64 blocks plus one per 1024 ECD pages, so a full sync
/// of every page (k entries, 12 B each) takes about three journals' worth before a
/// checkpoint: checkpoints stay rare next to records.
pub fn journal_bytes(k: u64) -> u64 {
    (64 + k / 1024) * 4096
}

/// Bytes of the map's region for `k` ECD pages.
pub fn region_len(k: u64) -> u64 {
    JournalConfig::region_len(snapshot_bytes(k), journal_bytes(k))
}

/// The most cache pages that fit on a device of `pages` pages with their map.
pub fn fitting(pages: u64) -> u64 {
    // region_len grows with k, so k = pages - region(pages) leaves room for region(k).
    pages.saturating_sub(region_len(pages).div_ceil(4096))
}

/// Append the entries to `out` (a record's payload).
pub fn encode(entries: &[(u32, u64)], out: &mut Vec<u8>) {
    for &(slot, page) in entries {
        out.extend_from_slice(&slot.to_le_bytes());
        out.extend_from_slice(&page.to_le_bytes());
    }
}

/// The snapshot of the whole map.
pub fn snapshot(map: &[u64]) -> Vec<u8> {
    map.iter().flat_map(|p| p.to_le_bytes()).collect()
}

/// The map (per ECD page, its disk page or [`UNMAPPED`]) from what the log recovered, or
/// why it cannot be used.
pub fn rebuild(
    k: usize,
    disk_pages: u64,
    snapshot: &[u8],
    records: &[Vec<u8>],
) -> Result<Vec<u64>, String> {
    let mut map = vec![UNMAPPED; k];
    let mut at: HashMap<u64, u32> = HashMap::new();
    let set = |slot: u32, page: u64, at: &mut HashMap<u64, u32>, map: &mut Vec<u64>| {
        let old = map[slot as usize];
        if old != UNMAPPED {
            at.remove(&old);
        }
        if page != UNMAPPED {
            if let Some(other) = at.insert(page, slot) {
                map[other as usize] = UNMAPPED;
            }
        }
        map[slot as usize] = page;
    };
    let check = |page: u64, what: String| {
        if page != UNMAPPED && page >= disk_pages {
            return Err(format!(
                "{what}: disk page {page} is past the disk's end ({disk_pages} pages)"
            ));
        }
        Ok(())
    };
    if !snapshot.is_empty() {
        if snapshot.len() != 8 * k {
            return Err(format!(
                "the map snapshot holds {} bytes, expected {} (8 per ECD page, {k} pages)",
                snapshot.len(),
                8 * k
            ));
        }
        for (slot, b) in snapshot.chunks_exact(8).enumerate() {
            let page = u64::from_le_bytes(b.try_into().expect("8 bytes"));
            check(page, format!("map snapshot byte {}", 8 * slot))?;
            if page != UNMAPPED && at.contains_key(&page) {
                return Err(format!(
                    "map snapshot byte {}: disk page {page} is mapped twice",
                    8 * slot
                ));
            }
            set(slot as u32, page, &mut at, &mut map);
        }
    }
    for (n, r) in records.iter().enumerate() {
        if r.len() % ENTRY != 0 {
            return Err(format!(
                "map record {n}: {} bytes, expected a multiple of {ENTRY}",
                r.len()
            ));
        }
        for (e, b) in r.chunks_exact(ENTRY).enumerate() {
            let slot = u32::from_le_bytes(b[..4].try_into().expect("4 bytes"));
            let page = u64::from_le_bytes(b[4..].try_into().expect("8 bytes"));
            let what = format!("map record {n} byte {}", e * ENTRY);
            if slot as usize >= k {
                return Err(format!(
                    "{what}: ECD page {slot} is past the cache ({k} pages)"
                ));
            }
            check(page, what)?;
            set(slot, page, &mut at, &mut map);
        }
    }
    Ok(map)
}
