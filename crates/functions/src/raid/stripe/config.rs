//! `kind = "raid"`: its configuration, checks, builder and swarm generator.

use super::persist::{DEFAULT_MAX_BAD_PAGES, MAX_MAX_BAD_PAGES};
use super::{Level, Parity, Raid, PAGE};
use crate::registry::{self, range, Draw, Kind, SwarmDevices};
use serde::Deserialize;

pub static KIND: Kind = Kind {
    kind: "raid",
    module: "raid::stripe",
    summary: "RAID-0 or RAID-5 over D devices: chunked striping, rotating parity, degraded reads",
    source: "Patterson, Gibson, Katz, SIGMOD 1988; Linux md (raid0.c, raid5.c)",
    doc: "docs/functions/raid.md",
    check: |t, ctx| RaidConfig::parse(t, ctx.key).map(|_| ()),
    build: |t, ctx| {
        let raid = RaidConfig::parse(t, ctx.key)?.build();
        Ok(Box::new(raid.array_id(ctx.identity())))
    },
    swarm: Some(swarm),
};

/// Default chunk size, KiB: md's default of the paper's era (mdadm < 3.1; 512 KiB since).
pub const DEFAULT_CHUNK_KIB: u64 = 64;
/// Members at most: a bound on per-row work and buffers.
pub const MAX_MEMBERS: usize = 64;
/// Default bound on a RAID-5 row range, KiB: Linux's long-standing default request size
/// bound (`max_sectors_kb`, BLK_DEF_MAX_SECTORS = 1024 sectors), up to which the block
/// layer merges md's page-sized member bios.
pub const DEFAULT_MERGE_KIB: u64 = 512;
/// Default write-intent region, KiB of each member: mdadm's bitmap chunk for an internal
/// bitmap (64 MiB since mdadm 3.x; md's own minimum is 4 KiB).
pub const DEFAULT_WRITE_INTENT_KIB: u64 = 65536;
/// Default period of the write-intent bitmap's lazy clean, ms: md's `daemon_sleep` (5 s).
pub const DEFAULT_WRITE_INTENT_DELAY_MS: u64 = 5000;
/// Largest `merge_kib`: a row range's scratch (data disks + parity, one range each) stays
/// addressable by the 32-bit buffer offsets.
pub const MAX_MERGE_KIB: u64 = 4096;

/// The `merge_kib` key (RAID-5's row ranges, see the stripe module): bytes.
pub(crate) fn check_merge(key: &str, level: Level, merge_kib: Option<u64>) -> Result<u64, String> {
    match (merge_kib, level) {
        (Some(_), Level::Raid0) => Err(format!(
            "{key}.merge_kib: RAID-0 has no page rows to merge (its chunk pieces go down whole)"
        )),
        (Some(m), Level::Raid5) => {
            let m = range::count(&format!("{key}.merge_kib"), m, 4, MAX_MERGE_KIB)?;
            if m % (PAGE / 1024) != 0 {
                return Err(format!(
                    "{key}.merge_kib: expected a multiple of the 4 KiB page, got {m}"
                ));
            }
            Ok(m * 1024)
        }
        (None, _) => Ok(DEFAULT_MERGE_KIB * 1024),
    }
}

/// The `layout` key's values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum LayoutName {
    LeftSymmetric,
    LeftAsymmetric,
}

/// The checks of the keys every striped array has (`kind = "raid"` and PARAID's gears):
/// the level, the member count, the chunk size and the parity layout; the level, the chunk
/// in bytes and the parity.
pub(crate) fn check_array(
    key: &str,
    level: u64,
    members: usize,
    chunk_kib: Option<u64>,
    layout: Option<LayoutName>,
) -> Result<(Level, u64, Parity), String> {
    let lv = match level {
        0 => Level::Raid0,
        5 => Level::Raid5,
        v => return Err(format!("{key}.level: expected 0 or 5, got {v}")),
    };
    let min = if lv == Level::Raid5 { 3 } else { 1 };
    if members < min || members > MAX_MEMBERS {
        return Err(format!(
            "{key}.devices: RAID-{level} takes {min} to {MAX_MEMBERS} devices, got {members}"
        ));
    }
    let chunk_kib = match chunk_kib {
        Some(c) => range::count(&format!("{key}.chunk_kib"), c, 4, 65536)?,
        None => DEFAULT_CHUNK_KIB,
    };
    if !chunk_kib.is_power_of_two() {
        return Err(format!(
            "{key}.chunk_kib: expected a power of two, got {chunk_kib}"
        ));
    }
    let parity = match (layout, lv) {
        (Some(_), Level::Raid0) => {
            return Err(format!("{key}.layout: RAID-0 has no parity to lay out"))
        }
        (Some(LayoutName::LeftAsymmetric), _) => Parity::LeftAsymmetric,
        _ => Parity::LeftSymmetric,
    };
    Ok((lv, chunk_kib * 1024, parity))
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Keys {
    level: u64,
    devices: Vec<String>,
    chunk_kib: Option<u64>,
    layout: Option<LayoutName>,
    assume_clean: Option<bool>,
    persist: Option<bool>,
    max_bad_pages: Option<u64>,
    merge_kib: Option<u64>,
    spare: Option<String>,
    replace: Option<String>,
    replace_on_write_error: Option<bool>,
    replace_window_kib: Option<u64>,
    write_intent: Option<bool>,
    write_intent_kib: Option<u64>,
    write_intent_delay_ms: Option<u64>,
    fail: Option<String>,
    max_read_errors: Option<u64>,
    log_members: Option<String>,
}

/// The write-intent bitmap (RAID-5 with its log).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IntentConfig {
    /// Bytes of each member a region covers (a multiple of the chunk).
    pub region: u64,
    /// The lazy clean's period, ns.
    pub delay: u64,
}

/// Failed reads of a member before it is failed: md's RAID-5 fails a device whose read
/// errors pass `max_nr_stripes`, its stripe cache's size (`stripe_cache_size`, 256 by
/// default).
pub const DEFAULT_MAX_READ_ERRORS: u64 = 256;

/// The default copy window of a replacement, KiB of a member.
pub const DEFAULT_REPLACE_WINDOW_KIB: u64 = 1024;

/// A hot spare and when a member is replaced by it (RAID-5 with its log).
#[derive(Clone, Debug, PartialEq)]
pub struct SpareConfig {
    pub device: String,
    /// Replace a member when a write to it fails (md's WantReplacement).
    pub on_write_error: bool,
    /// Replace this member at start (`mdadm --replace`).
    pub replace: Option<String>,
    /// Bytes of a member copied at once and logged as moved by one record.
    pub window: u64,
}

/// A checked RAID configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct RaidConfig {
    pub level: Level,
    pub devices: Vec<String>,
    pub chunk: u64,
    pub parity: Parity,
    pub assume_clean: bool,
    /// RAID-5's bad-page list in a log at the end of member 0, at most this many pages
    /// (`None`: in memory only).
    pub persist: Option<u64>,
    /// RAID-5: the largest row range one operation covers, bytes.
    pub merge: u64,
    /// RAID-5: a hot spare (`None`: none).
    pub spare: Option<SpareConfig>,
    /// RAID-5: the write-intent bitmap (`None`: none).
    pub write_intent: Option<IntentConfig>,
    /// The bitmap region the log has room for (set with or without a bitmap, so turning it
    /// on or off does not move the log).
    pub bitmap_region: u64,
    /// RAID-5 with its log: fail this member at start (`mdadm --fail`).
    pub fail: Option<String>,
    /// RAID-5 with its log: fail a member once more than this many of its reads failed.
    pub max_read_errors: u64,
    /// RAID-5 with its log: a copy of it on every member, not on the first only.
    pub log_on_all: bool,
}

impl RaidConfig {
    /// Parse and range-check a `kind = "raid"` table (without `kind`).
    pub fn parse(t: &toml::Table, key: &str) -> Result<RaidConfig, String> {
        let k: Keys = registry::parse(t, key)?;
        let (level, chunk, parity) =
            check_array(key, k.level, k.devices.len(), k.chunk_kib, k.layout)?;
        let merge = check_merge(key, level, k.merge_kib)?;
        let persist = match (k.persist, level) {
            (Some(true), Level::Raid0) => {
                return Err(format!(
                    "{key}.persist: RAID-0 has no bad-page list to persist"
                ))
            }
            (None | Some(true), Level::Raid5) => Some(match k.max_bad_pages {
                Some(n) => range::count(&format!("{key}.max_bad_pages"), n, 1, MAX_MAX_BAD_PAGES)?,
                None => DEFAULT_MAX_BAD_PAGES,
            }),
            _ => None,
        };
        if persist.is_none() && k.max_bad_pages.is_some() {
            return Err(format!(
                "{key}.max_bad_pages: only a persisted list (RAID-5, persist = true) has a bound"
            ));
        }
        let spare = match k.spare {
            None => {
                for (set, name) in [
                    (k.replace.is_some(), "replace"),
                    (k.replace_on_write_error.is_some(), "replace_on_write_error"),
                    (k.replace_window_kib.is_some(), "replace_window_kib"),
                ] {
                    if set {
                        return Err(format!(
                            "{key}.{name}: only an array with a `spare` replaces members"
                        ));
                    }
                }
                None
            }
            Some(_) if level == Level::Raid0 => {
                return Err(format!(
                    "{key}.spare: RAID-0 has no redundancy to replace a member from"
                ))
            }
            Some(_) if persist.is_none() => {
                return Err(format!(
                    "{key}.spare: a replacement is logged in the bad-page log (persist = true)"
                ))
            }
            Some(d) => {
                if k.devices.contains(&d) {
                    return Err(format!("{key}.spare: `{d}` is also one of the devices"));
                }
                if let Some(r) = k.replace.as_ref().filter(|r| !k.devices.contains(r)) {
                    return Err(format!(
                        "{key}.replace: `{r}` is not one of the devices ({})",
                        k.devices.join(", ")
                    ));
                }
                let window = match k.replace_window_kib {
                    Some(w) => range::count(&format!("{key}.replace_window_kib"), w, 4, 1 << 20)?,
                    None => DEFAULT_REPLACE_WINDOW_KIB,
                };
                Some(SpareConfig {
                    device: d,
                    on_write_error: k.replace_on_write_error.unwrap_or(true),
                    replace: k.replace,
                    window: window * 1024,
                })
            }
        };
        let region_kib = match k.write_intent_kib {
            Some(r) => {
                let r = range::count(&format!("{key}.write_intent_kib"), r, 4, 1 << 30)?;
                if r % (chunk / 1024) != 0 {
                    return Err(format!(
                        "{key}.write_intent_kib: expected a multiple of chunk_kib ({}), got {r}",
                        chunk / 1024
                    ));
                }
                r
            }
            None => DEFAULT_WRITE_INTENT_KIB.max(chunk / 1024),
        };
        let write_intent = match k.write_intent {
            Some(true) if level == Level::Raid0 => {
                return Err(format!(
                    "{key}.write_intent: RAID-0 has no parity for a bitmap to keep in sync"
                ))
            }
            Some(true) if persist.is_none() => {
                return Err(format!(
                    "{key}.write_intent: the bitmap is kept in the bad-page log (persist = true)"
                ))
            }
            Some(true) => {
                let delay = match k.write_intent_delay_ms {
                    Some(d) => {
                        range::count(&format!("{key}.write_intent_delay_ms"), d, 1, 3_600_000)?
                    }
                    None => DEFAULT_WRITE_INTENT_DELAY_MS,
                };
                Some(IntentConfig {
                    region: region_kib * 1024,
                    delay: delay * 1_000_000,
                })
            }
            _ => {
                if k.write_intent_delay_ms.is_some() {
                    return Err(format!(
                        "{key}.write_intent_delay_ms: only an array with `write_intent = true` has a bitmap to clean"
                    ));
                }
                if k.write_intent_kib.is_some() && persist.is_none() {
                    return Err(format!(
                        "{key}.write_intent_kib: only a persisted log (RAID-5, persist = true) holds a bitmap"
                    ));
                }
                None
            }
        };
        for (set, name) in [
            (k.fail.is_some(), "fail"),
            (k.max_read_errors.is_some(), "max_read_errors"),
        ] {
            if set && persist.is_none() {
                return Err(format!(
                    "{key}.{name}: a failed member is recorded in the bad-page log (RAID-5, persist = true)"
                ));
            }
        }
        if let Some(f) = k.fail.as_ref().filter(|f| !k.devices.contains(f)) {
            return Err(format!(
                "{key}.fail: `{f}` is not one of the devices ({})",
                k.devices.join(", ")
            ));
        }
        let log_on_all = match k.log_members.as_deref() {
            // md's: a superblock (here the log's copy, with the array's label) on every
            // member, so a member swapped, blanked or out of order is told at start.
            None => persist.is_some(),
            Some("first") => false,
            Some("all") if persist.is_some() => true,
            Some("all") => {
                return Err(format!(
                    "{key}.log_members: only a persisted log (RAID-5, persist = true) has copies"
                ))
            }
            Some(other) => {
                return Err(format!(
                    "{key}.log_members: expected \"first\" or \"all\", got \"{other}\""
                ))
            }
        };
        let max_read_errors = match k.max_read_errors {
            Some(n) => range::count(&format!("{key}.max_read_errors"), n, 0, 1 << 32)?,
            None => DEFAULT_MAX_READ_ERRORS,
        };
        Ok(RaidConfig {
            level,
            devices: k.devices,
            chunk,
            parity,
            assume_clean: k.assume_clean.unwrap_or(false),
            persist,
            merge,
            spare,
            write_intent,
            bitmap_region: region_kib * 1024,
            fail: k.fail,
            max_read_errors,
            log_on_all,
        })
    }

    pub fn build(self) -> Raid {
        debug_assert!(self.chunk.is_multiple_of(PAGE));
        let raid = Raid::new(
            self.devices,
            self.level,
            self.parity,
            self.chunk,
            self.assume_clean,
        )
        .merge(self.merge);
        let raid = match self.spare {
            Some(s) => raid
                .spare(s.device, s.on_write_error, s.replace)
                .copy_window((s.window / self.chunk).max(1)),
            None => raid,
        };
        let raid = match self.write_intent {
            Some(w) => raid.write_intent(w.region, w.delay),
            None => raid,
        };
        match self.persist {
            Some(max) => raid
                .persist(max)
                .bitmap_reserve(self.bitmap_region)
                .failures(self.fail, self.max_read_errors)
                .log_on_all(self.log_on_all),
            None => raid,
        }
    }
}

/// A random valid configuration over the swarm's data devices: RAID-5 when there are three
/// or more, small chunks so that the swarm's few hot pages span stripes.
fn swarm(d: &mut Draw<'_>, devices: &SwarmDevices<'_>) -> toml::Table {
    let mut t = toml::Table::new();
    let five = devices.names.len() >= 3 && d.chance(0.75);
    t.insert("level".into(), (if five { 5 } else { 0 }).into());
    // A hot spare: the last device, when the others still make a RAID-5 and it is as
    // large as the smallest of them (its capacity not known: not drawn).
    let n = devices.names.len();
    let caps = devices.capacities;
    let spare = five
        && n >= 4
        && caps.len() == n
        && caps[n - 1] >= *caps[..n - 1].iter().min().expect("members")
        && d.chance(0.5);
    let members = &devices.names[..n - usize::from(spare)];
    let names: Vec<toml::Value> = members.iter().map(|n| n.clone().into()).collect();
    t.insert("devices".into(), toml::Value::Array(names));
    t.insert("chunk_kib".into(), (*d.pick(&[4i64, 8, 16, 64])).into());
    if five && d.chance(0.5) {
        t.insert("layout".into(), "left-asymmetric".into());
    }
    if spare {
        t.insert("spare".into(), devices.names[n - 1].clone().into());
        if d.chance(0.5) {
            t.insert("replace".into(), d.pick(members).clone().into());
        }
        if d.chance(0.25) {
            t.insert("replace_on_write_error".into(), false.into());
        }
        t.insert(
            "replace_window_kib".into(),
            (*d.pick(&[4i64, 64, 1024])).into(),
        );
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<RaidConfig, String> {
        RaidConfig::parse(&toml::from_str(text).unwrap(), "function[0]")
    }

    #[test]
    fn defaults_and_errors_name_their_key() {
        let c = parse("level = 5\ndevices = ['a', 'b', 'c']").unwrap();
        assert_eq!(
            (c.level, c.chunk, c.parity, c.assume_clean, c.persist),
            (
                Level::Raid5,
                65536,
                Parity::LeftSymmetric,
                false,
                Some(4096)
            )
        );
        assert_eq!(parse("level = 0\ndevices = ['a']").unwrap().persist, None);
        let c = parse("level = 5\ndevices = ['a', 'b', 'c']\npersist = false").unwrap();
        assert_eq!(c.persist, None);
        let c = parse("level = 5\ndevices = ['a', 'b', 'c']\nmax_bad_pages = 9").unwrap();
        assert_eq!(c.persist, Some(9));
        let c = parse("level = 5\ndevices = ['a', 'b', 'c']\nlayout = 'left-asymmetric'").unwrap();
        assert_eq!(c.parity, Parity::LeftAsymmetric);
        assert_eq!(c.merge, 512 * 1024);
        let c = parse("level = 5\ndevices = ['a', 'b', 'c']\nmerge_kib = 12").unwrap();
        assert_eq!(c.merge, 12 * 1024);
        assert_eq!((c.fail, c.max_read_errors), (None, 256));
        let c =
            parse("level = 5\ndevices = ['a', 'b', 'c']\nfail = 'b'\nmax_read_errors = 0").unwrap();
        assert_eq!((c.fail.as_deref(), c.max_read_errors), (Some("b"), 0));
        assert!(c.log_on_all);
        let c = parse("level = 5\ndevices = ['a', 'b', 'c']\nlog_members = 'first'").unwrap();
        assert!(!c.log_on_all);
        let c = parse("level = 5\ndevices = ['a', 'b', 'c']\npersist = false").unwrap();
        assert!(!c.log_on_all);
        let cases = [
            (
                "level = 5\ndevices = ['a', 'b', 'c']\nlog_members = 'every'",
                "function[0].log_members: expected \"first\" or \"all\", got \"every\"",
            ),
            (
                "level = 5\ndevices = ['a', 'b', 'c']\npersist = false\nlog_members = 'all'",
                "function[0].log_members: only a persisted log (RAID-5, persist = true) has copies",
            ),
            (
                "level = 5\ndevices = ['a', 'b', 'c']\nfail = 'd'",
                "function[0].fail: `d` is not one of the devices (a, b, c)",
            ),
            (
                "level = 5\ndevices = ['a', 'b', 'c']\npersist = false\nfail = 'a'",
                "function[0].fail: a failed member is recorded in the bad-page log (RAID-5, persist = true)",
            ),
            (
                "level = 0\ndevices = ['a']\nmax_read_errors = 3",
                "function[0].max_read_errors: a failed member is recorded in the bad-page log (RAID-5, persist = true)",
            ),
            (
                "level = 5\ndevices = ['a', 'b', 'c']\nmax_read_errors = 5000000000",
                "function[0].max_read_errors: expected a whole number from 0 to 4294967296, got 5000000000",
            ),
            (
                "level = 1\ndevices = ['a']",
                "function[0].level: expected 0 or 5, got 1",
            ),
            (
                "level = 5\ndevices = ['a', 'b']",
                "function[0].devices: RAID-5 takes 3 to 64 devices, got 2",
            ),
            (
                "level = 0\ndevices = ['a']\nchunk_kib = 2",
                "function[0].chunk_kib: expected a whole number from 4 to 65536, got 2",
            ),
            (
                "level = 0\ndevices = ['a']\nchunk_kib = 48",
                "function[0].chunk_kib: expected a power of two, got 48",
            ),
            (
                "level = 0\ndevices = ['a']\nlayout = 'left-symmetric'",
                "function[0].layout: RAID-0 has no parity to lay out",
            ),
            (
                "level = 0\ndevices = ['a']\nmerge_kib = 8",
                "function[0].merge_kib: RAID-0 has no page rows to merge (its chunk pieces go down whole)",
            ),
            (
                "level = 5\ndevices = ['a', 'b', 'c']\nmerge_kib = 6",
                "function[0].merge_kib: expected a multiple of the 4 KiB page, got 6",
            ),
            (
                "level = 5\ndevices = ['a', 'b', 'c']\nmerge_kib = 8192",
                "function[0].merge_kib: expected a whole number from 4 to 4096, got 8192",
            ),
            (
                "level = 0\ndevices = ['a']\npersist = true",
                "function[0].persist: RAID-0 has no bad-page list to persist",
            ),
            (
                "level = 5\ndevices = ['a', 'b', 'c']\nmax_bad_pages = 0",
                "function[0].max_bad_pages: expected a whole number from 1 to 1048576, got 0",
            ),
            (
                "level = 5\ndevices = ['a', 'b', 'c']\npersist = false\nmax_bad_pages = 8",
                "function[0].max_bad_pages: only a persisted list (RAID-5, persist = true) has a bound",
            ),
        ];
        for (text, want) in cases {
            assert_eq!(parse(text).unwrap_err(), want, "{text}");
        }
        let e = parse("level = 5\ndevices = ['a', 'b', 'c']\nlayout = 'right'").unwrap_err();
        assert!(
            e.starts_with("function[0].layout: unknown variant `right`"),
            "{e}"
        );
    }

    #[test]
    fn a_spare_and_its_replacement_rules_are_checked_naming_the_key() {
        let c = parse("level = 5\ndevices = ['a', 'b', 'c']\nspare = 's'\nreplace = 'b'").unwrap();
        assert_eq!(
            c.spare,
            Some(SpareConfig {
                device: "s".into(),
                on_write_error: true,
                replace: Some("b".into()),
                window: 1 << 20,
            })
        );
        let c = parse(
            "level = 5\ndevices = ['a', 'b', 'c']\nspare = 's'\nreplace_on_write_error = false",
        )
        .unwrap();
        assert!(!c.spare.unwrap().on_write_error);
        let cases = [
            (
                "level = 0\ndevices = ['a', 'b']\nspare = 's'",
                "function[0].spare: RAID-0 has no redundancy to replace a member from",
            ),
            (
                "level = 5\ndevices = ['a', 'b', 'c']\nspare = 's'\npersist = false",
                "function[0].spare: a replacement is logged in the bad-page log (persist = true)",
            ),
            (
                "level = 5\ndevices = ['a', 'b', 'c']\nspare = 'c'",
                "function[0].spare: `c` is also one of the devices",
            ),
            (
                "level = 5\ndevices = ['a', 'b', 'c']\nspare = 's'\nreplace = 'x'",
                "function[0].replace: `x` is not one of the devices (a, b, c)",
            ),
            (
                "level = 5\ndevices = ['a', 'b', 'c']\nreplace = 'a'",
                "function[0].replace: only an array with a `spare` replaces members",
            ),
            (
                "level = 5\ndevices = ['a', 'b', 'c']\nreplace_on_write_error = true",
                "function[0].replace_on_write_error: only an array with a `spare` replaces members",
            ),
            (
                "level = 5\ndevices = ['a', 'b', 'c']\nspare = 's'\nreplace_window_kib = 2",
                "function[0].replace_window_kib: expected a whole number from 4 to 1048576, got 2",
            ),
        ];
        for (text, e) in cases {
            assert_eq!(parse(text).unwrap_err(), e, "{text}");
        }
    }

    #[test]
    fn every_swarm_draw_is_valid() {
        let mut next = crate::registry::lcg(11);
        let mut spares = 0;
        for n in 1..=5 {
            let names: Vec<String> = (0..n).map(|k| format!("d{k}")).collect();
            // Capacities known (the last device the largest: a spare may be drawn) or not.
            let caps: Vec<u64> = (0..n as u64).map(|k| 1 << (30 + k)).collect();
            for capacities in [&[][..], &caps[..]] {
                for _ in 0..100 {
                    let t = swarm(
                        &mut Draw(&mut next),
                        &SwarmDevices {
                            names: &names,
                            capacities,
                        },
                    );
                    let c = parse(&toml::to_string(&t).unwrap()).unwrap();
                    if let Some(s) = c.spare {
                        assert!(capacities.len() == n && n >= 4 && !c.devices.contains(&s.device));
                        spares += 1;
                    }
                }
            }
        }
        assert!(spares > 20, "{spares} draws with a spare");
    }
}
