//! `kind = "paraid"`: its configuration, checks, builder and swarm generator.

use super::layer::{Paraid, Params, PROPAGATION_PRIORITY};
use super::model::shares;
use super::persist::{Shape, JOURNAL_BYTES};
use super::policy::ShiftParams;
use crate::raid::stripe::{check_array, check_merge, LayoutName, Level};
use crate::registry::{self, range, Draw, Kind, SwarmDevices};
use serde::Deserialize;
use wattio_core::journal::{JournalConfig, MAX_REGION};
use wattio_core::time::NS_PER_S;

pub static KIND: Kind = Kind {
    kind: "paraid",
    module: "raid::paraid",
    summary: "PARAID: gears of RAID-0/RAID-5 over the first G_i disks, soft-state replicas, gear shifting by load",
    source: "Weddle, Oldham, Qian, Wang, Reiher, Kuenning, ACM TOS 3(3), 2007",
    doc: "docs/functions/paraid.md",
    check: |t, ctx| ParaidConfig::parse(t, ctx.key).map(|_| ()),
    build: |t, ctx| {
        let c = ParaidConfig::parse(t, ctx.key)?;
        Ok(Box::new(Paraid::new(c.devices, c.params)))
    },
    swarm: Some(swarm),
};

const DAY_S: f64 = 86_400.0;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
enum Start {
    Highest,
    Lowest,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
enum Upshift {
    OnDemand,
    Full,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
enum SyncWrites {
    Both,
    Replica,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Keys {
    level: u64,
    devices: Vec<String>,
    gears: Vec<u64>,
    chunk_kib: Option<u64>,
    layout: Option<LayoutName>,
    assume_clean: Option<bool>,
    sample_s: Option<f64>,
    window: Option<u64>,
    threshold: Option<f64>,
    w: Option<f64>,
    rated_cycles: Option<u64>,
    life_years: Option<f64>,
    period_h: Option<f64>,
    start: Option<Start>,
    upshift: Option<Upshift>,
    sync_writes: Option<SyncWrites>,
    copies: Option<u64>,
    persist: Option<bool>,
    merge_kib: Option<u64>,
    propagation_priority: Option<i64>,
}

/// A checked PARAID configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct ParaidConfig {
    pub devices: Vec<String>,
    pub params: Params,
}

impl ParaidConfig {
    /// Parse and range-check a `kind = "paraid"` table (without `kind`).
    pub fn parse(t: &toml::Table, key: &str) -> Result<ParaidConfig, String> {
        let k: Keys = registry::parse(t, key)?;
        let (level, chunk, parity) =
            check_array(key, k.level, k.devices.len(), k.chunk_kib, k.layout)?;
        let merge = check_merge(key, level, k.merge_kib)?;
        let gears: Vec<usize> = k.gears.iter().map(|&g| g as usize).collect();
        if gears.len() < 2
            || gears.last() != Some(&k.devices.len())
            || shares(level, &gears).is_none()
        {
            let min = if level == Level::Raid5 { 3 } else { 1 };
            return Err(format!(
                "{key}.gears: expected at least two increasing disk counts from {min} up, the last = the {} devices, got {:?}",
                k.devices.len(),
                k.gears
            ));
        }
        let secs = |name: &str, v: Option<f64>, default: f64, lo: f64, hi: f64| {
            v.map_or(Ok(default), |v| {
                range::within(&format!("{key}.{name}"), v, lo, hi)
            })
        };
        let sample = secs("sample_s", k.sample_s, 1.0, 1e-3, 3600.0)?;
        let window = match k.window {
            Some(w) => range::count(&format!("{key}.window"), w, 1, 100_000)?,
            None => 32,
        } as usize;
        let threshold = secs("threshold", k.threshold, 0.8, 1e-6, 1.0)?;
        let default_w = if level == Level::Raid5 { 1.5 } else { 1.0 };
        let w = secs("w", k.w, default_w, 1.0, 10.0)?;
        let rated = match k.rated_cycles {
            Some(r) => Some(range::count(&format!("{key}.rated_cycles"), r, 1, 1 << 40)?),
            None => None,
        };
        let life = secs("life_years", k.life_years, 5.0, 1e-6, 100.0)?;
        let period = secs("period_h", k.period_h, 24.0, 1e-6, 24.0 * 3650.0)?;
        let copies = match k.copies {
            Some(c) => range::count(&format!("{key}.copies"), c, 1, 1024)?,
            None => 4,
        } as usize;
        let propagation_priority = match k.propagation_priority {
            Some(v) => range::priority(&format!("{key}.propagation_priority"), v, i8::MIN, 0)?,
            None => PROPAGATION_PRIORITY,
        };
        let ns = |s: f64| (s * NS_PER_S as f64).round() as u64;
        Ok(ParaidConfig {
            devices: k.devices,
            params: Params {
                level,
                parity,
                chunk,
                gears,
                shift: ShiftParams {
                    sample: ns(sample).max(1),
                    window,
                    threshold,
                    w,
                },
                rated,
                life: ns(life * 365.0 * DAY_S),
                period: ns(period * 3600.0).max(1),
                start_low: k.start == Some(Start::Lowest),
                full_sync: k.upshift == Some(Upshift::Full),
                sync_writes_both: k.sync_writes != Some(SyncWrites::Replica),
                copies,
                assume_clean: k.assume_clean.unwrap_or(false),
                persist: k.persist.unwrap_or(true),
                merge,
                propagation_priority,
            },
        })
    }
}

/// A random valid configuration over the swarm's data devices: two gears (three when there
/// are enough disks), a short window so that gears shift within the swarm's seconds.
fn swarm(d: &mut Draw<'_>, devices: &SwarmDevices<'_>) -> toml::Table {
    let n = devices.names.len();
    let mut t = toml::Table::new();
    let five = n >= 4 && d.chance(0.6);
    let min = if five { 3 } else { 1 };
    let names: Vec<toml::Value> = devices.names.iter().map(|n| n.clone().into()).collect();
    let mut gears = vec![];
    if n > min + 1 && d.chance(0.3) {
        gears.push(min as i64);
        gears.push(min as i64 + 1);
    } else {
        gears.push((min + d.below((n - min) as u64) as usize) as i64);
    }
    gears.push(n as i64);
    t.insert("level".into(), (if five { 5 } else { 0 }).into());
    t.insert("devices".into(), toml::Value::Array(names));
    t.insert(
        "gears".into(),
        toml::Value::Array(gears.iter().map(|&g| g.into()).collect()),
    );
    // The dirty list's log (two bits a chunk of every disk above the lowest gear, twice,
    // on disk 0) must fit a metadata region: over large disks a drawn chunk doubles until
    // it does (after the draw, so that every other seed draws as before).
    let mut chunk_kib = *d.pick(&[4i64, 8, 16]);
    if let Some(&size) = devices.capacities.iter().min() {
        let fits = |kib: i64| {
            let shape = Shape {
                low: gears[0] as usize,
                disks: n,
                chunks: size / (kib as u64 * 1024),
                gears: gears.len(),
            };
            JournalConfig::region_len(shape.snapshot_bytes(), JOURNAL_BYTES) <= MAX_REGION
        };
        while !fits(chunk_kib) {
            chunk_kib *= 2;
        }
    }
    t.insert("chunk_kib".into(), chunk_kib.into());
    if five && d.chance(0.5) {
        t.insert("layout".into(), "left-asymmetric".into());
    }
    t.insert("sample_s".into(), (*d.pick(&[0.05, 0.2, 0.5])).into());
    t.insert("window".into(), (*d.pick(&[1i64, 2, 4])).into());
    t.insert("threshold".into(), (*d.pick(&[0.05, 0.3, 0.8])).into());
    t.insert(
        "start".into(),
        (if d.chance(0.5) { "lowest" } else { "highest" }).into(),
    );
    let full = d.chance(0.5);
    t.insert(
        "upshift".into(),
        (if full { "full" } else { "on-demand" }).into(),
    );
    if full && d.chance(0.3) {
        t.insert("sync_writes".into(), "replica".into());
    }
    let copies = *d.pick(&[1i64, 4]);
    t.insert("copies".into(), copies.into());
    // Propagation at the host's priority as well as below it, derived from a drawn value so
    // that the draws, and every seed's other choices, stay as they were.
    if copies == 1 {
        t.insert("propagation_priority".into(), 0i64.into());
    }
    // The paper's ration (10 cycles a day) holds the array up after a few shifts; a large
    // one lets the swarm's seconds shift many times.
    t.insert(
        "rated_cycles".into(),
        (*d.pick(&[20_000i64, 1_000_000_000])).into(),
    );
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<ParaidConfig, String> {
        ParaidConfig::parse(&toml::from_str(text).unwrap(), "function[0]")
    }

    const FIVE: &str = "level = 5\ndevices = ['a', 'b', 'c', 'd', 'e']\ngears = [3, 5]\n";

    #[test]
    fn a_full_synchronization_writes_both_sides_unless_told_otherwise() {
        let p = parse(FIVE).unwrap().params;
        assert!(!p.full_sync && p.sync_writes_both);
        let p = parse(&format!("{FIVE}upshift = 'full'")).unwrap().params;
        assert!(p.full_sync && p.sync_writes_both);
        let p = parse(&format!("{FIVE}upshift = 'full'\nsync_writes = 'replica'"))
            .unwrap()
            .params;
        assert!(p.full_sync && !p.sync_writes_both);
        let e = parse(&format!("{FIVE}sync_writes = 'sometimes'")).unwrap_err();
        assert!(
            e.starts_with("function[0].sync_writes: unknown variant `sometimes`"),
            "{e}"
        );
    }

    #[test]
    fn every_swarm_draw_is_valid_and_some_write_the_replica_only() {
        let names = ["d0", "d1", "d2", "d3", "d4"];
        let tables = crate::registry::swarm_tables(7, 400, &names, swarm);
        let mut replica_only = 0;
        for t in &tables {
            let c = parse(t).unwrap();
            if c.params.full_sync && !c.params.sync_writes_both {
                replica_only += 1;
            }
        }
        assert!((20..=100).contains(&replica_only), "{replica_only} of 400");
    }
}
