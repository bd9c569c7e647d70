//! Run the geometry probe ([`wattio_functions::geometry::probe`]) against a device model in
//! simulation: the same function `wattio serve` would run against a real disk, here on the
//! simulated executor with nothing else in the stack.

use crate::sim::{NullSink, Simulator};
use std::sync::Arc;
use wattio_core::device::{DeviceInfo, DeviceRuntime, Timing};
use wattio_core::geometry::Geometry;
use wattio_core::power::{PowerDef, PowerSpec, StateDef};
use wattio_core::stack::Stack;
use wattio_core::trace::VecSource;
use wattio_devices::mechanical::MechanicalDef;
use wattio_functions::geometry::probe::{GeometryProbe, Params, Report, TrackRun};

/// Probe `timing` (a fresh model: its arm at rest, its caches empty) with `params`.
pub fn probe(name: &str, timing: Box<dyn Timing>, params: Params) -> Result<Report, String> {
    let info = DeviceInfo {
        geometry: timing.geometry(),
        // Power does not enter the probe; a constant draw keeps the ledger trivial.
        ..DeviceInfo::new(
            0,
            name,
            timing.capacity(),
            Arc::new(PowerSpec::constant(0.0)),
        )
    };
    let dev = DeviceRuntime::new(info, timing, None, 0);
    let (f, report) = GeometryProbe::new(params);
    let mut stack = Stack::new(vec![Box::new(f)]);
    stack.attach(std::slice::from_ref(&dev.info))?;
    // No host requests: the run lasts as long as the probe issues writes. `until` is only
    // the clock's bound; the event loop stops when the probe has nothing left in flight.
    Simulator::new(stack, vec![dev]).run(
        &mut VecSource::new(Vec::new()),
        Some(u64::MAX / 4),
        0,
        &mut NullSink,
    )?;
    let r = report.lock().unwrap_or_else(|e| e.into_inner()).clone();
    Ok(r)
}

/// A model's own track runs over `lbas` (512-byte sectors), from its geometry: consecutive
/// LBAs on one (cylinder, surface) form a track, and tracks of one length merge into a
/// run — what a probe of the same range must report. `None` for a model without geometry.
pub fn model_runs(geometry: &dyn Geometry, lbas: std::ops::Range<u64>) -> Option<Vec<TrackRun>> {
    let mut runs: Vec<TrackRun> = Vec::new();
    let push = |first: u64, end: u64, runs: &mut Vec<TrackRun>| {
        let spt = end - first;
        match runs.last_mut() {
            Some(r) if r.spt == spt => r.last_lba = end - 1,
            _ => runs.push(TrackRun {
                first_lba: first,
                last_lba: end - 1,
                spt,
            }),
        }
    };
    let (mut first, mut last) = (lbas.start, None);
    for lba in lbas.clone() {
        let l = geometry.locate(lba * 512)?;
        let key = (l.cylinder, l.surface);
        if last.is_some_and(|k| k != key) {
            push(first, lba, &mut runs);
            first = lba;
        }
        last = Some(key);
    }
    if lbas.end > first {
        push(first, lbas.end, &mut runs);
    }
    Some(runs)
}

/// A probe's runs with its tail (the LBAs after the last boundary it timed) folded in as
/// the model's last track(s), for comparing with [`model_runs`] over the probed range.
pub fn runs_with_tail(r: &Report) -> Vec<TrackRun> {
    let mut got = r.runs.clone();
    if let Some((first, last)) = r.tail {
        match got.last_mut() {
            Some(l) if (last - first + 1) % l.spt == 0 => l.last_lba = last,
            _ => got.push(TrackRun {
                first_lba: first,
                last_lba: last,
                spt: last - first + 1,
            }),
        }
    }
    got
}

/// Cache defaults of a probed spec: the probe's writes cannot see segments or read-ahead.
/// A modest read cache of its time (DiskSim's validated drives hold 2–16 segments of
/// 64–512 blocks): 8 segments of 256 blocks, read-ahead to the segment's end.
const CACHE_SEGMENTS: u32 = 8;
const CACHE_SEGMENT_BLOCKS: u32 = 256;

/// A runnable `hdd-mechanical` drive from the probe's findings (`params.mechanics`):
/// zones of whole cylinders (`tracks / surfaces`), blocks per track as a revolution holds
/// (spares as per-track spares at the track's end, where the skews were timed from),
/// skews, rotation, head switch, the seek table, one overhead for every command. What the
/// probe cannot see is a documented default, said so in `sources`.
pub fn drive_spec(r: &Report) -> Result<MechanicalDef, String> {
    use wattio_devices::mechanical::layout::{LayoutDef, Zone, NO_SPARING, SECTPERTRACK_SPARING};
    use wattio_devices::mechanical::seek::SeekDef;
    use wattio_devices::mechanical::{CacheDef, ControllerDef};
    let m = r
        .mechanics
        .as_ref()
        .ok_or("drive spec: the probe ran without its second phase (mechanics = true)")?;
    let s = m.surfaces.max(1);
    let mut zones = Vec::with_capacity(m.zones.len());
    let mut cyl = 0u32;
    let last = m.zones.len().saturating_sub(1);
    for (i, z) in m.zones.iter().enumerate() {
        let mut tracks = z.tracks;
        if i == last {
            // The tail: the last track(s), which had no boundary after them to time.
            tracks += r.tail.map_or(0, |(a, b)| (b - a + 1) / z.spt.max(1));
        }
        let cyls = u32::try_from((tracks as f64 / s as f64).round().max(1.0) as u64)
            .map_err(|_| "drive spec: too many cylinders".to_string())?;
        let bpt = z.sectors_per_rev.max(z.spt);
        let spares = bpt - z.spt;
        let spr = bpt as f64;
        // Timed from the last LBA's end: spares at the end of the track come before the
        // next track's first sector.
        let skew = |k: f64| ((k - spares as f64).rem_euclid(spr) * 1000.0).round() / 1000.0;
        zones.push(Zone {
            first_cyl: cyl,
            last_cyl: cyl + cyls - 1,
            blocks_per_track: u32::try_from(bpt).map_err(|_| "drive spec: track too long")?,
            first_block_offset: 0.0,
            empty_front: 0,
            track_skew: skew(z.head_skew),
            cyl_skew: skew(z.cyl_skew),
            spares: spares as u32,
            slips: vec![],
            defects: vec![],
        });
        cyl += cyls;
    }
    let sparing = if zones.iter().any(|z| z.spares > 0) {
        SECTPERTRACK_SPARING
    } else {
        NO_SPARING
    };
    let ms = |ns: f64| (ns / 1e3).round() / 1e3;
    let mut table: Vec<(u32, f64)> = m.seek.iter().map(|&(d, t)| (d, ms(t))).collect();
    if table.len() < 2 {
        // One or two cylinders: the curve is never (or once) used; a flat line.
        let t = table.first().map_or(ms(m.head_switch_ns), |r| r.1);
        table = vec![(1, t), (2, t)];
    }
    let o = ms(m.overhead_ns);
    let controller = ControllerDef {
        read_hit_after_read_ms: o,
        read_hit_after_write_ms: o,
        read_miss_after_read_ms: o,
        read_miss_after_write_ms: o,
        write_hit_after_read_ms: o,
        write_hit_after_write_ms: o,
        write_miss_after_read_ms: o,
        write_miss_after_write_ms: o,
        never_disconnect: true,
        ..ControllerDef::default()
    };
    let src = |v: &str| toml::Value::String(v.into());
    let mut sources = toml::Table::new();
    for (k, v) in [
        ("rpm", "probe: a FUA write of its lead's own sectors costs one revolution"),
        ("layout", "probe: track boundaries (phase one); blocks per track = revolution / sector time (the in-track sawtooth's slope), the excess over LBAs per track as per-track spares; cylinders = tracks / surfaces"),
        ("skews", "probe: the response of a write at a track's first sector right after one at the previous track's last, less the write, in sector times; first_block_offset 0 (not timed)"),
        ("surfaces", "probe: the period of the boundaries whose skew differs (cylinder switches); 1 when none differed"),
        ("head_switch_ms", "probe: least response across a head switch less the in-track least (includes write settling, to one sector time)"),
        ("seek", "probe: least response over the target's sectors at each cylinder distance less overhead and write (write seeks: includes write settling, to one sector time)"),
        ("controller", "probe: one overhead for every command = the in-track sawtooth's least less the write; bus time 0 and no disconnects (default: not visible to 2-sector writes); read overheads assumed equal to the write's"),
        ("cache", "default: 8 segments of 256 blocks, read-ahead to the segment's end (not probed); write-back (fast_write_level 2) iff a plain write answered within half a revolution, else write-through"),
    ] {
        sources.insert(k.into(), src(v));
    }
    Ok(MechanicalDef {
        model: "hdd-mechanical".into(),
        surfaces: s,
        cylinders: cyl,
        rpm: 60e9 / m.rotation_ns,
        head_switch_ms: ms(m.head_switch_ns),
        write_settle_ms: 0.0,
        seek: SeekDef::Extracted { table },
        layout: LayoutDef {
            tree: None,
            mapping: 0,
            sparing,
            range_size: 1,
            zones,
        },
        controller,
        cache: CacheDef {
            enabled: true,
            segments: CACHE_SEGMENTS,
            segment_blocks: CACHE_SEGMENT_BLOCKS,
            separate_write_segment: false,
            read_water: 0.0,
            write_water: 0.0,
            continuous_read: 3,
            max_read_ahead: CACHE_SEGMENT_BLOCKS,
            read_ahead_over_requested: true,
            fast_write_level: if m.write_back { 2 } else { 0 },
            read_hits_on_write_data: true,
            read_ahead_on_idle_hit: false,
            zero_latency_read: false,
            read_any_free_blocks: false,
            write_prebuffering: false,
            write_segments: 0,
            stop_prefetch_in_sector: false,
        },
        scheduler: "fcfs".into(),
        sources,
    })
}

/// The catalogue form of a probed drive: `kind`, `description`, `references`, `[timing]`
/// and a `[power]` table — `power` if given, else one 0 W state marked as a placeholder
/// (a timing probe sees no power; replace it from a datasheet).
pub fn spec_toml(
    name: &str,
    origin: &str,
    def: &MechanicalDef,
    power: Option<PowerDef>,
) -> Result<String, String> {
    #[derive(serde::Serialize)]
    struct Doc<'a> {
        kind: &'a str,
        description: String,
        references: Vec<String>,
        timing: &'a MechanicalDef,
        power: PowerDef,
    }
    let power = power.unwrap_or_else(|| PowerDef {
        idle: "on".into(),
        active: "on".into(),
        seek: None,
        rated_start_stop: None,
        rated_start_stop_source: String::new(),
        flush_asleep: Default::default(),
        states: vec![StateDef {
            name: "on".into(),
            watts: 0.0,
            spinning: true,
            source: "assumed: placeholder; a timing probe sees no power, replace from a datasheet"
                .into(),
        }],
        transitions: vec![],
    });
    let doc = Doc {
        kind: "hdd",
        description: format!("{name} (geometry probe)"),
        references: vec![format!(
            "wattio geometry probe (docs/functions/geometry-probe.md) of {origin}"
        )],
        timing: def,
        power,
    };
    toml::to_string(&doc).map_err(|e| format!("serializing the spec of {name}: {e}"))
}

/// A drive's values as the model holds them or as the probe extracted them.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Mechanism {
    pub rpm: f64,
    pub surfaces: u32,
    /// Head switch plus write settling (what a write across a head switch pays).
    pub head_switch_ms: f64,
    /// Per zone: (blocks per track, track skew, cylinder skew).
    pub zones: Vec<(u32, f64, f64)>,
}

impl Mechanism {
    pub fn of(def: &MechanicalDef) -> Mechanism {
        Mechanism {
            rpm: def.rpm,
            surfaces: def.surfaces,
            head_switch_ms: def.head_switch_ms + def.write_settle_ms,
            zones: def
                .layout
                .zones
                .iter()
                .map(|z| (z.blocks_per_track, z.track_skew, z.cyl_skew))
                .collect(),
        }
    }
}

/// A spec probed from a DiskSim drive against the drive itself.
#[derive(Clone, Debug, serde::Serialize)]
pub struct SpecCheck {
    pub model: Mechanism,
    pub probed: Mechanism,
    pub spec: MechanicalDef,
    /// Probe writes in all, of them the second phase's, and simulated time (s).
    pub probes: u64,
    pub mechanics_writes: u64,
    pub probe_s: f64,
    /// Demerit (ms) on the validation trace: model vs measured, spec vs measured, spec
    /// vs model.
    pub demerit_model_ms: f64,
    pub demerit_spec_ms: f64,
    pub demerit_spec_model_ms: f64,
}

/// Probe the DiskSim drive `parv` (both phases, `params`), write its spec, and replay
/// `trace` (the drive's validation trace) on the model and on the spec.
pub fn check_spec(
    parv: &std::path::Path,
    trace: &std::path::Path,
    params: Params,
) -> Result<SpecCheck, String> {
    use wattio_devices::disksim::import_parv;
    use wattio_devices::mechanical::MechanicalDisk;
    let imp = import_parv(parv)?;
    let disk = MechanicalDisk::new(imp.timing.clone())?;
    let params = Params {
        mechanics: true,
        ..params
    };
    let r = probe(&imp.name, Box::new(disk), params)?;
    if let Some(e) = &r.stopped {
        return Err(format!("{}: probe stopped: {e}", parv.display()));
    }
    check_report(&imp.timing, &r, trace)
}

/// [`check_spec`] for a probe already run (live, say) against a drive whose model is
/// `model`: the spec from `r` against the model, on the drive's validation `trace`.
pub fn check_report(
    model: &MechanicalDef,
    r: &Report,
    trace: &std::path::Path,
) -> Result<SpecCheck, String> {
    use wattio_devices::disksim::validate;
    use wattio_devices::mechanical::MechanicalDisk;
    let spec = drive_spec(r)?;
    let text = std::fs::read_to_string(trace).map_err(|e| format!("{}: {e}", trace.display()))?;
    let lines = validate::parse_trace(&text, &trace.display().to_string())?;
    let measured: Vec<f64> = lines.iter().map(|l| l.service_us).collect();
    let orig = validate::replay(&mut MechanicalDisk::new(model.clone())?, &lines);
    let ours = validate::replay(&mut MechanicalDisk::new(spec.clone())?, &lines);
    let m = r.mechanics.as_ref().map_or(0, |m| m.writes);
    Ok(SpecCheck {
        model: Mechanism::of(model),
        probed: Mechanism::of(&spec),
        probes: r.probes,
        mechanics_writes: m,
        probe_s: r.finished_at_ns as f64 / 1e9,
        demerit_model_ms: validate::demerit_ms(&orig, &measured),
        demerit_spec_ms: validate::demerit_ms(&ours, &measured),
        demerit_spec_model_ms: validate::demerit_ms(&ours, &orig),
        spec,
    })
}
