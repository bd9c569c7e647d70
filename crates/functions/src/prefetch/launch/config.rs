//! `kind = "iolab-prefetch"` and `kind = "fast-prefetch"`: their configuration, checks,
//! builders and swarm generators (one mechanism, two published settings).

use super::LaunchPrefetcher;
use crate::registry::{self, range, BuildContext, Draw, Kind, SwarmDevices};
use serde::Deserialize;
use wattio_core::function::Function;
use wattio_core::time::{secs_to_ns, Nanos};

pub static IOLAB_KIND: Kind = Kind {
    kind: "iolab-prefetch",
    module: "prefetch::launch",
    summary: "IOLab's application prefetcher: learn a launch, detect it, pause it and fetch its blocks in LBA (or file) order",
    source: "Joo et al., IOLab case study 1: application prefetcher (Word 2007 on a WD6400AAKS)",
    doc: "docs/functions/iolab-prefetch.md",
    check: |t, ctx| Params::parse(t, ctx.key, Scheme::Iolab).map(|_| ()),
    build: |t, ctx| build(t, ctx, Scheme::Iolab),
    swarm: Some(|d, devs| swarm(d, devs, Scheme::Iolab)),
};

pub static FAST_KIND: Kind = Kind {
    kind: "fast-prefetch",
    module: "prefetch::launch",
    summary: "FAST's two-phase SSD launch prefetcher: metadata first, the device queue kept full, the launch not paused",
    source: "Joo et al., FAST: Quick Application Launch on Solid-State Drives, FAST 2011",
    doc: "docs/functions/fast-prefetch.md",
    check: |t, ctx| Params::parse(t, ctx.key, Scheme::Fast).map(|_| ()),
    build: |t, ctx| build(t, ctx, Scheme::Fast),
    swarm: Some(|d, devs| swarm(d, devs, Scheme::Fast)),
};

/// The most guest requests a learning phase logs (the rest are counted as dropped): a
/// launch of 40,000 requests fits 25 times over; the log takes ~40 B a request.
pub const MAX_LOG: usize = 1 << 20;
/// The most prefetch reads in flight.
pub const MAX_DEPTH: u64 = 1024;
/// The most bursts `learn_launch` may skip.
pub const MAX_LEARN_LAUNCH: u64 = 1_000_000;

/// The order the dispatcher fetches a launch in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Order {
    /// Ascending LBA (IOLab's prefetcher).
    Lba,
    /// By file — reads without a file (metadata) first, then by inode — and within a file
    /// by LBA (the Windows prefetcher's inode-and-offset sort; an ext4 file's extents are
    /// in offset order, so LBA stands for the offset, which the block layer does not see).
    File,
    /// FAST: metadata in first-access order, then data in first-access order, each once
    /// the metadata read before it is in.
    TwoPhase,
}

/// What waits while the dispatcher runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hold {
    /// Every guest request (IOLab: the launch pauses).
    Launch,
    /// Only a read of an extent still being fetched (FAST: CPU and I/O overlap).
    Extent,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Scheme {
    Iolab,
    Fast,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Keys {
    order: Option<Order>,
    detect: Option<u64>,
    depth: Option<u64>,
    priority: Option<i64>,
    gap_s: Option<f64>,
    learn_launch: Option<u64>,
}

/// A checked configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct Params {
    pub order: Order,
    pub hold: Hold,
    /// Consecutive matching requests that start the prefetch (IOLab: 3).
    pub detect: usize,
    /// Prefetch reads in flight (IOLab: 1, one after another in sorted order; FAST: the
    /// device's queue, 31 on SATA NCQ).
    pub depth: usize,
    /// Device-queue priority of the prefetch reads (the guest's is 0).
    pub priority: i8,
    /// Guest idleness that ends a launch (learning, serving).
    pub gap: Nanos,
    /// Bursts of guest requests (each ended by `gap` of idleness) passed through unlogged
    /// before the one learned: 0 learns the first (the paper's one launch in a fresh
    /// system); 1 skips, say, a guest's boot.
    pub learn_launch: u32,
}

impl Params {
    fn parse(t: &toml::Table, key: &str, scheme: Scheme) -> Result<Params, String> {
        let k: Keys = registry::parse(t, key)?;
        let (order, hold, depth) = match scheme {
            Scheme::Iolab => (k.order.unwrap_or(Order::Lba), Hold::Launch, 1),
            Scheme::Fast => (Order::TwoPhase, Hold::Extent, 31),
        };
        if scheme == Scheme::Fast && k.order.is_some_and(|o| o != Order::TwoPhase) {
            return Err(format!(
                "{key}.order: FAST fetches in two phases (`two-phase`); use kind = \"iolab-prefetch\" for `lba` or `file`"
            ));
        }
        if scheme == Scheme::Iolab && k.order == Some(Order::TwoPhase) {
            return Err(format!(
                "{key}.order: `two-phase` is FAST's (kind = \"fast-prefetch\"); IOLab sorts by `lba` or `file`"
            ));
        }
        let detect = range::count(&format!("{key}.detect"), k.detect.unwrap_or(3), 1, 64)?;
        let depth = range::count(
            &format!("{key}.depth"),
            k.depth.unwrap_or(depth),
            1,
            MAX_DEPTH,
        )?;
        let priority = range::priority(
            &format!("{key}.priority"),
            k.priority.unwrap_or(1),
            i8::MIN,
            i8::MAX,
        )?;
        let gap = range::within(
            &format!("{key}.gap_s"),
            k.gap_s.unwrap_or(1.0),
            1e-6,
            3600.0,
        )?;
        let learn_launch = range::count(
            &format!("{key}.learn_launch"),
            k.learn_launch.unwrap_or(0),
            0,
            MAX_LEARN_LAUNCH,
        )?;
        Ok(Params {
            order,
            hold,
            detect: detect as usize,
            depth: depth as usize,
            priority,
            gap: secs_to_ns(gap),
            learn_launch: learn_launch as u32,
        })
    }
}

fn build(t: &toml::Table, ctx: &BuildContext, scheme: Scheme) -> Result<Box<dyn Function>, String> {
    let p = Params::parse(t, ctx.key, scheme)?;
    // Scratch ids are shared by the whole stack: this layer's come from a range of its
    // own, named by its key (`function[2]`), below the sub-I/O bit.
    let h = ctx.key.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    });
    let base = (0x5046u64 << 46) | ((h & 0xfff) << 34);
    Ok(Box::new(LaunchPrefetcher::new(p, base)))
}

fn swarm(d: &mut Draw<'_>, _devices: &SwarmDevices<'_>, scheme: Scheme) -> toml::Table {
    let mut t = toml::Table::new();
    if scheme == Scheme::Iolab {
        t.insert("order".into(), (*d.pick(&["lba", "file"])).into());
    }
    t.insert("detect".into(), (1 + d.below(3) as i64).into());
    let depth = 1 + d.below(4) as i64;
    t.insert("depth".into(), depth.into());
    t.insert("priority".into(), (d.below(3) as i64 - 1).into());
    t.insert("gap_s".into(), (*d.pick(&[0.0005, 0.005, 0.05])).into());
    // A quarter of the layers learn the second launch, derived from a value already drawn
    // so that no seed's other draws move (the swarm's records and the seeds its tests
    // keep stay what they were).
    if depth == 4 {
        t.insert("learn_launch".into(), 1.into());
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str, s: Scheme) -> Result<Params, String> {
        Params::parse(&toml::from_str(text).unwrap(), "function[1]", s)
    }

    #[test]
    fn defaults_are_the_papers() {
        let p = parse("", Scheme::Iolab).unwrap();
        assert_eq!(
            (
                p.order,
                p.hold,
                p.detect,
                p.depth,
                p.priority,
                p.learn_launch
            ),
            (Order::Lba, Hold::Launch, 3, 1, 1, 0)
        );
        assert_eq!(
            parse("learn_launch = 2", Scheme::Iolab)
                .unwrap()
                .learn_launch,
            2
        );
        let p = parse("", Scheme::Fast).unwrap();
        assert_eq!(
            (p.order, p.hold, p.detect, p.depth),
            (Order::TwoPhase, Hold::Extent, 3, 31)
        );
        assert_eq!(
            parse("order = 'file'", Scheme::Iolab).unwrap().order,
            Order::File
        );
    }

    #[test]
    fn bad_keys_are_named() {
        let e = parse("detect = 0", Scheme::Iolab).unwrap_err();
        assert!(
            e.starts_with("function[1].detect: expected a whole number from 1 to 64"),
            "{e}"
        );
        let e = parse("order = 'two-phase'", Scheme::Iolab).unwrap_err();
        assert!(
            e.starts_with("function[1].order: `two-phase` is FAST's"),
            "{e}"
        );
        let e = parse("order = 'lba'", Scheme::Fast).unwrap_err();
        assert!(
            e.starts_with("function[1].order: FAST fetches in two phases"),
            "{e}"
        );
        let e = parse("priority = 300", Scheme::Iolab).unwrap_err();
        assert!(
            e.contains("priority: expected a whole number from -128 to 127"),
            "{e}"
        );
        let e = parse("learn_launch = -1", Scheme::Iolab).unwrap_err();
        assert!(e.starts_with("function[1].learn_launch"), "{e}");
        let e = parse("gap_s = -1", Scheme::Iolab).unwrap_err();
        assert!(e.starts_with("function[1].gap_s"), "{e}");
        let e = parse("order = 'inode'", Scheme::Iolab).unwrap_err();
        assert!(
            e.starts_with("function[1].order: unknown variant `inode`"),
            "{e}"
        );
    }
}
