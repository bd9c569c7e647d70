//! `kind = "exces"`: its configuration, checks, builder and swarm generator.

use super::Exces;
use crate::registry::{self, range, Draw, Kind, SwarmDevices};
use serde::Deserialize;
use wattio_core::function::Function;
use wattio_core::time::{secs_to_ns, Nanos};

pub static KIND: Kind = Kind {
    kind: "exces",
    module: "cache::exces",
    summary:
        "EXCES: a flash cache that prefetches popular pages and buffers writes so the disk sleeps",
    source: "Useche et al., EXCES: EXternal Caching in Energy Saving Storage Systems, HPCA 2008",
    doc: "docs/functions/exces.md",
    check: |t, ctx| Params::parse(t, ctx.key).map(|_| ()),
    build: |t, ctx| {
        let exces = Exces::new(Params::parse(t, ctx.key)?).pair_id(ctx.identity());
        Ok(Box::new(exces) as Box<dyn Function>)
    },
    swarm: Some(swarm),
};

/// When an unmapped page's write may be buffered in the ECD.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Absorb {
    /// Only while the disk is in a sleep state (Algorithm 1, lines 2–3).
    Standby,
    /// Whatever the disk's state (§1 and §3: "all write requests are indirected").
    Always,
}

/// From when the layer counts the disk as asleep (for `absorb_writes = "standby"`,
/// laptop mode's cleaning at spin-up, and idle cleaning, which never wakes it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AsleepFrom {
    /// Once the disk is in a state that cannot serve I/O (its spin-down has ended).
    Standby,
    /// From the start of a transition into such a state: a disk spinning down would have
    /// to finish and spin up again to serve a write sent to it then.
    SpinDown,
}

/// What a page's rank is: the paper's popularity, or recency (the LRU baseline).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Ranking {
    /// Decayed per-quantum access counts, folded every `last_acc[4]` accesses (the paper).
    Popularity,
    /// The time of the last access, at every access: the top-k set is the k most recently
    /// used pages, so the layer is an LRU cache (the baseline the issue asks for).
    Recency,
}

/// Which clean ECD page a buffered write takes when no page is free.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Victim {
    /// A clean page outside the top-k set first (the planner would evict it anyway), the
    /// one that became a candidate longest ago; else the oldest clean page.
    OutsideTopKFirst,
    /// The page that became clean longest ago, popular or not.
    OldestClean,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Keys {
    disk: String,
    flash: String,
    cache_pages: Option<u64>,
    quantum_s: Option<f64>,
    half_life_s: Option<f64>,
    miss_threshold_per_min: Option<f64>,
    miss_window_s: Option<f64>,
    min_interval_s: Option<f64>,
    absorb_writes: Option<Absorb>,
    asleep_from: Option<AsleepFrom>,
    victim: Option<Victim>,
    reconfig_depth: Option<u64>,
    ranking: Option<Ranking>,
    dirty_threshold: Option<f64>,
    clean_idle_s: Option<f64>,
    dirty_expire_s: Option<f64>,
    writeback_interval_s: Option<f64>,
    clean_on_spin_up: Option<bool>,
    clean_on_stop: Option<bool>,
    retry_failed_reads: Option<bool>,
    readahead_pages: Option<u64>,
    persist_map: Option<bool>,
    pair_label: Option<bool>,
    merge_disk_pages: Option<bool>,
    merge_flash_pages: Option<bool>,
}

/// The most ECD pages a layer manages: 2^23 pages of 4 KiB is 32 GiB of flash, whose map
/// takes about 320 MiB of memory (the layer's per-ECD-page state is ~40 B: a 32-byte slot
/// and its logged entry) and whose on-flash log (two 64 MiB snapshots and its journal)
/// stays within the metadata facility's 256 MiB region; the bound keeps a config from
/// allocating more.
pub const MAX_CACHE_PAGES: u64 = 1 << 23;
/// The most copies a reconfiguration keeps in flight.
pub const MAX_DEPTH: u64 = 1024;
/// The most pages a read miss reads ahead (64 MiB; laptop mode's is 3–4 MiB).
pub const MAX_READAHEAD: u64 = 1 << 14;
const DAY_S: f64 = 86_400.0;

/// A checked EXCES configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct Params {
    pub disk: String,
    pub flash: String,
    /// ECD pages used (k); `None` = the whole flash device.
    pub cache_pages: Option<u64>,
    pub quantum: Nanos,
    pub half_life: Nanos,
    pub miss_threshold_per_min: f64,
    pub miss_window: Nanos,
    pub min_interval: Nanos,
    pub absorb: Absorb,
    pub asleep_from: AsleepFrom,
    pub victim: Victim,
    pub reconfig_depth: usize,
    pub ranking: Ranking,
    /// Write every dirty page back once more than this fraction of the k pages is dirty
    /// (1 = never: EXCES keeps dirty pages until they leave the top-k).
    pub dirty_threshold: f64,
    /// Write every dirty page back when the disk is spinning and the host has sent it
    /// nothing for this long (`None`: never).
    pub clean_idle: Option<Nanos>,
    /// Write back, at every `writeback_interval` (from the run's start), the dirty pages
    /// dirty for at least this long (Linux's `dirty_expire_centisecs`, 30 s; `None`: never).
    pub dirty_expire: Option<Nanos>,
    /// The period of those checks (Linux's `dirty_writeback_centisecs`, 5 s).
    pub writeback_interval: Nanos,
    /// Write every dirty page back when a miss wakes the sleeping disk (laptop mode).
    pub clean_on_spin_up: bool,
    /// A cleaning at a clean unload (`Function::on_stop`: the live server shuts down), the
    /// paper's "clean unload"; false leaves dirty pages in the ECD for the next start to
    /// recover from the logged map.
    pub clean_on_stop: bool,
    /// A read of clean pages that fails on the ECD (EIO) is sent to the disk, which holds
    /// the same data (bcache's recovery of a cache read error, clean data only).
    pub retry_failed_reads: bool,
    /// A read miss also ranks the next this-many pages as accessed, so the next
    /// reconfiguration prefetches them (laptop mode's large read-ahead).
    pub readahead_pages: u64,
    /// Keep the map in a log on the ECD and answer FLUSH from it (a non-volatile ECD);
    /// false: the ECD is volatile (laptop mode's page cache), so a FLUSH or FUA write
    /// writes every dirty page back to the disk first and a restart starts empty.
    pub persist_map: bool,
    /// Label the pair (`pair`): a small log at the disk's end — the exported volume
    /// shrinks by it — says which card caches the disk and whether the disk was unloaded
    /// cleanly, and the card's map carries the same id; a start refuses a card that is not
    /// the disk's own while the disk may need it, a card holding another disk's pages, or
    /// a disk whose end holds other data. Off by default (docs/functions/exces.md, "The
    /// pair's identity"). Needs `persist_map`.
    pub pair_label: bool,
    /// Send adjacent pages of one host request that both go to the disk as one disk I/O,
    /// as the block layer below the paper's module merges adjacent bios; false: one disk
    /// I/O per 4 KiB page.
    pub merge_disk_pages: bool,
    /// Send hits of one host request in neighbouring ECD pages as one ECD I/O, and bring a
    /// reconfiguration's pages in in disk order into ascending free ECD pages (so that
    /// neighbouring pages land in neighbouring ECD pages); false: one ECD I/O per page, and
    /// pages come in most popular first.
    pub merge_flash_pages: bool,
}

impl Default for Params {
    /// The paper's values where it gives them (trigger: 1000 misses/min, 1 min apart),
    /// documented choices elsewhere (docs/functions/exces.md).
    fn default() -> Params {
        Params {
            disk: String::new(),
            flash: String::new(),
            cache_pages: None,
            quantum: secs_to_ns(10.0),
            half_life: secs_to_ns(600.0),
            miss_threshold_per_min: 1000.0,
            miss_window: secs_to_ns(60.0),
            min_interval: secs_to_ns(60.0),
            absorb: Absorb::Standby,
            asleep_from: AsleepFrom::Standby,
            victim: Victim::OutsideTopKFirst,
            reconfig_depth: 8,
            ranking: Ranking::Popularity,
            dirty_threshold: 1.0,
            clean_idle: None,
            dirty_expire: None,
            writeback_interval: secs_to_ns(5.0),
            clean_on_spin_up: false,
            clean_on_stop: true,
            retry_failed_reads: true,
            readahead_pages: 0,
            persist_map: true,
            pair_label: false,
            merge_disk_pages: true,
            merge_flash_pages: true,
        }
    }
}

impl Params {
    /// Parse and range-check a `kind = "exces"` table (without `kind`); `key` is its path.
    pub fn parse(t: &toml::Table, key: &str) -> Result<Params, String> {
        let k: Keys = registry::parse(t, key)?;
        let path = |sub: &str| format!("{key}.{sub}");
        let d = Params::default();
        let secs = |sub: &str, v: Option<f64>, lo: f64, hi: f64, dflt: Nanos| match v {
            Some(v) => range::within(&path(sub), v, lo, hi).map(secs_to_ns),
            None => Ok(dflt),
        };
        if k.disk == k.flash {
            return Err(format!(
                "{}: the ECD must be another device than the disk (both `{}`)",
                path("flash"),
                k.flash
            ));
        }
        let p = Params {
            cache_pages: match k.cache_pages {
                Some(n) => Some(range::count(&path("cache_pages"), n, 1, MAX_CACHE_PAGES)?),
                None => None,
            },
            quantum: secs("quantum_s", k.quantum_s, 1e-6, DAY_S, d.quantum)?,
            half_life: secs("half_life_s", k.half_life_s, 1e-6, 1e3 * DAY_S, d.half_life)?,
            miss_threshold_per_min: match k.miss_threshold_per_min {
                Some(v) => range::within(&path("miss_threshold_per_min"), v, 0.0, 1e12)?,
                None => d.miss_threshold_per_min,
            },
            miss_window: secs("miss_window_s", k.miss_window_s, 1e-3, DAY_S, d.miss_window)?,
            min_interval: secs(
                "min_interval_s",
                k.min_interval_s,
                0.0,
                1e3 * DAY_S,
                d.min_interval,
            )?,
            absorb: k.absorb_writes.unwrap_or(d.absorb),
            asleep_from: k.asleep_from.unwrap_or(d.asleep_from),
            victim: k.victim.unwrap_or(d.victim),
            reconfig_depth: match k.reconfig_depth {
                Some(n) => range::count(&path("reconfig_depth"), n, 1, MAX_DEPTH)? as usize,
                None => d.reconfig_depth,
            },
            ranking: k.ranking.unwrap_or(d.ranking),
            dirty_threshold: match k.dirty_threshold {
                Some(v) => range::within(&path("dirty_threshold"), v, 0.0, 1.0)?,
                None => d.dirty_threshold,
            },
            clean_idle: match k.clean_idle_s {
                Some(v) => {
                    Some(range::within(&path("clean_idle_s"), v, 1e-3, DAY_S).map(secs_to_ns)?)
                }
                None => None,
            },
            dirty_expire: match k.dirty_expire_s {
                Some(v) => Some(
                    range::within(&path("dirty_expire_s"), v, 1e-3, 1e3 * DAY_S).map(secs_to_ns)?,
                ),
                None => None,
            },
            writeback_interval: secs(
                "writeback_interval_s",
                k.writeback_interval_s,
                1e-3,
                DAY_S,
                d.writeback_interval,
            )?,
            clean_on_spin_up: k.clean_on_spin_up.unwrap_or(d.clean_on_spin_up),
            clean_on_stop: k.clean_on_stop.unwrap_or(d.clean_on_stop),
            retry_failed_reads: k.retry_failed_reads.unwrap_or(d.retry_failed_reads),
            readahead_pages: match k.readahead_pages {
                Some(n) => range::count(&path("readahead_pages"), n, 0, MAX_READAHEAD)?,
                None => d.readahead_pages,
            },
            persist_map: k.persist_map.unwrap_or(d.persist_map),
            pair_label: k.pair_label.unwrap_or(d.pair_label),
            merge_disk_pages: k.merge_disk_pages.unwrap_or(d.merge_disk_pages),
            merge_flash_pages: k.merge_flash_pages.unwrap_or(d.merge_flash_pages),
            disk: k.disk,
            flash: k.flash,
        };
        if k.writeback_interval_s.is_some() && p.dirty_expire.is_none() {
            return Err(format!(
                "{}: only with dirty_expire_s (the age at which a dirty page is written back)",
                path("writeback_interval_s")
            ));
        }
        if p.pair_label && !p.persist_map {
            return Err(format!(
                "{}: needs persist_map = true (the card's map log carries the pair's label)",
                path("pair_label")
            ));
        }
        if p.half_life < p.quantum {
            return Err(format!(
                "{}: the half-life must be at least one quantum ({} s)",
                path("half_life_s"),
                p.quantum as f64 / 1e9
            ));
        }
        Ok(p)
    }
}

/// A random valid configuration over the swarm's devices: the disk is one of them, the ECD
/// a spare device of its own (`spare-N`, which the swarm adds as a small flash card), a
/// small cache and a fast trigger so that reconfigurations, races and victims happen in a
/// few hundred requests.
fn swarm(d: &mut Draw<'_>, devices: &SwarmDevices<'_>) -> toml::Table {
    let mut t = toml::Table::new();
    let disk = if devices.names.is_empty() || d.chance(0.8) {
        "d0".to_string()
    } else {
        d.pick(devices.names).clone()
    };
    t.insert("disk".into(), disk.into());
    t.insert("flash".into(), format!("spare-{}", d.below(1 << 32)).into());
    t.insert("cache_pages".into(), (1 + d.below(40) as i64).into());
    let q = *d.pick(&[0.001, 0.01, 0.1]);
    t.insert("quantum_s".into(), q.into());
    t.insert("half_life_s".into(), (q * (1 + d.below(50)) as f64).into());
    t.insert(
        "miss_threshold_per_min".into(),
        (*d.pick(&[0.0, 10.0, 100.0, 1000.0])).into(),
    );
    t.insert("miss_window_s".into(), (*d.pick(&[0.01, 0.1, 1.0])).into());
    t.insert("min_interval_s".into(), (*d.pick(&[0.0, 0.01, 0.1])).into());
    t.insert(
        "absorb_writes".into(),
        (*d.pick(&["standby", "always"])).into(),
    );
    t.insert(
        "victim".into(),
        (*d.pick(&["outside-top-k-first", "oldest-clean"])).into(),
    );
    t.insert("reconfig_depth".into(), (1 + d.below(8) as i64).into());
    // The baselines' knobs: LRU (recency, a dirty threshold, idle cleaning) and laptop
    // mode (write-back when the disk wakes, read-ahead).
    t.insert(
        "ranking".into(),
        (*d.pick(&["popularity", "recency"])).into(),
    );
    t.insert(
        "dirty_threshold".into(),
        (*d.pick(&[1.0, 0.5, 0.1, 0.0])).into(),
    );
    if d.chance(0.5) {
        t.insert("clean_idle_s".into(), (*d.pick(&[0.001, 0.01, 0.1])).into());
    }
    t.insert("clean_on_spin_up".into(), d.chance(0.5).into());
    t.insert("readahead_pages".into(), (d.below(4) as i64).into());
    t.insert("persist_map".into(), d.chance(0.7).into());
    // Not drawn (the draw order, and with it every swarm seed's meaning, is kept): derived
    // from a value already drawn, so half the configurations absorb from the spin-down on.
    let cache_pages = t["cache_pages"].as_integer().unwrap_or(0);
    let from = if cache_pages % 2 == 0 {
        "spin-down"
    } else {
        "standby"
    };
    t.insert("asleep_from".into(), from.into());
    // Also derived, not drawn: a third of the configurations write back pages dirty for two
    // quanta, checking every quantum.
    if cache_pages % 3 == 0 {
        t.insert("dirty_expire_s".into(), (2.0 * q).into());
        t.insert("writeback_interval_s".into(), q.into());
    }
    // Derived too: half the persisted maps label the pair.
    let depth = t["reconfig_depth"].as_integer().unwrap_or(0);
    if t["persist_map"].as_bool() == Some(true) && depth % 2 == 0 {
        t.insert("pair_label".into(), true.into());
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Params, String> {
        Params::parse(&toml::from_str(text).unwrap(), "function[0]")
    }

    #[test]
    fn defaults_are_the_papers_trigger() {
        let p = parse("disk = 'd'\nflash = 'f'").unwrap();
        assert_eq!(p.miss_threshold_per_min, 1000.0);
        assert_eq!(p.min_interval, 60_000_000_000);
        assert_eq!(p.miss_window, 60_000_000_000);
        assert_eq!(p.absorb, Absorb::Standby);
        assert_eq!(p.asleep_from, AsleepFrom::Standby);
        assert_eq!(p.cache_pages, None);
        let p = parse("disk = 'd'\nflash = 'f'\nasleep_from = 'spin-down'").unwrap();
        assert_eq!(p.asleep_from, AsleepFrom::SpinDown);
        let e = parse("disk = 'd'\nflash = 'f'\nasleep_from = 'soon'").unwrap_err();
        assert!(
            e.starts_with("function[0].asleep_from: unknown variant `soon`"),
            "{e}"
        );
    }

    #[test]
    fn bad_tables_name_their_key() {
        let cases = [
            (
                "disk = 'd'\nflash = 'd'",
                "function[0].flash: the ECD must be another device than the disk (both `d`)",
            ),
            (
                "disk = 'd'\nflash = 'f'\ncache_pages = 0",
                "function[0].cache_pages: expected a whole number from 1 to 8388608, got 0",
            ),
            (
                "disk = 'd'\nflash = 'f'\nquantum_s = -1",
                "function[0].quantum_s: expected a number from 0.000001 to 86400, got -1",
            ),
            (
                "disk = 'd'\nflash = 'f'\nquantum_s = 10\nhalf_life_s = 5",
                "function[0].half_life_s: the half-life must be at least one quantum (10 s)",
            ),
            (
                "disk = 'd'\nflash = 'f'\nreconfig_depth = 5000",
                "function[0].reconfig_depth: expected a whole number from 1 to 1024, got 5000",
            ),
            (
                "disk = 'd'\nflash = 'f'\nwriteback_interval_s = 5",
                "function[0].writeback_interval_s: only with dirty_expire_s (the age at which a dirty page is written back)",
            ),
            (
                "disk = 'd'\nflash = 'f'\npersist_map = false\npair_label = true",
                "function[0].pair_label: needs persist_map = true (the card's map log carries the pair's label)",
            ),
            (
                "disk = 'd'\nflash = 'f'\ndirty_expire_s = 0",
                "function[0].dirty_expire_s: expected a number from 0.001 to 86400000, got 0",
            ),
        ];
        for (text, want) in cases {
            assert_eq!(parse(text).unwrap_err(), want, "{text}");
        }
        let e = parse("disk = 'd'\nflash = 'f'\nabsorb_writes = 'never'").unwrap_err();
        assert!(
            e.starts_with("function[0].absorb_writes: unknown variant `never`"),
            "{e}"
        );
        let e = parse("flash = 'f'").unwrap_err();
        assert!(e.contains("missing field `disk`"), "{e}");
    }

    #[test]
    fn every_swarm_draw_is_valid() {
        for t in crate::registry::swarm_tables(11, 500, &["d0", "d1"], swarm) {
            parse(&t).unwrap();
        }
    }
}
