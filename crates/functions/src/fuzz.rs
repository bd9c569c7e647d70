//! Fuzz entry points (`crates/functions/fuzz`; the committed corpora are replayed with
//! deterministic mutants by `tests/fuzz_corpus.rs` in every `cargo test`).
//!
//! **Metadata logs.** A function's log is read back from a device at every start, and live
//! that device is a user's image: whatever bytes the journal hands over (its CRCs pass), the
//! replay must answer with the state or an error naming the entry — never a panic, never an
//! allocation the bytes choose. [`metadata_logs`] drives the replays that decode a log on
//! their own (RAID-5's bad-page list with its replacement, PARAID's gear, dirty list and
//! bad pages, EXCES's indirection map, FS2's replica table) with a geometry and a
//! checkpoint and records taken from the input.

use crate::cache::exces::map_log;
use crate::placement::fs2::log as fs2;
use crate::placement::fs2::table::ReplicaTable;
use crate::raid::paraid::persist as paraid;
use crate::raid::stripe::persist as raid5;

/// A fuzz input's geometry bytes, checkpoint and records.
type Split<'a> = (&'a [u8], &'a [u8], Vec<Vec<u8>>);

/// The input, split: a geometry (`geometry` bytes), then a checkpoint (a two-byte little-
/// endian length, at most 16 KiB, then its bytes) and records (each a one-byte length, then
/// its bytes).
fn split(data: &[u8], geometry: usize) -> Option<Split<'_>> {
    let (geo, rest) = data.split_at_checked(geometry)?;
    let (n, rest) = rest.split_at_checked(2)?;
    let n = (u16::from_le_bytes([n[0], n[1]]) as usize % (16 << 10)).min(rest.len());
    let (snap, mut rest) = rest.split_at(n);
    let mut records = Vec::new();
    while let Some((&len, tail)) = rest.split_first() {
        let (r, tail) = tail.split_at(len as usize % (tail.len() + 1));
        records.push(r.to_vec());
        rest = tail;
    }
    Some((geo, snap, records))
}

fn u64_of(b: &[u8]) -> u64 {
    let mut x = [0u8; 8];
    x[..b.len().min(8)].copy_from_slice(&b[..b.len().min(8)]);
    u64::from_le_bytes(x)
}

/// Replay a checkpoint and records drawn from `data` through RAID-5's, PARAID's, EXCES's or
/// FS2's log decoder (the first byte chooses, modulo 4 in that order): true if the log was
/// read back (an error is the other answer; a panic is a bug). A RAID-5 state, an EXCES map
/// or an FS2 table read back must checkpoint to bytes that replay to the same state; every
/// state must lie inside its geometry, and FS2's table keep its own invariants.
pub fn metadata_logs(data: &[u8]) -> bool {
    let Some((&which, data)) = data.split_first() else {
        return false;
    };
    if which % 4 == 3 {
        let Some((geo, snap, records)) = split(data, 6) else {
            return false;
        };
        // Up to 2^32 blocks, regions of 1 to 2^16 blocks.
        let blocks = u64_of(&geo[..4]);
        let region = 1 + u64_of(&geo[4..6]);
        let mut table = ReplicaTable::new(region);
        if fs2::replay(&mut table, blocks, snap, &records, 0).is_err() {
            return false;
        }
        if let Err(e) = table.check() {
            panic!("the replayed table is inconsistent: {e}");
        }
        let pairs = table.pairs();
        assert!(pairs.iter().all(|&(o, r)| o < blocks && r < blocks));
        assert_eq!(pairs.len(), table.len());
        let again = fs2::snapshot(pairs.iter().copied());
        let mut back = ReplicaTable::new(region);
        assert_eq!(fs2::replay(&mut back, blocks, &again, &[], 0), Ok(()));
        assert_eq!(back.pairs(), pairs);
        return true;
    }
    if which % 4 == 2 {
        let Some((geo, snap, records)) = split(data, 5) else {
            return false;
        };
        // Up to 65,536 ECD pages over up to 2^24 disk pages.
        let k = 1 + u64_of(&geo[..2]) as usize;
        let disk_pages = u64_of(&geo[2..5]);
        let Ok(map) = map_log::rebuild(k, disk_pages, snap, &records) else {
            return false;
        };
        let mut seen = std::collections::HashSet::new();
        for &p in map.iter().filter(|&&p| p != map_log::UNMAPPED) {
            assert!(
                p < disk_pages && seen.insert(p),
                "page {p} out of range or mapped twice"
            );
        }
        let again = map_log::snapshot(&map);
        assert!(again.len() as u64 <= map_log::snapshot_bytes(k as u64));
        assert_eq!(
            map_log::rebuild(k, disk_pages, &again, &[]).as_ref(),
            Ok(&map)
        );
        return true;
    }
    if which % 4 == 0 {
        let Some((geo, snap, records)) = split(data, 8) else {
            return false;
        };
        // Members 3–64, up to 2^20 pages each, the list's bound up to 4,096.
        let disks = 3 + geo[0] as usize % 62;
        let per_chunk = 1u64 << (geo[1] % 5);
        let pages = (u64_of(&geo[2..5]) % (1 << 20)) / per_chunk * per_chunk;
        let shape = raid5::Shape {
            disks,
            pages,
            max: 1 + u64_of(&geo[5..7]) % 4096,
            stripes: pages / per_chunk,
            spare: geo[7] & 1 == 1,
            // Room for a write-intent bitmap of single-stripe regions, or none.
            regions: if geo[7] & 2 != 0 {
                pages / per_chunk
            } else {
                0
            },
            copies: geo[7] & 4 != 0,
        };
        let Ok(got) = shape.replay(snap, &records) else {
            return false;
        };
        let again = shape.snapshot(
            got.bad.iter(),
            got.faulty_member(),
            got.replaced,
            got.copies,
            &got.bitmap,
        );
        assert!(again.len() as u64 <= shape.snapshot_bytes());
        assert_eq!(shape.replay(&again, &[]).as_ref(), Ok(&got));
        true
    } else {
        let Some((geo, snap, records)) = split(data, 5) else {
            return false;
        };
        // 2–16 disks, the lowest gear's 1 to all but one, up to 2^16 chunks, 1–8 gears.
        let disks = 2 + geo[0] as usize % 15;
        let shape = paraid::Shape {
            low: 1 + geo[1] as usize % (disks - 1),
            disks,
            chunks: u64_of(&geo[2..4]),
            gears: 1 + geo[4] as usize % 8,
        };
        let Ok((gear, dirty, bad)) = shape.replay(snap, &records) else {
            return false;
        };
        assert!(gear.is_none_or(|g| g < shape.gears));
        assert!(dirty
            .keys()
            .all(|&(d, c)| d >= shape.low && d < shape.disks && c < shape.chunks));
        assert!(bad.len() as u64 <= paraid::MAX_BAD_PAGES);
        true
    }
}

#[cfg(test)]
mod seeds {
    //! Writes the committed seeds (`WATTIO_WRITE_FUZZ_SEEDS=1 cargo test -p wattio-functions
    //! --lib fuzz::seeds`): real checkpoints and records of both logs, in the input layout of
    //! [`super::metadata_logs`].
    use super::*;
    use crate::raid::paraid::layer::Side;
    use paraid::Record;

    fn input(which: u8, geo: &[u8], snap: &[u8], records: &[Vec<u8>]) -> Vec<u8> {
        let mut v = vec![which];
        v.extend_from_slice(geo);
        v.extend_from_slice(&(snap.len() as u16).to_le_bytes());
        v.extend_from_slice(snap);
        for r in records {
            v.push(r.len() as u8);
            v.extend_from_slice(r);
        }
        v
    }

    #[test]
    fn write() {
        let Some(_) = std::env::var_os("WATTIO_WRITE_FUZZ_SEEDS") else {
            return;
        };
        let dir =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/metadata_logs");
        let put = |name: &str, v: Vec<u8>| std::fs::write(dir.join(name), v).unwrap();
        // RAID-5, three members, 16 pages a chunk, 4,000 pages, bound 4,096, a spare.
        let geo = [0u8, 4, 0xa0, 0x0f, 0, 0xff, 0x0f, 1];
        let shape = raid5::Shape {
            disks: 3,
            pages: 4000,
            max: 4096,
            stripes: 250,
            spare: true,
            regions: 0,
            copies: false,
        };
        let none = raid5::Bitmap::default();
        let snap = shape.snapshot(
            [(1, 9), (1, 3), (2, 40)].iter(),
            None,
            Some((1, 1)),
            0,
            &none,
        );
        let recs = vec![
            raid5::replaced(1, 2).to_vec(),
            raid5::cleared(1, 3).to_vec(),
            raid5::record(1, 5).to_vec(),
            raid5::record(0, 3999).to_vec(),
        ];
        put("seed_raid5_replacement", input(0, &geo, &snap, &recs));
        // Member 1 failed (faulty), its recovery onto the spare two stripes in.
        let snap = shape.snapshot([(2, 40)].iter(), Some(1), Some((1, 2)), 0, &none);
        let recs = vec![
            raid5::replaced(1, 3).to_vec(),
            raid5::record(0, 3999).to_vec(),
        ];
        put("seed_raid5_faulty", input(0, &geo, &snap, &recs));
        let recs: Vec<Vec<u8>> = (0..20u64)
            .map(|p| raid5::record((p % 3) as usize, p * 7).to_vec())
            .collect();
        put("seed_raid5_records", input(0, &geo, &[], &recs));
        // The same with room for a write-intent bitmap: a checkpoint of regions of 16
        // stripes (3 clean), then a geometry change and region records.
        let geo = [0u8, 4, 0xa0, 0x0f, 0, 0xff, 0x0f, 3];
        let shape = raid5::Shape {
            regions: 250,
            ..shape
        };
        let mut bitmap = raid5::Bitmap::new(16, 250, false);
        for r in [0, 5, 15] {
            bitmap.set(r, true);
        }
        let snap = shape.snapshot([(2, 40)].iter(), None, None, 0, &bitmap);
        let recs = vec![
            raid5::intent_dirty(5).to_vec(),
            raid5::intent_clean(7).to_vec(),
            raid5::intent_geometry(4, true).to_vec(),
            raid5::intent_dirty(62).to_vec(),
        ];
        put("seed_raid5_bitmap", input(0, &geo, &snap, &recs));
        // A copy on every member: a checkpoint naming members 0 and 2's copies made, then
        // all three.
        let geo = [0u8, 4, 0xa0, 0x0f, 0, 0xff, 0x0f, 5];
        let shape = raid5::Shape {
            regions: 0,
            copies: true,
            ..shape
        };
        let snap = shape.snapshot([(2, 40)].iter(), None, None, 0b101, &none);
        let recs = vec![raid5::copies(0b111).to_vec(), raid5::record(1, 3).to_vec()];
        put("seed_raid5_copies", input(0, &geo, &snap, &recs));
        // PARAID, five disks, the lowest gear two, 1,000 chunks, three gears.
        let geo = [3u8, 1, 0xe8, 0x03, 2];
        let shape = paraid::Shape {
            low: 2,
            disks: 5,
            chunks: 1000,
            gears: 3,
        };
        let dirty = [
            ((2, 7), Side::Replica),
            ((3, 999), Side::Original),
            ((4, 0), Side::Replica),
        ];
        let snap = shape.snapshot(1, dirty.into_iter(), &[(0, 1, 12), (2, 4, 77)]);
        let recs = vec![
            Record::Gear(2).encode().to_vec(),
            Record::Newer {
                disk: 3,
                chunk: 5,
                side: Side::Replica,
            }
            .encode()
            .to_vec(),
            Record::Clean { disk: 2, chunk: 7 }.encode().to_vec(),
            Record::Bad {
                level: 1,
                disk: 2,
                page: 300,
            }
            .encode()
            .to_vec(),
        ];
        put("seed_paraid_sparse", input(1, &geo, &snap, &recs));
        let many: Vec<((usize, u64), Side)> = (2..5)
            .flat_map(|d| (0..200).map(move |c| ((d, c * 5), Side::Original)))
            .collect();
        let snap = shape.snapshot(0, many.into_iter(), &[]);
        put("seed_paraid_bitmap", input(1, &geo, &snap, &[]));
        // EXCES, 64 ECD pages over 10,000 disk pages: a snapshot, then records that map,
        // move (page 7 to slot 9) and free pages.
        let geo = [63u8, 0, 0x10, 0x27, 0];
        let mut map = vec![map_log::UNMAPPED; 64];
        for (slot, page) in [(0, 7u64), (1, 9_999), (5, 100), (63, 0)] {
            map[slot] = page;
        }
        let snap = map_log::snapshot(&map);
        let mut a = Vec::new();
        map_log::encode(&[(9, 7), (2, 4_000)], &mut a);
        let mut b = Vec::new();
        map_log::encode(&[(5, map_log::UNMAPPED)], &mut b);
        put("seed_exces_map", input(2, &geo, &snap, &[a, b]));
        // FS2, 100,000 blocks in regions of 1,000: a checkpoint of three pairs, then
        // records that add, drop one replica and drop an original's.
        let geo = [0xa0u8, 0x86, 0x01, 0, 0xe7, 0x03];
        let snap = fs2::snapshot([(10, 5_000), (10, 5_001), (99_999, 0)].into_iter());
        let recs = vec![
            fs2::record(fs2::ADD, 20, 6_000).to_vec(),
            fs2::record(fs2::DROP_REPLICA, 5_001, 0).to_vec(),
            fs2::record(fs2::DROP_ORIGINAL, 99_999, 0).to_vec(),
            fs2::record(fs2::ADD, 10, 5_002).to_vec(),
        ];
        put("seed_fs2_table", input(3, &geo, &snap, &recs));
    }
}
