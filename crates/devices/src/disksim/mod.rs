//! DiskSim parameter import: `.parv` (with its `source`d `.diskspecs`), the layout
//! `.model` and the `.seek` table become an `hdd-mechanical` `[timing]` table.
//!
//! Every parameter of the disk, its mechanics and its layout is either carried into the
//! table, known to have no effect on a single disk's timing (statistics switches), or
//! reported by name in [`Import::unsupported`] when its value would matter to DiskSim.

pub mod libparam;
pub mod validate;

use crate::catalogue::DeviceSpec;
use crate::mechanical::layout::{LayoutDef, Zone};
use crate::mechanical::seek::SeekDef;
use crate::mechanical::tree_layout::{Entry, TreeDef};
use crate::mechanical::{CacheDef, ControllerDef, MechanicalDef};
use libparam::{Block, Document, Loader, Pos, Value};
use std::path::Path;
use wattio_core::power::PowerDef;

/// The result of importing one drive.
#[derive(Clone, Debug)]
pub struct Import {
    /// The disk block's name (e.g. `SEAGATE_ST34501N_validate`).
    pub name: String,
    pub timing: MechanicalDef,
    /// `key = value (file:line)` for every parameter the model does not implement and
    /// whose value is not neutral.
    pub unsupported: Vec<String>,
}

fn scalar<'a>(b: &'a Block, key: &str) -> Result<Option<(&'a str, &'a Pos)>, String> {
    match b.get(key) {
        None => Ok(None),
        Some(Value::Scalar(s, p)) => Ok(Some((s.as_str(), p))),
        Some(v) => Err(format!("{}: `{key}`: expected a single value", v.pos())),
    }
}

fn num(b: &Block, key: &str) -> Result<Option<f64>, String> {
    match scalar(b, key)? {
        None => Ok(None),
        Some((s, p)) => match s.parse::<f64>() {
            Ok(v) if v.is_finite() => Ok(Some(v)),
            _ => Err(format!("{p}: `{key}`: expected a number, got `{s}`")),
        },
    }
}

fn req(b: &Block, key: &str) -> Result<f64, String> {
    num(b, key)?.ok_or_else(|| format!("{}: block `{} {}`: missing `{key}`", b.pos, b.kind, b.name))
}

fn uint(b: &Block, key: &str) -> Result<u32, String> {
    let v = req(b, key)?;
    if v < 0.0 || v.fract() != 0.0 || v > u32::MAX as f64 {
        let p = b.get(key).map(|v| v.pos().to_string()).unwrap_or_default();
        return Err(format!(
            "{p}: `{key}`: expected a whole number ≥ 0, got {v}"
        ));
    }
    Ok(v as u32)
}

/// A whole number ≥ 0, 0 when `key` is absent.
fn opt_uint(b: &Block, key: &str) -> Result<u32, String> {
    match num(b, key)? {
        Some(_) => uint(b, key),
        None => Ok(0),
    }
}

fn opt_num(b: &Block, key: &str) -> Result<f64, String> {
    Ok(num(b, key)?.unwrap_or(0.0))
}

fn num_list(b: &Block, key: &str) -> Result<Vec<f64>, String> {
    match b.get(key) {
        None => Ok(vec![]),
        Some(Value::List(items, _)) => items
            .iter()
            .map(|v| match v {
                Value::Scalar(s, p) => s
                    .parse::<f64>()
                    .ok()
                    .filter(|x| x.is_finite())
                    .ok_or_else(|| format!("{p}: `{key}`: expected numbers, got `{s}`")),
                other => Err(format!("{}: `{key}`: expected numbers", other.pos())),
            })
            .collect(),
        Some(v) => Err(format!("{}: `{key}`: expected a list", v.pos())),
    }
}

fn block<'a>(b: &'a Block, key: &str) -> Result<&'a Block, String> {
    match b.get(key) {
        Some(Value::Block(x)) => Ok(x),
        Some(v) => Err(format!("{}: `{key}`: expected a block", v.pos())),
        None => Err(format!(
            "{}: block `{} {}`: missing `{key}`",
            b.pos, b.kind, b.name
        )),
    }
}

/// Parameters with no effect on one disk's timing in a closed-loop replay.
const INERT: &[&str] = &[
    "print stats",
    "avg sectors per cylinder",
    "time scale for overheads",
    "scheduler",
    "number of buffer segments",
    "segment size (in blks)",
    "full strobe seek time",
    "average seek time",
    "percent error in rpms",
    "access time type",
];

/// Keys the importer reads: a non-neutral value of any other key is reported.
const USED_DISK: &[&str] = &[
    "model",
    "bulk sector transfer time",
    "per-request overhead time",
    "allow read hits on write data",
    "use separate write segment",
    "high (read) water mark",
    "low (write) water mark",
    "set watermark by reqsize",
    "enable caching in buffer",
    "buffer continuous read",
    "maximum read-ahead (blks)",
    "read-ahead over requested",
    "read-ahead on idle hit",
    "immediate buffer read",
    "immediate buffer write",
    "read any free blocks",
    "allow write prebuffering",
    "maximum number of write segments",
    "max queue length",
    "fast write level",
    "read hit over. after read",
    "read hit over. after write",
    "read miss over. after read",
    "read miss over. after write",
    "write hit over. after read",
    "write hit over. after write",
    "write miss over. after read",
    "write miss over. after write",
    "read completion overhead",
    "write completion overhead",
    "minimum seek delay",
    "data preparation overhead",
    "first reselect overhead",
    "read disconnect afterread",
    "read disconnect afterwrite",
    "write disconnect overhead",
    "never disconnect",
    "stop prefetch in sector",
    "extra write disconnect",
    // Only used for writes flagged EXTRA_WRITE_DISCONNECT, which DiskSim 4.0 never sets
    // (the code setting it is commented out in `disk_buffer_select_segment`).
    "other reselect overhead",
    "extradisc command overhead",
    "extradisc disconnect overhead",
    "extradisc inter-disconnect delay",
    "extradisc 2nd disconnect overhead",
    "extradisc seek delta",
    // Behaviour the model has built in (DiskSim's values for every validated drive).
    "calc sector by sector",
    "read directly to buffer",
    "immed transfer partial hit",
    "combine seq writes",
    "write hit stop prefetch",
];

/// Values that mean "off" for the keys the model does not implement.
fn neutral(key: &str, v: &str) -> bool {
    let zero = v.parse::<f64>().is_ok_and(|x| x == 0.0);
    match key {
        // DiskSim's default for these is on; on is what the model does.
        "hold bus entire read xfer" | "hold bus entire write xfer" => zero,
        _ => zero,
    }
}

fn report_unused(b: &Block, used: &[&str], out: &mut Vec<String>) {
    for (k, v) in &b.params {
        let kl = k.to_ascii_lowercase();
        if used.contains(&kl.as_str()) || INERT.contains(&kl.as_str()) {
            continue;
        }
        if let Value::Scalar(s, p) = v {
            if !neutral(&kl, s) {
                out.push(format!("{k} = {s} ({p})"));
            }
        } else if !matches!(v, Value::List(items, _) if items.is_empty()) {
            out.push(format!("{k} = … ({})", v.pos()));
        }
    }
}

/// Parse a `.seek` file: `Seek distances measured: N`, then `distance, time_ms[, sd]`.
pub fn parse_seek(text: &str, file: &str) -> Result<Vec<(u32, f64)>, String> {
    let mut lines = text.lines().enumerate();
    let n = loop {
        let Some((i, l)) = lines.next() else {
            return Err(format!(
                "{file}: missing `Seek distances measured: N` header"
            ));
        };
        let l = l.trim();
        if l.is_empty() {
            continue;
        }
        let Some(rest) = l.strip_prefix("Seek distances measured:") else {
            return Err(format!(
                "{file}:{}: expected `Seek distances measured: N`, got `{l}`",
                i + 1
            ));
        };
        break rest.trim().parse::<usize>().map_err(|_| {
            format!(
                "{file}:{}: expected a row count, got `{}`",
                i + 1,
                rest.trim()
            )
        })?;
    };
    let mut rows = Vec::with_capacity(n.min(1 << 16));
    for (i, l) in lines {
        let l = l.trim();
        if l.is_empty() {
            continue;
        }
        let mut f = l.split(',').map(str::trim);
        let d = f.next().and_then(|s| s.parse::<u32>().ok());
        let t = f.next().and_then(|s| s.parse::<f64>().ok());
        match (d, t) {
            (Some(d), Some(t)) if t.is_finite() => rows.push((d, t)),
            _ => {
                return Err(format!(
                    "{file}:{}: expected `distance, time_ms`, got `{l}`",
                    i + 1
                ))
            }
        }
    }
    if rows.len() != n {
        return Err(format!(
            "{file}: header says {n} seek distances, found {}",
            rows.len()
        ));
    }
    Ok(rows)
}

/// Whole numbers ≥ 0 from a list of numbers (`key` names it in errors).
fn whole_list(b: &Block, key: &str) -> Result<Vec<u64>, String> {
    num_list(b, key)?
        .into_iter()
        .map(|x| {
            if x >= 0.0 && x.fract() == 0.0 && x < 2f64.powi(53) {
                Ok(x as u64)
            } else {
                Err(format!(
                    "{}: `{key}`: expected whole numbers ≥ 0, got {x}",
                    b.pos
                ))
            }
        })
        .collect()
}

/// A `dm_layout_g4` block (DIXtrac's index tree) as a [`TreeDef`]; `blocks` is the
/// drive's `Block count`.
fn tree_def(lb: &Block, blocks: u64, unsupported: &mut Vec<String>) -> Result<TreeDef, String> {
    let triples = |key: &str, n: usize| -> Result<Vec<Vec<u64>>, String> {
        let v = whole_list(lb, key)?;
        if v.len() % n != 0 {
            return Err(format!(
                "{}: `{key}`: expected groups of {n} numbers, got {}",
                lb.pos,
                v.len()
            ));
        }
        Ok(v.chunks(n).map(<[u64]>::to_vec).collect())
    };
    let small = |x: u64, key: &str| {
        u32::try_from(x).map_err(|_| format!("{}: `{key}`: {x} is too large", lb.pos))
    };
    let mut tracks = Vec::new();
    for t in triples("TP", 3)? {
        tracks.push([small(t[0], "TP")?, small(t[1], "TP")?, small(t[2], "TP")?]);
    }
    let Some(Value::List(lists, _)) = lb.get("IDX") else {
        return Err(format!("{}: dm_layout_g4: missing the `IDX` list", lb.pos));
    };
    let mut nodes = Vec::with_capacity(lists.len());
    for (n, l) in lists.iter().enumerate() {
        let Value::List(items, pos) = l else {
            return Err(format!(
                "{}: `IDX`: expected a list of index nodes (lists)",
                l.pos()
            ));
        };
        let words: Vec<&str> = items
            .iter()
            .map(|v| match v {
                Value::Scalar(s, _) => Ok(s.as_str()),
                other => Err(format!(
                    "{}: `IDX` node {n}: expected numbers and TRACK/IDX",
                    other.pos()
                )),
            })
            .collect::<Result<_, _>>()?;
        let mut entries = Vec::new();
        let mut k = 0;
        while k < words.len() {
            // 8 numbers, the child's kind, its index, and for a track its surface.
            let kind = words.get(k + 8).copied().unwrap_or("");
            let width = match kind {
                "TRACK" => 11,
                "IDX" => 10,
                _ => {
                    return Err(format!(
                        "{pos}: `IDX` node {n}, entry {}: expected TRACK or IDX as the 9th field, got `{kind}`",
                        entries.len()
                    ))
                }
            };
            let f = words.get(k..k + width).ok_or_else(|| {
                format!(
                    "{pos}: `IDX` node {n}, entry {}: expected {width} fields",
                    entries.len()
                )
            })?;
            let mut v = Vec::with_capacity(11);
            for (i, w) in f.iter().enumerate() {
                if i == 8 {
                    v.push(if kind == "TRACK" { 0.0 } else { 1.0 });
                    continue;
                }
                let x = w
                    .parse::<f64>()
                    .ok()
                    .filter(|x| x.is_finite())
                    .ok_or_else(|| {
                        format!(
                            "{pos}: `IDX` node {n}, entry {}: expected a number, got `{w}`",
                            entries.len()
                        )
                    })?;
                v.push(x);
            }
            if kind == "IDX" {
                v.push(0.0);
            }
            let e = Entry::try_from(v)
                .map_err(|e| format!("{pos}: `IDX` node {n}, entry {}: {e}", entries.len()))?;
            entries.push(e);
            k += width;
        }
        nodes.push(entries);
    }
    let slips = triples("Slips", 2)?
        .into_iter()
        .map(|s| [s[0], s[1]])
        .collect();
    let remaps = triples("Remaps", 6)?
        .into_iter()
        .map(|r| [r[0], r[1], r[2], r[3], r[4], r[5]])
        .collect();
    report_unused(lb, &["tp", "idx", "slips", "remaps"], unsupported);
    Ok(TreeDef {
        blocks,
        tracks,
        nodes,
        slips,
        remaps,
    })
}

fn layout_def(lb: &Block, blocks: u64, unsupported: &mut Vec<String>) -> Result<LayoutDef, String> {
    if lb.kind.eq_ignore_ascii_case("dm_layout_g4") {
        return Ok(LayoutDef {
            tree: Some(tree_def(lb, blocks, unsupported)?),
            mapping: 0,
            sparing: 0,
            range_size: 1,
            zones: Vec::new(),
        });
    }
    let mut zones = Vec::new();
    match lb.get("Zones") {
        Some(Value::List(items, _)) => {
            for it in items {
                let Value::Block(z) = it else {
                    return Err(format!("{}: `Zones`: expected zone blocks", it.pos()));
                };
                let ints = |key: &str| whole_list(z, key);
                let defects = ints("defects")?;
                if defects.len() % 2 != 0 {
                    return Err(format!(
                        "{}: `defects`: expected (defect, spare) pairs, got {} numbers",
                        z.pos,
                        defects.len()
                    ));
                }
                zones.push(Zone {
                    first_cyl: uint(z, "First cylinder number")?,
                    last_cyl: uint(z, "Last cylinder number")?,
                    blocks_per_track: uint(z, "Blocks per track")?,
                    first_block_offset: opt_num(z, "Offset of first block")?,
                    empty_front: num(z, "Empty space at zone front")?.unwrap_or(0.0) as u32,
                    track_skew: opt_num(z, "Skew for track switch")?,
                    cyl_skew: opt_num(z, "Skew for cylinder switch")?,
                    spares: num(z, "Number of spares")?.unwrap_or(0.0) as u32,
                    slips: ints("slips")?,
                    defects: defects.chunks(2).map(|c| [c[0], c[1]]).collect(),
                });
                report_unused(
                    z,
                    &[
                        "first cylinder number",
                        "last cylinder number",
                        "blocks per track",
                        "offset of first block",
                        "empty space at zone front",
                        "skew for track switch",
                        "skew for cylinder switch",
                        "number of spares",
                        "slips",
                        "defects",
                    ],
                    unsupported,
                );
            }
        }
        _ => return Err(format!("{}: layout: missing `Zones` list", lb.pos)),
    }
    report_unused(
        lb,
        &[
            "lbn-to-pbn mapping scheme",
            "sparing scheme used",
            "rangesize for sparing",
            "zones",
        ],
        unsupported,
    );
    Ok(LayoutDef {
        tree: None,
        mapping: num(lb, "LBN-to-PBN mapping scheme")?.unwrap_or(0.0) as u32,
        sparing: uint(lb, "Sparing scheme used")?,
        range_size: num(lb, "Rangesize for sparing")?.unwrap_or(1.0).max(1.0) as u32,
        zones,
    })
}

/// Convert the instantiated `disksim_disk` of a parsed `.parv`. `dir` resolves the seek
/// file named by the mechanics block.
pub fn convert(doc: &Document, dir: &Path, loader: &mut dyn Loader) -> Result<Import, String> {
    let disk = match instantiated(doc, "disksim_disk") {
        (0, _) => return Err("no `disksim_disk` block found".into()),
        (_, Some(b)) => b,
        (_, None) => return Err("several `disksim_disk` blocks and none instantiated".into()),
    };
    let mut unsupported = Vec::new();
    report_unused(disk, USED_DISK, &mut unsupported);
    let dm = block(disk, "Model")?;
    let lb = block(dm, "Layout Model")?;
    let mb = block(dm, "Mechanical Model")?;
    let blocks = match num(dm, "Block count")? {
        Some(b) if b >= 0.0 && b.fract() == 0.0 && b < 2f64.powi(53) => b as u64,
        Some(b) => {
            return Err(format!(
                "{}: `Block count`: expected a whole number ≥ 0, got {b}",
                dm.pos
            ))
        }
        None => 0,
    };
    if blocks == 0 && lb.kind.eq_ignore_ascii_case("dm_layout_g4") {
        return Err(format!(
            "{}: a dm_layout_g4 drive needs `Block count`",
            dm.pos
        ));
    }
    let layout = layout_def(lb, blocks, &mut unsupported)?;
    let seek_type = scalar(mb, "Seek type")?.map(|s| s.0).unwrap_or("");
    let hpl = || -> Result<[f64; 6], String> {
        let v = num_list(mb, "HPL seek equation values")?;
        v.try_into().map_err(|v: Vec<f64>| {
            format!(
                "{}: `HPL seek equation values`: expected 6 numbers, got {}",
                mb.pos,
                v.len()
            )
        })
    };
    let seek = match seek_type {
        "extracted" => {
            let (file, p) = scalar(mb, "Full seek curve")?
                .ok_or_else(|| format!("{}: missing `Full seek curve`", mb.pos))?;
            let path = dir.join(file);
            let text = loader.load(&path).map_err(|e| format!("{p}: {e}"))?;
            let table = parse_seek(&text, &path.display().to_string())?;
            if text.lines().any(|l| l.split(',').count() >= 4) {
                // WD's DiskSim reads a 4th column as the write seek time ("dual seek");
                // DiskSim 4.0, which the drives were validated with, and this model do not.
                unsupported.push(format!(
                    "{file}: its 4th column (write seek times, WD DiskSim's dual seek) is not used: writes seek as reads ({p})"
                ));
            }
            SeekDef::Extracted { table }
        }
        "hpl" => SeekDef::Hpl {
            hpl: hpl()?,
            single_cylinder_ms: opt_num(mb, "Single cylinder seek time")?,
        },
        "hplplus10" => {
            let ten = num_list(mb, "First ten seek times")?;
            SeekDef::Hplplus10 {
                hpl: hpl()?,
                first_ten_ms: ten.try_into().map_err(|v: Vec<f64>| {
                    format!(
                        "{}: `First ten seek times`: expected 10 numbers, got {}",
                        mb.pos,
                        v.len()
                    )
                })?,
            }
        }
        other => {
            return Err(format!(
                "{}: `Seek type = {other}`: unsupported (expected extracted, hpl or hplplus10)",
                mb.pos
            ))
        }
    };
    if let Some((a, p)) = scalar(mb, "Access time type")? {
        if a != "trackSwitchPlusRotation" {
            unsupported.push(format!("Access time type = {a} ({p})"));
        }
    }
    let mut mech_used = vec![
        "seek type",
        "full seek curve",
        "single cylinder seek time",
        "add. write settling delay",
        "head switch time",
        "rotation speed (in rpms)",
    ];
    if seek_type != "extracted" {
        mech_used.extend(["hpl seek equation values", "first ten seek times"]);
    } else {
        // DiskSim ignores the HPL values for an extracted curve.
        mech_used.extend(["hpl seek equation values", "first ten seek times"]);
    }
    report_unused(mb, &mech_used, &mut unsupported);
    report_unused(
        dm,
        &[
            "number of data surfaces",
            "number of cylinders",
            "block count",
            "layout model",
            "mechanical model",
        ],
        &mut unsupported,
    );
    let hw = opt_num(disk, "High (read) water mark")?;
    let lw = opt_num(disk, "Low (write) water mark")?;
    let by_req = opt_num(disk, "Set watermark by reqsize")? != 0.0;
    let cache = CacheDef {
        enabled: opt_num(disk, "Enable caching in buffer")? != 0.0,
        segments: uint(disk, "Number of buffer segments")?,
        segment_blocks: uint(disk, "Segment size (in blks)")?,
        separate_write_segment: opt_num(disk, "Use separate write segment")? != 0.0,
        read_water: if by_req { hw } else { 0.0 },
        write_water: if by_req { lw } else { 0.0 },
        continuous_read: num(disk, "Buffer continuous read")?.unwrap_or(0.0) as u32,
        max_read_ahead: num(disk, "Maximum read-ahead (blks)")?.unwrap_or(0.0) as u32,
        read_ahead_over_requested: opt_num(disk, "Read-ahead over requested")? != 0.0,
        fast_write_level: num(disk, "Fast write level")?.unwrap_or(0.0) as u32,
        read_hits_on_write_data: opt_num(disk, "Allow read hits on write data")? != 0.0,
        read_ahead_on_idle_hit: opt_num(disk, "Read-ahead on idle hit")? != 0.0,
        // DiskSim 4.0 takes `Immediate buffer read` (and `Read any free blocks`) through
        // `disk_buffer_seekdone` → `dm_latency_g1` / `g1_access_block` → the
        // immedstart/immedend bookkeeping of `disk_buffer_sector_done`, yet its own
        // outputs show no read-on-arrival timing: DiskSim's valid/dec_rz26.outv (flag
        // set) gives reads 15.1016 ms, writes 16.9425 ms, max 49.7398 ms and the same
        // 5/10/20/40/60 ms read response-time buckets as this model reading strictly in
        // order, and none of that with zero-latency reads. So an imported drive reads in
        // order, as DiskSim does. (valid/atlas10k.outv, reads 5.6269 ms, equals this model
        // without read-on-arrival and without free-block buffering too; the model keeps
        // its free-block buffering, which brings atlas10k far closer to the real drive.)
        zero_latency_read: false,
        read_any_free_blocks: opt_num(disk, "Read any free blocks")? != 0.0,
        write_prebuffering: opt_num(disk, "Allow write prebuffering")? != 0.0,
        write_segments: opt_uint(disk, "Maximum number of write segments")?,
        stop_prefetch_in_sector: opt_num(disk, "Stop prefetch in sector")? != 0.0,
    };
    if !by_req && hw != 0.0 {
        unsupported.push(format!(
            "High (read) water mark = {hw} with Set watermark by reqsize = 0"
        ));
    }
    // The bus between controller and disk: DiskSim moves a block at the slower of the
    // disk's own bulk transfer time and the bus's per-block time.
    let bulk = opt_num(disk, "Bulk sector transfer time")?;
    let (mut bus_r, mut bus_w) = (bulk, bulk);
    for b in doc.blocks.iter().filter(|b| b.kind == "disksim_bus") {
        bus_r = bus_r.max(opt_num(b, "Read block transfer time")?);
        bus_w = bus_w.max(opt_num(b, "Write block transfer time")?);
        let arb = opt_num(b, "Arbitration time")?;
        if arb != 0.0 {
            unsupported.push(format!("bus {}: Arbitration time = {arb}", b.name));
        }
    }
    let controller = ControllerDef {
        bus_ms_per_sector: bus_r,
        bus_write_ms_per_sector: Some(bus_w),
        per_request_ms: opt_num(disk, "Per-request overhead time")?,
        read_hit_after_read_ms: opt_num(disk, "Read hit over. after read")?,
        read_hit_after_write_ms: opt_num(disk, "Read hit over. after write")?,
        read_miss_after_read_ms: opt_num(disk, "Read miss over. after read")?,
        read_miss_after_write_ms: opt_num(disk, "Read miss over. after write")?,
        write_hit_after_read_ms: opt_num(disk, "Write hit over. after read")?,
        write_hit_after_write_ms: opt_num(disk, "Write hit over. after write")?,
        write_miss_after_read_ms: opt_num(disk, "Write miss over. after read")?,
        write_miss_after_write_ms: opt_num(disk, "Write miss over. after write")?,
        read_completion_ms: opt_num(disk, "Read completion overhead")?,
        write_completion_ms: opt_num(disk, "Write completion overhead")?,
        min_seek_delay_ms: opt_num(disk, "Minimum seek delay")?,
        hold_bus_write: opt_num(disk, "Hold bus entire write xfer")? != 0.0,
        data_prep_ms: opt_num(disk, "Data preparation overhead")?,
        reselect_ms: opt_num(disk, "First reselect overhead")?,
        read_disconnect_after_read_ms: opt_num(disk, "Read disconnect afterread")?,
        read_disconnect_after_write_ms: opt_num(disk, "Read disconnect afterwrite")?,
        write_disconnect_ms: opt_num(disk, "Write disconnect overhead")?,
        never_disconnect: opt_num(disk, "Never disconnect")? != 0.0,
        extra_write_disconnect: opt_num(disk, "Extra write disconnect")? != 0.0,
        queue_depth: opt_uint(disk, "Max queue length")?,
    };
    // `Immediate buffer write` (write-on-arrival) changes nothing DiskSim 4.0 reports for a
    // drive that holds one command: atlas10k's own validation run gives the same output
    // with it 0 or 1, and cheetah4LP every request's completion the same (write-back
    // levels 1 and 2 with its queue of 1; level 2, prebuffering, a queue of 8). Only
    // on the Maxtor Atlas 10K V (a queue of 8 under scheduling policy 21) did requests
    // move (by nanoseconds, then 1.3 % of the mean once its scheduler carried them on):
    // the model has no write-on-arrival, so there it is reported.
    let scheduler = queue_order(doc, disk, controller.queue_depth, &mut unsupported)?;
    let ibw = opt_num(disk, "Immediate buffer write")?;
    if ibw != 0.0 && controller.queue_depth != 1 {
        let p = disk
            .get("Immediate buffer write")
            .map(|v| v.pos().to_string());
        unsupported.push(format!(
            "Immediate buffer write = {ibw} ({}) with Max queue length = {}",
            p.unwrap_or_default(),
            controller.queue_depth
        ));
    }
    let def = MechanicalDef {
        model: "hdd-mechanical".into(),
        surfaces: uint(dm, "Number of data surfaces")?,
        cylinders: uint(dm, "Number of cylinders")?,
        rpm: req(mb, "Rotation speed (in rpms)")?,
        head_switch_ms: opt_num(mb, "Head switch time")?,
        write_settle_ms: opt_num(mb, "Add. write settling delay")?,
        seek,
        layout,
        controller,
        cache,
        scheduler,
        sources: toml::Table::new(),
    };
    // Validate by building it once: errors surface at import, not at first use.
    crate::mechanical::MechanicalDisk::new(def.clone())
        .map_err(|e| format!("{}: {e}", disk.pos))?;
    Ok(Import {
        name: disk.name.clone(),
        timing: def,
        unsupported,
    })
}

/// How many blocks of `kind` the file has, and the one that counts: the only one, or of
/// several the one instantiated (`None`: none, or several and none instantiated).
fn instantiated<'a>(doc: &'a Document, kind: &str) -> (usize, Option<&'a Block>) {
    let blocks: Vec<&Block> = doc.blocks.iter().filter(|b| b.kind == kind).collect();
    let one = match blocks.as_slice() {
        [one] => Some(*one),
        many => many
            .iter()
            .find(|b| doc.instances.iter().any(|(_, t)| *t == b.name))
            .copied(),
    };
    (blocks.len(), one)
}

/// wattio's name for a DiskSim `Scheduling policy` (`disksim_ioqueue.h`), where the model
/// has it: FCFS, ELEVATOR_LBN, CYCLE_LBN, SSTF_LBN.
fn scheduler_name(policy: f64) -> Option<&'static str> {
    match policy {
        1.0 => Some("fcfs"),
        2.0 => Some("look"),
        3.0 => Some("clook"),
        4.0 => Some("sstf-lbn"),
        _ => None,
    }
}

/// The order the drive's requests are served in. A drive that holds one command (`Max
/// queue length = 1`, every validated drive) takes them in the order the device driver's
/// queue hands them on, so the instantiated `disksim_iodriver`'s scheduler decides (the
/// drive's own when the file has no driver); a drive with a deeper queue orders it with its
/// own (the driver's then only feeds it, and one that reorders too is reported: the model
/// has one queue). A policy the model does not have is reported and served first come,
/// first served.
fn queue_order(
    doc: &Document,
    disk: &Block,
    depth: u32,
    unsupported: &mut Vec<String>,
) -> Result<String, String> {
    let policy = |b: &Block| -> Result<Option<(f64, String)>, String> {
        match b.get("Scheduler") {
            Some(Value::Block(s)) => Ok(Some((
                num(s, "Scheduling policy")?.unwrap_or(1.0),
                s.pos.to_string(),
            ))),
            _ => Ok(None),
        }
    };
    let driver_policy = match instantiated(doc, "disksim_iodriver").1 {
        Some(d) => policy(d)?,
        None => None,
    };
    let disk_policy = policy(disk)?;
    let (chosen, whose) = if depth == 1 && driver_policy.is_some() {
        (
            driver_policy,
            "the device driver's queue (the drive holds one command)",
        )
    } else if depth == 1 {
        // No driver in the file (a bare diskspecs): the order it gives is the drive's.
        (disk_policy, "the drive's queue")
    } else {
        if let Some((p, at)) = &driver_policy {
            if *p != 1.0 {
                unsupported.push(format!(
                    "Scheduler.Scheduling policy = {p} ({at}) in the device driver in front of a drive that queues {} commands: the model orders one queue, the drive's",
                    if depth == 0 { "any number of".to_string() } else { depth.to_string() }
                ));
            }
        }
        (disk_policy, "the drive's queue")
    };
    let Some((p, at)) = chosen else {
        return Ok("fcfs".into());
    };
    match scheduler_name(p) {
        Some(name) => Ok(name.into()),
        None => {
            unsupported.push(format!(
                "Scheduler.Scheduling policy = {p} ({at}) for {whose}: the model has FCFS (1), ELEVATOR_LBN (2), CYCLE_LBN (3) and SSTF_LBN (4); served first come, first served"
            ));
            Ok("fcfs".into())
        }
    }
}

/// Import a `.parv` file from disk.
pub fn import_parv(path: &Path) -> Result<Import, String> {
    let mut loader = libparam::FsLoader;
    let text = loader.load(path)?;
    let dir = path.parent().unwrap_or(Path::new("."));
    let doc = libparam::parse(&text, &path.display().to_string(), dir, &mut loader)?;
    convert(&doc, dir, &mut loader)
}

/// The fuzz entry point: parse and convert from memory, never panicking.
pub fn fuzz_entry(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(doc) = libparam::parse(text, "fuzz.parv", Path::new("."), &mut libparam::NoLoader) {
        if let Ok(imp) = convert(&doc, Path::new("."), &mut libparam::NoLoader) {
            // An accepted drive is mapped too: first, middle and last blocks, and one past.
            if let Ok(disk) = crate::mechanical::MechanicalDisk::new(imp.timing) {
                let l = disk.layout();
                let n = l.blocks();
                for lbn in [0, n / 2, n.saturating_sub(1), n] {
                    if let Some(p) = l.ltop(lbn) {
                        let a = l.angle(p);
                        assert!((0.0..1.0).contains(&a), "angle {a} of {p:?}");
                        let _ = (l.blocks_per_track(p.cyl, p.head), l.track_usable(p));
                        let _ = l.zone_of_cyl(p.cyl);
                    }
                }
            }
        }
    }
    let _ = parse_seek(text, "fuzz.seek");
}

impl Import {
    /// The catalogue form: a TOML document with `kind`, `description`, `references` and
    /// the `[timing]` table; the unsupported parameters are listed as comments. The
    /// `[power]` table is not in DiskSim's files: `power` supplies one (see
    /// [`Import::to_toml_with_power`]), else the caller adds it from a datasheet.
    pub fn to_toml(&self, source: &str) -> Result<String, String> {
        self.to_toml_with_power(source, None)
    }

    /// [`Import::to_toml`] with the `[power]` table (and the references) of `power`, a
    /// catalogue entry of the same drive or a stand-in for it: the result is a runnable
    /// entry. Its description says whose power table it carries.
    pub fn to_toml_with_power(
        &self,
        source: &str,
        power: Option<&DeviceSpec>,
    ) -> Result<String, String> {
        let mut timing = self.timing.clone();
        timing.sources.insert(
            "all".into(),
            toml::Value::String(format!("converted from DiskSim 4.0 parameters: {source}")),
        );
        #[derive(serde::Serialize)]
        struct Doc<'a> {
            kind: &'a str,
            description: String,
            references: Vec<String>,
            timing: &'a MechanicalDef,
            #[serde(skip_serializing_if = "Option::is_none")]
            power: Option<&'a PowerDef>,
        }
        let mut references =
            vec!["DiskSim 4.0 validated disk parameters (CMU PDL), valid/ directory".to_string()];
        let mut description = format!("{} (DiskSim validated model)", self.name);
        if let Some(p) = power {
            // The power spec must be valid before it is written into a runnable entry.
            p.power_spec()?;
            description.push_str(&format!("; power table from catalogue entry `{}`", p.name));
            references.extend(p.references.iter().cloned());
        }
        let doc = Doc {
            kind: "hdd",
            description,
            references,
            timing: &timing,
            power: power.map(|p| &p.power),
        };
        let body = toml::to_string(&doc).map_err(|e| format!("serializing {}: {e}", self.name))?;
        let mut out = String::new();
        if !self.unsupported.is_empty() {
            out.push_str("# DiskSim parameters the hdd-mechanical model does not implement:\n");
            for u in &self.unsupported {
                out.push_str(&format!("#   {u}\n"));
            }
        }
        out.push_str(&body);
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seek_file_rows_and_errors() {
        let rows = parse_seek(
            "Seek distances measured: 2\n1,\t0.5\n10, 2.0, 0.1\n",
            "a.seek",
        )
        .unwrap();
        assert_eq!(rows, vec![(1, 0.5), (10, 2.0)]);
        let e = parse_seek("Seek distances measured: 2\n1, x\n", "a.seek").unwrap_err();
        assert!(e.starts_with("a.seek:2:"), "{e}");
        let e = parse_seek("Seek distances measured: 3\n1, 1\n", "a.seek").unwrap_err();
        assert!(e.contains("header says 3"), "{e}");
    }
}
