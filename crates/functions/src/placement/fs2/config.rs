//! `kind = "fs2"`: its configuration, checks, builder and swarm generator.

use super::{Fs2, BLOCK};
use crate::placement::replica::{Footprint, Vendor};
use crate::registry::{self, range, Draw, Kind, SwarmDevices};
use serde::Deserialize;
use std::path::PathBuf;
use wattio_core::function::Function;
use wattio_core::time::{secs_to_ns, Nanos};

pub static KIND: Kind = Kind {
    kind: "fs2",
    module: "placement::fs2",
    summary: "FS2: replicas of scattered hot blocks in free disk space near the head; reads go to the nearest copy",
    source: "Huang, Hung & Shin, FS2: Dynamic Data Replication in Free Disk Space for Improving Disk Performance and Energy Consumption, SOSP 2005 (Huang thesis 2006, ch. 5)",
    doc: "docs/functions/fs2.md",
    check: |t, ctx| Params::parse(t, ctx.key).map(|_| ()),
    build: |t, ctx| {
        let p = Params::parse(t, ctx.key)?;
        Ok(Box::new(Fs2::new(p, layer_index(ctx.key))?) as Box<dyn Function>)
    },
    swarm: Some(swarm),
};

/// The index of a `[[function]]` table from its key path (`function[2]` → 2; 0 if the key
/// names none).
fn layer_index(key: &str) -> usize {
    key.strip_prefix("function[")
        .and_then(|k| k.split(']').next())
        .and_then(|k| k.parse().ok())
        .unwrap_or(0)
}

/// Dynamic replication (hot regions, per epoch) or FS2-static (`mkfs2`: the given blocks,
/// once, to the middle of the disk).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    Dynamic,
    Static,
}

/// Where a dynamic replica's bytes come from: the host read that made its blocks
/// candidates (thesis Sec. 6 intro: replicas are committed to disk "anytime the replicas
/// are still in memory"; Sec. 5.4.1: the default I/O scheduler writes them), or a read of
/// the original from the disk when the copy starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CopyFrom {
    Memory,
    Disk,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Keys {
    disk: String,
    mode: Option<Mode>,
    head: Option<Head>,
    region_mb: Option<f64>,
    epoch_s: Option<f64>,
    neighbour_fraction: Option<f64>,
    degree: Option<u64>,
    high_watermark: Option<f64>,
    low_watermark: Option<f64>,
    critical_watermark: Option<f64>,
    cold_s: Option<f64>,
    cold_count: Option<u64>,
    copy_from: Option<CopyFrom>,
    stash_kb: Option<u64>,
    copy_depth: Option<u64>,
    copy_priority: Option<i64>,
    max_copy_kb: Option<u64>,
    max_candidates: Option<u64>,
    max_replica_blocks: Option<u64>,
    max_free_extents: Option<u64>,
    free: Option<Vec<[u64; 2]>>,
    ext_image: Option<PathBuf>,
    replicate: Option<Vec<[u64; 2]>>,
    journal_kb: Option<u64>,
    retry_failed_reads: Option<bool>,
    avoid: Option<String>,
    avoid_cylinders: Option<u64>,
    avoid_angle: Option<f64>,
    avoid_surfaces: Option<u64>,
}

/// Most replicas of one block.
pub const MAX_DEGREE: u64 = 4;
/// Most replica blocks the table holds: 2^26 blocks of 4 KiB are 256 GiB of replicas, about
/// 4 GiB of table at the layer's ~64 B per block.
pub const MAX_REPLICA_BLOCKS: u64 = 1 << 26;
/// Most free extents remembered (space beyond is forgotten, which is safe).
pub const MAX_FREE_EXTENTS: u64 = 1 << 24;
/// Most entries of `free` / `replicate` in a config.
pub const MAX_LIST: usize = 1 << 16;
const DAY_S: f64 = 86_400.0;
/// The largest journal (its region, with two snapshot slots, stays under the facility's
/// 256 MiB).
pub const MAX_JOURNAL_KB: u64 = 64 << 10;
/// The largest table a persisted FS2 keeps: its snapshot (16 bytes a replica block) fits
/// two slots of 64 MiB.
pub const MAX_PERSISTED_REPLICA_BLOCKS: u64 = 1 << 22;

/// Where FS2 predicts the head to be ("the last block accessed", thesis Sec. 5.3): at the
/// end of the last I/O it *sent* to the disk, or of the last one the disk *completed*
/// (they differ while I/O waits in the device's queue, e.g. behind copies).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Head {
    Sent,
    Completed,
}

/// A checked FS2 configuration (docs/functions/fs2.md gives every default's reason).
#[derive(Clone, Debug, PartialEq)]
pub struct Params {
    pub disk: String,
    pub mode: Mode,
    pub head: Head,
    /// Region size in bytes (a multiple of 4 KiB).
    pub region_bytes: u64,
    pub epoch: Nanos,
    /// Neighbouring regions searched when the target is full: within this fraction of the
    /// capacity (5 %).
    pub neighbour_fraction: f64,
    pub degree: u32,
    pub high: f64,
    pub low: f64,
    pub critical: f64,
    /// Below the low watermark, replicas not read for this long and read fewer than
    /// `cold_count` times are invalidated.
    pub cold: Nanos,
    pub cold_count: u32,
    pub copy_from: CopyFrom,
    /// Copies from memory hold at most this many blocks of host-read bytes in flight;
    /// beyond it a candidate is copied from the disk.
    pub stash_blocks: u64,
    /// Copies that read the original from the disk in flight.
    pub copy_depth: usize,
    pub copy_priority: i8,
    /// A copy moves at most this many blocks.
    pub max_copy_blocks: u64,
    pub max_candidates: usize,
    pub max_replica_blocks: u64,
    pub max_free_extents: usize,
    /// Byte extents `[offset, len]` known free at start.
    pub free: Vec<[u64; 2]>,
    /// An ext2/3/4 image whose block bitmaps say what is free at start.
    pub ext_image: Option<PathBuf>,
    /// FS2-static: byte extents `[offset, len]` to replicate to the middle of the disk.
    pub replicate: Vec<[u64; 2]>,
    /// The replica table's journal on the disk, in bytes (0: the table is volatile).
    pub journal_bytes: u64,
    /// A host read that fails (EIO) is sent again to another copy of its blocks: from
    /// replicas to the originals, from the originals to a whole replica set.
    pub retry_failed_reads: bool,
    /// Where a replica must not go relative to its original: the original's likely failure
    /// footprint (`avoid`, a vendor's, with `avoid_*` overriding its fields).
    pub avoid: Footprint,
}

impl Default for Params {
    fn default() -> Params {
        Params {
            disk: String::new(),
            mode: Mode::Dynamic,
            head: Head::Sent,
            region_bytes: 128 << 20,
            epoch: secs_to_ns(10.0),
            neighbour_fraction: 0.05,
            degree: 1,
            high: 0.15,
            low: 0.10,
            critical: 0.05,
            cold: secs_to_ns(600.0),
            cold_count: 2,
            copy_from: CopyFrom::Memory,
            stash_blocks: 4096,
            copy_depth: 4,
            copy_priority: -1,
            max_copy_blocks: 64,
            max_candidates: 65_536,
            max_replica_blocks: 1 << 22,
            max_free_extents: 1 << 20,
            free: Vec::new(),
            ext_image: None,
            replicate: Vec::new(),
            journal_bytes: 0,
            retry_failed_reads: true,
            avoid: Footprint::NONE,
        }
    }
}

impl Params {
    /// Parse and range-check a `kind = "fs2"` table (without `kind`); `key` is its path.
    pub fn parse(t: &toml::Table, key: &str) -> Result<Params, String> {
        let k: Keys = registry::parse(t, key)?;
        let path = |sub: &str| format!("{key}.{sub}");
        let d = Params::default();
        let num = |sub: &str, v: Option<f64>, lo: f64, hi: f64, dflt: f64| match v {
            Some(v) => range::within(&path(sub), v, lo, hi),
            None => Ok(dflt),
        };
        let count = |sub: &str, v: Option<u64>, lo: u64, hi: u64, dflt: u64| match v {
            Some(v) => range::count(&path(sub), v, lo, hi),
            None => Ok(dflt),
        };
        let region_mb = num("region_mb", k.region_mb, 0.004096, 1e6, 128.0)?;
        let region_bytes = ((region_mb * 1048576.0) as u64 / BLOCK).max(1) * BLOCK;
        let list = |sub: &str, v: Option<Vec<[u64; 2]>>| -> Result<Vec<[u64; 2]>, String> {
            let v = v.unwrap_or_default();
            if v.len() > MAX_LIST {
                return Err(format!(
                    "{}: at most {MAX_LIST} extents, got {}",
                    path(sub),
                    v.len()
                ));
            }
            Ok(v)
        };
        let p = Params {
            mode: k.mode.unwrap_or(d.mode),
            head: k.head.unwrap_or(d.head),
            region_bytes,
            epoch: secs_to_ns(num("epoch_s", k.epoch_s, 1e-6, DAY_S, 10.0)?),
            neighbour_fraction: num("neighbour_fraction", k.neighbour_fraction, 0.0, 1.0, 0.05)?,
            degree: count("degree", k.degree, 1, MAX_DEGREE, 1)? as u32,
            high: num("high_watermark", k.high_watermark, 0.0, 1.0, d.high)?,
            low: num("low_watermark", k.low_watermark, 0.0, 1.0, d.low)?,
            critical: num(
                "critical_watermark",
                k.critical_watermark,
                0.0,
                1.0,
                d.critical,
            )?,
            cold: secs_to_ns(num("cold_s", k.cold_s, 0.0, 1e3 * DAY_S, 600.0)?),
            cold_count: count("cold_count", k.cold_count, 0, u32::MAX as u64, 2)? as u32,
            copy_from: k.copy_from.unwrap_or(d.copy_from),
            stash_blocks: count("stash_kb", k.stash_kb, 4, 1 << 22, 16_384)? / 4,
            copy_depth: count("copy_depth", k.copy_depth, 1, 1024, 4)? as usize,
            copy_priority: match k.copy_priority {
                Some(v) => range::priority(&path("copy_priority"), v, i8::MIN, 0)?,
                None => d.copy_priority,
            },
            max_copy_blocks: count("max_copy_kb", k.max_copy_kb, 4, 1 << 20, 256)? / 4,
            max_candidates: count("max_candidates", k.max_candidates, 1, 1 << 24, 65_536)? as usize,
            max_replica_blocks: count(
                "max_replica_blocks",
                k.max_replica_blocks,
                1,
                MAX_REPLICA_BLOCKS,
                d.max_replica_blocks,
            )?,
            max_free_extents: count(
                "max_free_extents",
                k.max_free_extents,
                1,
                MAX_FREE_EXTENTS,
                d.max_free_extents as u64,
            )? as usize,
            free: list("free", k.free)?,
            ext_image: k.ext_image,
            replicate: list("replicate", k.replicate)?,
            journal_bytes: count("journal_kb", k.journal_kb, 0, MAX_JOURNAL_KB, 0)? * 1024,
            retry_failed_reads: k.retry_failed_reads.unwrap_or(d.retry_failed_reads),
            avoid: {
                let mut f = match k.avoid.as_deref() {
                    None | Some("none") => Footprint::NONE,
                    Some(v) => Vendor::from_name(v).map(Vendor::footprint).ok_or_else(|| {
                        format!(
                            "{}: expected \"none\", \"ibm\", \"wd\", \"maxtor\" or \"quantum\", got {v:?}",
                            path("avoid")
                        )
                    })?,
                };
                if let Some(c) = k.avoid_cylinders {
                    f.cylinders = range::count(&path("avoid_cylinders"), c, 0, 1 << 20)? as u32;
                }
                if let Some(a) = k.avoid_angle {
                    f.angle = range::within(&path("avoid_angle"), a, 0.0, 1.0)?;
                }
                if let Some(s) = k.avoid_surfaces {
                    f.surfaces = range::count(&path("avoid_surfaces"), s, 0, 1 << 20)? as u32;
                }
                f
            },
            disk: k.disk,
        };
        if !(p.critical <= p.low && p.low <= p.high) {
            return Err(format!(
                "{}: expected critical ≤ low ≤ high, got {} / {} / {}",
                path("low_watermark"),
                p.critical,
                p.low,
                p.high
            ));
        }
        if p.journal_bytes > 0 && p.max_replica_blocks > MAX_PERSISTED_REPLICA_BLOCKS {
            return Err(format!(
                "{}: a persisted table (journal_kb > 0) holds at most {MAX_PERSISTED_REPLICA_BLOCKS} replica blocks, got {}",
                path("max_replica_blocks"),
                p.max_replica_blocks
            ));
        }
        if p.mode == Mode::Static && p.replicate.is_empty() {
            return Err(format!(
                "{}: mode = \"static\" needs the blocks to replicate (`replicate`)",
                path("replicate")
            ));
        }
        Ok(p)
    }
}

/// A random valid configuration for the swarm: FS2 on `d0` (the swarm gives the disk an FS2
/// layer runs on a mechanical model), small regions and epochs so that replication,
/// redirection and every invalidation happen in a few hundred requests. Free space is
/// declared only past 256 KiB, where the swarm's host never reads or writes (declaring
/// space free that holds the host's data would be a lie the layer must believe); the hot
/// pages become free only through the host's discards.
fn swarm(d: &mut Draw<'_>, _devices: &SwarmDevices<'_>) -> toml::Table {
    let mut t = toml::Table::new();
    t.insert("disk".into(), "d0".into());
    let kib = |n: u64| toml::Value::Integer((n * 1024) as i64);
    let mut free = Vec::new();
    for _ in 0..1 + d.below(3) {
        let start = 256 + d.below(96) * 4;
        let len = (1 + d.below(64)) * 4;
        free.push(toml::Value::Array(vec![kib(start), kib(len)]));
    }
    t.insert("free".into(), free.into());
    if d.chance(0.2) {
        t.insert("mode".into(), "static".into());
        let start = d.below(48) * 4;
        t.insert(
            "replicate".into(),
            vec![toml::Value::Array(vec![
                kib(start),
                kib(4 * (1 + d.below(8))),
            ])]
            .into(),
        );
    }
    t.insert(
        "region_mb".into(),
        (*d.pick(&[0.016, 0.032, 0.064, 0.128, 0.512])).into(),
    );
    t.insert("epoch_s".into(), (*d.pick(&[0.001, 0.01, 0.1])).into());
    t.insert("degree".into(), (1 + d.below(2) as i64).into());
    let (c, l, h) = *d.pick(&[(0.0, 0.0, 0.0), (0.0, 0.00001, 0.00002), (0.05, 0.10, 0.15)]);
    t.insert("critical_watermark".into(), c.into());
    t.insert("low_watermark".into(), l.into());
    t.insert("high_watermark".into(), h.into());
    t.insert("cold_s".into(), (*d.pick(&[0.0, 0.01, 1.0])).into());
    t.insert("copy_depth".into(), (1 + d.below(4) as i64).into());
    if d.chance(0.25) {
        t.insert("copy_from".into(), "disk".into());
    }
    // A small stash: some candidates fall back to copies from the disk.
    t.insert("stash_kb".into(), (*d.pick(&[8i64, 64, 16_384])).into());
    // Half the draws persist the table: the crashes then test its recovery.
    if d.chance(0.5) {
        t.insert("journal_kb".into(), (*d.pick(&[8i64, 64])).into());
    }
    t.insert("max_copy_kb".into(), (*d.pick(&[4i64, 8, 64])).into());
    t.insert(
        "max_replica_blocks".into(),
        (*d.pick(&[4i64, 64, 4096])).into(),
    );
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Params, String> {
        Params::parse(&toml::from_str(text).unwrap(), "function[0]")
    }

    #[test]
    fn defaults_are_the_papers() {
        let p = parse("disk = 'd'").unwrap();
        assert_eq!((p.high, p.low, p.critical), (0.15, 0.10, 0.05));
        assert_eq!(p.degree, 1);
        assert_eq!(p.neighbour_fraction, 0.05);
        assert_eq!(p.region_bytes, 128 << 20);
        assert_eq!(p.copy_priority, -1);
        assert_eq!(p.max_copy_blocks, 64);
        assert_eq!(p.mode, Mode::Dynamic);
        assert_eq!((p.copy_from, p.stash_blocks), (CopyFrom::Memory, 4096));
    }

    #[test]
    fn bad_tables_name_their_key() {
        let cases = [
            (
                "disk = 'd'\ndegree = 5",
                "function[0].degree: expected a whole number from 1 to 4, got 5",
            ),
            (
                "disk = 'd'\nlow_watermark = 0.2",
                "function[0].low_watermark: expected critical ≤ low ≤ high, got 0.05 / 0.2 / 0.15",
            ),
            (
                "disk = 'd'\nepoch_s = 0",
                "function[0].epoch_s: expected a number from 0.000001 to 86400, got 0",
            ),
            (
                "disk = 'd'\nmode = 'static'",
                "function[0].replicate: mode = \"static\" needs the blocks to replicate (`replicate`)",
            ),
            (
                "disk = 'd'\nstash_kb = 2",
                "function[0].stash_kb: expected a whole number from 4 to 4194304, got 2",
            ),
            (
                "disk = 'd'\ncopy_priority = 5",
                "function[0].copy_priority: expected a whole number from -128 to 0 (the host's I/O has 0), got 5",
            ),
        ];
        for (text, want) in cases {
            assert_eq!(parse(text).unwrap_err(), want, "{text}");
        }
        let e = parse("disk = 'd'\nmode = 'sometimes'").unwrap_err();
        assert!(
            e.starts_with("function[0].mode: unknown variant `sometimes`"),
            "{e}"
        );
    }

    #[test]
    fn layers_of_one_stack_copy_with_their_own_numbers() {
        assert_eq!(layer_index("function[12]"), 12);
        assert_eq!(layer_index("stack"), 0);
        assert_eq!(super::super::copy_base(0), 1 << 40);
        assert_eq!(super::super::copy_base(3), (1 << 40) + (3 << 34));
        assert!(super::super::copy_base(63) + (1 << 34) <= 1 << 46);
    }

    #[test]
    fn every_swarm_draw_is_valid() {
        for t in crate::registry::swarm_tables(7, 500, &["d0"], swarm) {
            parse(&t).unwrap();
        }
    }
}
