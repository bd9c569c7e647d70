//! `kind = "geometry-probe"`: its configuration, checks and builder.

use super::{GeometryProbe, Params};
use crate::registry::{self, range, Kind};
use serde::Deserialize;

pub static KIND: Kind = Kind {
    kind: "geometry-probe",
    module: "geometry::probe",
    summary: "timing probe of a disk's track boundaries (sectors per track per LBA range)",
    source: "Huang, PhD thesis 2006, ch. 6 (after Diskbench)",
    doc: "docs/functions/geometry-probe.md",
    check: |t, ctx| Params::parse(t, ctx.key).map(|_| ()),
    build: |t, ctx| Ok(Box::new(GeometryProbe::new(Params::parse(t, ctx.key)?).0)),
    // The probe overwrites the sectors it times: it is a measurement, not a storage layer,
    // and the swarm's data checking would (rightly) see its writes as data loss.
    swarm: None,
};

/// The most probe writes a run may issue (a bound on a typo such as `end_lba` past a
/// huge device with `confirms = 1000`).
pub const MAX_PROBES_LIMIT: u64 = 1_000_000_000;

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Keys {
    device: Option<String>,
    sector_bytes: Option<u32>,
    write_sectors: Option<u32>,
    settle_us: Option<f64>,
    backtrack: Option<u32>,
    confirms: Option<u32>,
    retries: Option<u32>,
    upward_only: Option<bool>,
    reference: Option<u32>,
    scans: Option<u32>,
    start_lba: Option<u64>,
    end_lba: Option<u64>,
    max_probes: Option<u64>,
    mechanics: Option<bool>,
    repeats: Option<u32>,
    skew_tracks: Option<u32>,
}

impl Params {
    /// Parse and range-check a `kind = "geometry-probe"` table (without `kind`).
    pub fn parse(t: &toml::Table, key: &str) -> Result<Params, String> {
        let k: Keys = registry::parse(t, key)?;
        let d = Params::default();
        let p = |sub: &str| format!("{key}.{sub}");
        let sector_bytes = k.sector_bytes.unwrap_or(d.sector_bytes);
        if !(512..=65536).contains(&sector_bytes) || !sector_bytes.is_power_of_two() {
            return Err(format!(
                "{}: expected a power of two from 512 to 65536, got {sector_bytes}",
                p("sector_bytes")
            ));
        }
        let write_sectors = k.write_sectors.unwrap_or(d.write_sectors);
        if !(2..=64).contains(&write_sectors) {
            return Err(format!(
                "{}: expected 2 to 64 (a write must be able to straddle a boundary), got {write_sectors}",
                p("write_sectors")
            ));
        }
        let settle_us = range::within(
            &p("settle_us"),
            k.settle_us.unwrap_or(d.settle_us),
            1.0,
            1e6,
        )?;
        let count = |sub: &str, v: Option<u32>, dflt: u32| {
            range::count(&p(sub), v.map_or(dflt as u64, u64::from), 1, 1000).map(|v| v as u32)
        };
        let backtrack = count("backtrack", k.backtrack, d.backtrack)?;
        let confirms = count("confirms", k.confirms, d.confirms)?;
        let retries = range::count(
            &p("retries"),
            k.retries.map_or(d.retries as u64, u64::from),
            0,
            100,
        )? as u32;
        let reference = range::count(
            &p("reference"),
            k.reference.map_or(d.reference as u64, u64::from),
            1,
            15,
        )? as u32;
        let scans = range::count(
            &p("scans"),
            k.scans.map_or(d.scans as u64, u64::from),
            1,
            10,
        )? as u32;
        let start_lba = k.start_lba.unwrap_or(0);
        if let Some(end) = k.end_lba {
            if end <= start_lba {
                return Err(format!(
                    "{}: expected an LBA past start_lba ({start_lba}), got {end}",
                    p("end_lba")
                ));
            }
        }
        let max_probes = range::count(
            &p("max_probes"),
            k.max_probes.unwrap_or(d.max_probes),
            1,
            MAX_PROBES_LIMIT,
        )?;
        let repeats = count("repeats", k.repeats, d.repeats)?;
        let skew_tracks = count("skew_tracks", k.skew_tracks, d.skew_tracks)?;
        Ok(Params {
            device: k.device,
            sector_bytes,
            write_sectors,
            settle_ns: (settle_us * 1e3).round() as u64,
            settle_us,
            backtrack,
            confirms,
            retries,
            upward_only: k.upward_only.unwrap_or(d.upward_only),
            reference,
            scans,
            start_lba,
            end_lba: k.end_lba,
            max_probes,
            mechanics: k.mechanics.unwrap_or(d.mechanics),
            repeats,
            skew_tracks,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(s: &str) -> toml::Table {
        s.parse().unwrap()
    }

    #[test]
    fn defaults_are_the_thesis_constants() {
        let p = Params::parse(&table(""), "function[0]").unwrap();
        assert_eq!(
            (
                p.sector_bytes,
                p.write_sectors,
                p.settle_ns,
                p.backtrack,
                p.confirms
            ),
            (512, 2, 500_000, 5, 10)
        );
    }

    #[test]
    fn errors_name_the_key() {
        let e = Params::parse(&table("confirms = 0"), "function[1]").unwrap_err();
        assert_eq!(
            e,
            "function[1].confirms: expected a whole number from 1 to 1000, got 0"
        );
        let e = Params::parse(&table("write_sectors = 1"), "function[1]").unwrap_err();
        assert!(
            e.starts_with("function[1].write_sectors: expected 2 to 64"),
            "{e}"
        );
        let e = Params::parse(&table("start_lba = 10\nend_lba = 10"), "f").unwrap_err();
        assert_eq!(e, "f.end_lba: expected an LBA past start_lba (10), got 10");
        let e = Params::parse(&table("settle = 3"), "f").unwrap_err();
        assert!(e.starts_with("f.settle: unknown field `settle`"), "{e}");
        let e = Params::parse(&table("retries = 101"), "f").unwrap_err();
        assert_eq!(
            e,
            "f.retries: expected a whole number from 0 to 100, got 101"
        );
        let e = Params::parse(&table("scans = 0"), "f").unwrap_err();
        assert_eq!(e, "f.scans: expected a whole number from 1 to 10, got 0");
        let e = Params::parse(&table("sector_bytes = 1000"), "f").unwrap_err();
        assert!(
            e.starts_with("f.sector_bytes: expected a power of two"),
            "{e}"
        );
    }
}
