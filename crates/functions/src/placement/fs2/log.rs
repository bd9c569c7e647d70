//! The replica table's journal format (`journal_kb > 0`): a checkpoint of every (original,
//! replica) pair, 16 bytes each, and records of 17 bytes (a kind, then two little-endian
//! block numbers) — a replica made, an original's replicas dropped, one replica dropped.
//!
//! Reading it back is a replay of whatever bytes the journal hands over (their CRCs pass;
//! live, the device is a user's image): a record of another length or kind, or a block past
//! the disk, is an error naming the entry, never a panic, and the table it builds keeps its
//! own invariants ([`ReplicaTable::check`]) whatever the order of the records.

use super::table::ReplicaTable;
use wattio_core::time::Nanos;

/// A replica made: (original, replica).
pub const ADD: u8 = 1;
/// Every replica of an original dropped: (original, 0).
pub const DROP_ORIGINAL: u8 = 2;
/// One replica dropped: (replica, 0).
pub const DROP_REPLICA: u8 = 3;

/// Bytes of a record.
pub const RECORD_BYTES: usize = 17;
/// Bytes of a checkpoint entry.
pub const PAIR_BYTES: usize = 16;

/// One record.
pub fn record(kind: u8, a: u64, b: u64) -> [u8; RECORD_BYTES] {
    let mut r = [0u8; RECORD_BYTES];
    r[0] = kind;
    r[1..9].copy_from_slice(&a.to_le_bytes());
    r[9..17].copy_from_slice(&b.to_le_bytes());
    r
}

/// A checkpoint of `pairs` (original, replica).
pub fn snapshot(pairs: impl Iterator<Item = (u64, u64)>) -> Vec<u8> {
    let mut snap = Vec::new();
    for (o, r) in pairs {
        snap.extend_from_slice(&o.to_le_bytes());
        snap.extend_from_slice(&r.to_le_bytes());
    }
    snap
}

fn u64_at(b: &[u8]) -> u64 {
    u64::from_le_bytes(b[..8].try_into().expect("8 bytes"))
}

/// Rebuild `table` (empty) from a checkpoint and the records after it, on a disk of
/// `blocks` blocks; `now` is the replicas' last access. Errors name the entry.
pub fn replay(
    table: &mut ReplicaTable,
    blocks: u64,
    snapshot: &[u8],
    records: &[Vec<u8>],
    now: Nanos,
) -> Result<(), String> {
    if !snapshot.len().is_multiple_of(PAIR_BYTES) {
        return Err(format!(
            "checkpoint of {} bytes: expected a multiple of {PAIR_BYTES}",
            snapshot.len()
        ));
    }
    let in_range = |what: &str, b: u64| {
        if b < blocks {
            Ok(())
        } else {
            Err(format!("{what}: block {b} past the disk's {blocks} blocks"))
        }
    };
    for (k, c) in snapshot.chunks_exact(PAIR_BYTES).enumerate() {
        let (o, r) = (u64_at(&c[..8]), u64_at(&c[8..]));
        let what = format!("checkpoint entry {k}");
        in_range(&what, o)?;
        in_range(&what, r)?;
        if !table.add(o, r, now) {
            return Err(format!(
                "{what}: original {o} has more replicas than the most a block may have"
            ));
        }
    }
    let mut dropped = Vec::new();
    for (k, b) in records.iter().enumerate() {
        let what = format!("record {k}");
        if b.len() != RECORD_BYTES {
            return Err(format!(
                "{what}: {} bytes, expected {RECORD_BYTES}",
                b.len()
            ));
        }
        let (a, c) = (u64_at(&b[1..9]), u64_at(&b[9..17]));
        in_range(&what, a)?;
        match b[0] {
            ADD => {
                in_range(&what, c)?;
                if !table.add(a, c, now) {
                    return Err(format!(
                        "{what}: original {a} has more replicas than the most a block may have"
                    ));
                }
            }
            DROP_ORIGINAL => table.remove_original(a, &mut dropped),
            DROP_REPLICA => {
                table.remove_replica(a);
            }
            kind => {
                return Err(format!(
                    "{what}: kind {kind}, expected {ADD} (replica made), {DROP_ORIGINAL} (original's replicas dropped) or {DROP_REPLICA} (replica dropped)"
                ))
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> ReplicaTable {
        ReplicaTable::new(1024)
    }

    #[test]
    fn a_checkpoint_and_records_replay_to_the_table_that_wrote_them() {
        let snap = snapshot([(10, 500), (10, 501), (20, 600)].into_iter());
        let recs = vec![
            record(ADD, 30, 700).to_vec(),
            record(DROP_REPLICA, 501, 0).to_vec(),
            record(DROP_ORIGINAL, 20, 0).to_vec(),
            record(ADD, 10, 502).to_vec(),
        ];
        let mut t = table();
        replay(&mut t, 1000, &snap, &recs, 5).unwrap();
        assert_eq!(t.pairs(), vec![(10, 500), (10, 502), (30, 700)]);
        assert_eq!(t.original_of(700), Some(30));
        assert_eq!(t.original_of(600), None);
        t.check().unwrap();
        // And its checkpoint replays to the same table.
        let mut again = table();
        replay(&mut again, 1000, &snapshot(t.pairs().into_iter()), &[], 5).unwrap();
        assert_eq!(again.pairs(), t.pairs());
    }

    #[test]
    fn a_replica_recorded_twice_or_for_another_original_is_held_once() {
        let recs = [
            record(ADD, 10, 500).to_vec(),
            record(ADD, 10, 500).to_vec(),
            record(ADD, 20, 500).to_vec(),
            record(DROP_REPLICA, 500, 0).to_vec(),
        ];
        let mut t = table();
        replay(&mut t, 1000, &[], &recs[..2], 0).unwrap();
        assert_eq!(t.get(10).unwrap().replicas(), &[500]);
        t.check().unwrap();
        replay(&mut t, 1000, &[], &recs[2..3], 0).unwrap();
        // The later record wins: 500 is 20's, and 10 keeps no replica it does not hold.
        assert!(t.get(10).is_none());
        assert_eq!(t.pairs(), vec![(20, 500)]);
        replay(&mut t, 1000, &[], &recs[3..], 0).unwrap();
        assert!(t.is_empty());
        t.check().unwrap();
    }

    #[test]
    fn bad_entries_are_named() {
        let mut t = table();
        assert_eq!(
            replay(&mut t, 1000, &[0; 17], &[], 0),
            Err("checkpoint of 17 bytes: expected a multiple of 16".into())
        );
        assert_eq!(
            replay(&mut t, 1000, &snapshot([(1, 1000)].into_iter()), &[], 0),
            Err("checkpoint entry 0: block 1000 past the disk's 1000 blocks".into())
        );
        assert_eq!(
            replay(
                &mut t,
                1000,
                &[],
                &[record(ADD, 1, 2).to_vec(), vec![1; 16]],
                0
            ),
            Err("record 1: 16 bytes, expected 17".into())
        );
        assert_eq!(
            replay(&mut table(), 1000, &[], &[record(9, 1, 2).to_vec()], 0),
            Err("record 0: kind 9, expected 1 (replica made), 2 (original's replicas dropped) or 3 (replica dropped)".into())
        );
        let full: Vec<Vec<u8>> = (0..=super::super::MAX_DEGREE)
            .map(|k| record(ADD, 7, 100 + k).to_vec())
            .collect();
        let e = replay(&mut table(), 1000, &[], &full, 0).unwrap_err();
        assert!(
            e.starts_with(&format!(
                "record {}: original 7 has more replicas",
                full.len() - 1
            )),
            "{e}"
        );
    }
}
