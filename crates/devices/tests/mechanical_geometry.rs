//! Hand-computed timing cases for the mechanical model: rotational latency in absolute
//! time, seek interpolation through the model, bus overlap, write-back and read-ahead hits.

use wattio_core::device::Timing;
use wattio_core::io::{Buf, Io, IoId, Op};
use wattio_devices::mechanical::layout::{LayoutDef, Pbn, Zone};
use wattio_devices::mechanical::seek::SeekDef;
use wattio_devices::mechanical::{CacheDef, ControllerDef, MechanicalDef, MechanicalDisk};

/// 6000 rpm (10 ms per revolution), 2 surfaces, 100 sectors per track (0.1 ms each),
/// 10 cylinders, seek 1 ms for one cylinder rising to 2 ms at 9.
fn def() -> MechanicalDef {
    MechanicalDef {
        model: "hdd-mechanical".into(),
        surfaces: 2,
        cylinders: 10,
        rpm: 6000.0,
        head_switch_ms: 0.3,
        write_settle_ms: 0.2,
        seek: SeekDef::Extracted {
            table: vec![(1, 1.0), (9, 2.0)],
        },
        layout: LayoutDef {
            tree: None,
            mapping: 0,
            sparing: 0,
            range_size: 1,
            zones: vec![Zone {
                first_cyl: 0,
                last_cyl: 9,
                blocks_per_track: 100,
                first_block_offset: 0.0,
                empty_front: 0,
                track_skew: 10.0,
                cyl_skew: 20.0,
                spares: 0,
                slips: vec![],
                defects: vec![],
            }],
        },
        controller: ControllerDef {
            bus_ms_per_sector: 0.0,
            read_miss_after_read_ms: 0.5,
            read_hit_after_read_ms: 0.1,
            write_miss_after_read_ms: 0.4,
            write_miss_after_write_ms: 0.4,
            ..ControllerDef::default()
        },
        cache: CacheDef {
            enabled: true,
            segments: 2,
            segment_blocks: 100,
            separate_write_segment: false,
            read_water: 0.0,
            write_water: 0.0,
            continuous_read: 0,
            max_read_ahead: 0,
            read_ahead_over_requested: true,
            fast_write_level: 0,
            read_hits_on_write_data: true,
            read_ahead_on_idle_hit: false,
            zero_latency_read: false,
            read_any_free_blocks: false,
            write_prebuffering: false,
            write_segments: 0,
            stop_prefetch_in_sector: false,
        },
        scheduler: "fcfs".into(),
        sources: toml::Table::new(),
    }
}

fn io(op: Op, lbn: u64, n: u32) -> Io {
    Io {
        id: IoId(0),
        op,
        fua: false,
        priority: 0,
        dev: 0,
        stream: 0,
        offset: lbn * 512,
        len: n * 512,
        file: None,
        call_site: None,
        buf: Buf::None,
    }
}

const MS: u64 = 1_000_000;

/// `def()` with write-back (`fast_write_level` 2), a 0.1 ms write-hit overhead, a read
/// miss disconnecting 0.02 ms after its command, and `prebuffering`.
fn write_back(prebuffering: bool) -> MechanicalDef {
    let mut d = def();
    d.cache.fast_write_level = 2;
    d.cache.write_prebuffering = prebuffering;
    d.controller.read_disconnect_after_read_ms = 0.02;
    d.controller.write_hit_after_read_ms = 0.1;
    d.controller.write_hit_after_write_ms = 0.1;
    d
}

#[test]
fn rotational_latency_in_absolute_time() {
    let d = MechanicalDisk::new(def()).unwrap();
    let p0 = Pbn {
        cyl: 0,
        head: 0,
        sector: 0,
    };
    // Sector 0 of track 0 sits at angle 0: at t = 2.5 ms the platter is at 0.25.
    assert!((d.latency_ms(2.5, p0) - 7.5).abs() < 1e-9);
    assert!(d.latency_ms(10.0, p0).abs() < 1e-9);
    // Head 1 is one track skew (10 sectors = 1 ms) later.
    let p1 = Pbn {
        cyl: 0,
        head: 1,
        sector: 0,
    };
    assert!((d.latency_ms(0.0, p1) - 1.0).abs() < 1e-9);
    // Cylinder 1 head 0: one track switch + one cylinder skew = 30 sectors = 3 ms.
    let p2 = Pbn {
        cyl: 1,
        head: 0,
        sector: 5,
    };
    assert!((d.latency_ms(0.0, p2) - 3.5).abs() < 1e-9);
}

#[test]
fn seek_with_head_switch_and_write_settle() {
    let d = MechanicalDisk::new(def()).unwrap();
    let a = Pbn {
        cyl: 0,
        head: 0,
        sector: 0,
    };
    let same_cyl_other_head = Pbn {
        cyl: 0,
        head: 1,
        sector: 0,
    };
    let five = Pbn {
        cyl: 5,
        head: 0,
        sector: 0,
    };
    assert_eq!(d.seek_ms(a, a, false), 0.0);
    assert!((d.seek_ms(a, same_cyl_other_head, false) - 0.3).abs() < 1e-12);
    // 5 cylinders: 1 + (5 − 1)·(2 − 1)/8 = 1.5 ms; a write adds 0.2 ms of settling.
    assert!((d.seek_ms(a, five, false) - 1.5).abs() < 1e-12);
    assert!((d.seek_ms(a, five, true) - 1.7).abs() < 1e-12);
}

#[test]
fn read_miss_then_cached_hit() {
    let mut d = MechanicalDisk::new(def()).unwrap();
    // Miss at t = 0: 0.5 ms overhead, no seek, sector 0 passes under the head at 10 ms,
    // one sector (0.1 ms): done at 10.1 ms.
    let s = d.service(0, &io(Op::Read, 0, 1));
    assert_eq!(s.total(), 10_100_000);
    assert_eq!(s.rotate_ns, 9_500_000);
    assert_eq!(s.overhead_ns, 500_000);
    // The same block again at 20 ms: a hit, 0.1 ms of overhead, no media.
    let s = d.service(20 * MS, &io(Op::Read, 0, 1));
    assert_eq!(s.total(), 100_000);
}

#[test]
fn multi_track_read_pays_head_switch_and_skew() {
    let mut d = MechanicalDisk::new(def()).unwrap();
    // Blocks 95–104: 5 sectors at the end of track (0,0), then (0,1) sectors 0–4.
    // Overhead 0.5 ms; sector 95 at angle 0.95 → reached at 9.5 ms; read to 10.0 ms;
    // head switch 0.3 ms → 10.3 ms (angle 0.03); track (0,1) starts at angle 0.10 (skew):
    // wait 0.7 ms → 11.0 ms; 5 sectors → 11.5 ms.
    let s = d.service(0, &io(Op::Read, 95, 10));
    assert_eq!(s.total(), 11_500_000);
}

#[test]
fn write_through_waits_for_media() {
    let mut d = MechanicalDisk::new(def()).unwrap();
    // Write of block 200 (cylinder 1, head 0, sector 0) at t = 0: overhead 0.4 ms, seek of
    // one cylinder 1.0 + settle 0.2 → 1.6 ms (angle 0.16); the sector sits at angle 0.30
    // (one track skew + one cylinder skew): wait 1.4 ms, write 0.1 ms → 3.1 ms.
    let s = d.service(0, &io(Op::Write, 200, 1));
    assert_eq!(s.total(), 3_100_000);
    assert_eq!(s.seek_ns, 1_200_000);
}

#[test]
fn fua_write_goes_through_a_write_back_cache() {
    // The same write as `write_through_waits_for_media`, on a drive with write-back
    // (`fast_write_level` 2) and a write-hit overhead of 0.1 ms: without FUA it completes
    // once the data is in (0.1 ms, no bus time); with FUA once the media has it: seek
    // from 0.1 to 1.3 ms, wait for angle 0.30 (3.0 ms), write 0.1 ms → 3.1 ms.
    let mut wb = def();
    wb.cache.fast_write_level = 2;
    wb.controller.write_hit_after_read_ms = 0.1;
    let mut d = MechanicalDisk::new(wb.clone()).unwrap();
    assert_eq!(d.service(0, &io(Op::Write, 200, 1)).total(), 100_000);
    let mut d = MechanicalDisk::new(wb).unwrap();
    let fua = Io {
        fua: true,
        ..io(Op::Write, 200, 1)
    };
    assert_eq!(d.service(0, &fua).total(), 3_100_000);
}

#[test]
fn limited_write_back_takes_one_stream_and_makes_others_wait_for_the_media() {
    // `fast_write_level` 1 (DiskSim's LIMITED_FASTWRITE), write-hit overhead 0.1 ms, no bus
    // time. A: block 200 at 0 ms is written back (nothing dirty): done at 0.1 ms, its
    // destage as the FUA case above, on the media at 3.1 ms. B: block 500 at 1.0 ms does
    // not append to A, so its data is taken once A is on the media (3.1 ms) and it is done
    // then: 2.1 ms, not its own media write. C: block 501 at 3.2 ms appends to B, whose
    // destage is still running: written back at once, 0.1 ms.
    let mut wb = def();
    wb.cache.fast_write_level = 1;
    wb.controller.write_hit_after_read_ms = 0.1;
    wb.controller.write_hit_after_write_ms = 0.1;
    let mut d = MechanicalDisk::new(wb).unwrap();
    assert_eq!(d.service(0, &io(Op::Write, 200, 1)).total(), 100_000);
    assert_eq!(d.service(MS, &io(Op::Write, 500, 1)).total(), 2_100_000);
    assert_eq!(
        d.service(3_200_000, &io(Op::Write, 501, 1)).total(),
        100_000
    );
}

#[test]
fn timing_table_round_trips_through_toml() {
    let text = toml::to_string(&def()).unwrap();
    let table: toml::Table = toml::from_str(&text).unwrap();
    let mut a = wattio_devices::mechanical::timing_from_toml(&table).unwrap();
    let mut b = MechanicalDisk::new(def()).unwrap();
    let r = io(Op::Read, 95, 10);
    assert_eq!(a.service(0, &r), b.service(0, &r));
    assert_eq!(a.capacity(), 2 * 10 * 100 * 512);
    // Unknown keys are refused by name.
    let mut bad = table.clone();
    bad.insert("rpms".into(), toml::Value::Float(1.0));
    let e = wattio_devices::mechanical::timing_from_toml(&bad)
        .err()
        .unwrap();
    assert!(e.contains("rpms"), "{e}");
}

fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

#[test]
fn zero_latency_read_starts_where_the_head_lands() {
    let mut d = def();
    d.cache.zero_latency_read = true;
    let mut d = MechanicalDisk::new(d).unwrap();
    // Blocks 0–9 (sectors 0–9 of track (0,0)) asked at 0.05 ms: overhead 0.5 ms, the head
    // lands at 0.55 ms mid-sector 5 (angle 0.055); the next boundary is sector 6 at
    // 0.6 ms. Sectors 6–9 are read at once, sectors 0–5 when they come round; the run
    // completes one revolution after 0.6 ms: 10.6 ms, i.e. 10.55 ms after the command
    // (waiting for sector 0 instead would take 0.5 + 9.45 + 1.0 = 10.95 ms).
    let s = d.service(50_000, &io(Op::Read, 0, 10));
    assert!((ms(s.total()) - 10.55).abs() < 1e-6, "{}", ms(s.total()));
}

#[test]
fn written_block_not_yet_across_the_bus_costs_a_revolution() {
    let mut d = def();
    d.controller.bus_ms_per_sector = 0.3;
    let mut d = MechanicalDisk::new(d).unwrap();
    // Write of blocks 8–10 at t = 0: overhead 0.4 ms, then each block takes 0.3 ms on the
    // bus: in the buffer at 0.7, 1.0 and 1.3 ms. The head waits for block 8 (0.7 ms),
    // sector 8 passes at 0.8 ms; sector 9 comes at 0.9 ms before its data (1.0 ms), so it
    // is written a revolution later, at 10.9 ms, and sector 10 at 11.0 ms: done 11.1 ms.
    let s = d.service(0, &io(Op::Write, 8, 3));
    assert!((ms(s.total()) - 11.1).abs() < 1e-6, "{}", ms(s.total()));
}

#[test]
fn extra_write_disconnect_buffers_before_writing() {
    let mut base = def();
    base.controller.bus_ms_per_sector = 0.3;
    // Blocks 12–14 arrive at 0.7, 1.0, 1.3 ms; sector 12 passes at 1.2 ms: written
    // 1.2–1.5 ms as the data keeps ahead.
    let mut d = MechanicalDisk::new(base.clone()).unwrap();
    let s = d.service(0, &io(Op::Write, 12, 3));
    assert!((ms(s.total()) - 1.5).abs() < 1e-6, "{}", ms(s.total()));
    // With DiskSim's extra write disconnect the media waits for min(3, 10) = 3 blocks:
    // from 1.3 ms, so sector 12 next passes at 11.2 ms: done 11.5 ms.
    base.controller.extra_write_disconnect = true;
    let mut d = MechanicalDisk::new(base).unwrap();
    let s = d.service(0, &io(Op::Write, 12, 3));
    assert!((ms(s.total()) - 11.5).abs() < 1e-6, "{}", ms(s.total()));
}

#[test]
fn disconnect_reselect_and_data_preparation() {
    let mut base = def();
    base.controller.read_disconnect_after_read_ms = 0.02;
    base.controller.reselect_ms = 0.2;
    base.controller.data_prep_ms = 0.05;
    base.controller.write_disconnect_ms = 0.1;
    let mut d = MechanicalDisk::new(base.clone()).unwrap();
    // Read miss of block 0 at t = 0: disconnect after 0.5 + 0.02 ms; the block is in at
    // 10.1 ms; reconnect 0.2 ms + data preparation 0.05 ms: 10.35 ms.
    let s = d.service(0, &io(Op::Read, 0, 1));
    assert!((ms(s.total()) - 10.35).abs() < 1e-6, "{}", ms(s.total()));
    // Write-through write of block 200 (media done at 3.1 ms + 0.05 ms of data
    // preparation before the data moves, as in `write_through_waits_for_media`): it
    // disconnects once its data is in and reconnects (0.2 ms) when the media is done.
    let mut d = MechanicalDisk::new(base).unwrap();
    let s = d.service(0, &io(Op::Write, 200, 1));
    assert!((ms(s.total()) - 3.3).abs() < 1e-6, "{}", ms(s.total()));
}

#[test]
fn read_ahead_past_the_segment_size_wraps_over_its_start() {
    let mut base = def();
    base.cache.segments = 1;
    base.cache.segment_blocks = 10;
    base.cache.continuous_read = 3;
    base.cache.max_read_ahead = 20;
    let mut d = MechanicalDisk::new(base).unwrap();
    // Block 0 read at t = 0 (done 10.1 ms), then read ahead 20 blocks to 12.1 ms: the
    // 10-block segment keeps blocks 11–20 only.
    assert_eq!(d.service(0, &io(Op::Read, 0, 1)).total(), 10_100_000);
    // Block 15 at 20 ms: a hit (0.1 ms overhead).
    assert_eq!(d.service(20 * MS, &io(Op::Read, 15, 1)).total(), 100_000);
    // Block 0 again at 30 ms: gone, read from the media (overhead 0.5 ms, sector 0 at
    // 40 ms): 10.1 ms.
    assert_eq!(d.service(30 * MS, &io(Op::Read, 0, 1)).total(), 10_100_000);
}

/// The geometry a function queries agrees with the model's own timing: layout, skews, the
/// seek curve with head switch and write settling, and the rotational frame.
#[test]
fn geometry_queries_answer_from_the_models_layout_seek_and_rotation() {
    let disk = MechanicalDisk::new(def()).unwrap();
    let g = disk.geometry().expect("a mechanical disk has geometry");
    // LBN 250 = cylinder 1 (200 blocks per cylinder), surface 0, sector 50.
    let at = g.locate(250 * 512).unwrap();
    assert_eq!(
        (
            at.zone,
            at.cylinder,
            at.surface,
            at.sector,
            at.sectors_per_track
        ),
        (0, 1, 0, 50, 100)
    );
    // Angle: 50 sectors, plus a track skew (10) per track switch since the zone start
    // (head + (surfaces − 1) · cylinders = 1), plus a cylinder skew (20) per cylinder switch
    // (1): 80 sectors = 0.8 of a revolution.
    assert!((at.angle - 0.8).abs() < 1e-12, "{}", at.angle);
    assert!(
        (at.angle
            - disk.layout().angle(Pbn {
                cyl: 1,
                head: 0,
                sector: 50
            }))
        .abs()
            < 1e-15
    );
    assert_eq!(g.rotation_period(), 10_000_000);
    assert!((g.angle_at(2_500_000) - 0.25).abs() < 1e-12);
    // Seek: 1 cylinder = 1 ms; a write adds 0.2 ms of settling; a head switch alone 0.3 ms.
    assert_eq!(g.seek_time(0, 250 * 512, false), Some(1_000_000));
    assert_eq!(g.seek_time(0, 250 * 512, true), Some(1_200_000));
    assert_eq!(g.seek_time(0, 100 * 512, false), Some(300_000));
    assert_eq!(g.seek_time(0, 0, true), Some(0));
    // From t = 2.5 ms (angle 0.25) to angle 0.8: 5.5 ms.
    assert_eq!(g.rotational_latency(2_500_000, 250 * 512), Some(5_500_000));
    // Past the end (2,000 blocks).
    assert_eq!(g.locate(2000 * 512), None);
    assert_eq!(g.seek_time(0, 1 << 40, false), None);
}

#[test]
fn physical_fault_regions_map_to_the_lbas_under_them() {
    use wattio_devices::fault::{Faults, Faulty, Region};
    // `def()`: 2 surfaces, 100 sectors per track, track skew 10 and cylinder skew 20
    // sectors. Sector s of (cylinder c, head h) starts at angle
    // frac((c·(surfaces − 1) + h)·10 + c·20 + s) / 100), and is LBA 200c + 100h + s.
    let faulty = |region: Vec<Region>| {
        let faults = Faults {
            region,
            ..Faults::default()
        };
        Faulty::new(Box::new(MechanicalDisk::new(def()).unwrap()), &faults)
            .unwrap()
            .eio()
            .to_vec()
    };
    // A radial scratch on surface 1 over cylinders 2–3 at angle 0.5 ± 0.025:
    // (2, 1): offset 3·10 + 40 = 70, so s = 78..=82 → LBAs 578..=582;
    // (3, 1): offset 4·10 + 60 = 100 ≡ 0, so s = 48..=52 → LBAs 748..=752.
    let scratch = Region {
        surfaces: Some(vec![1]),
        cylinders: [2, 3],
        every: 1,
        angle: Some(0.5),
        width: Some(0.05),
    };
    assert_eq!(
        faulty(vec![scratch]),
        vec![[578 * 512, 583 * 512], [748 * 512, 753 * 512]]
    );
    // A servo-like fault: whole tracks of surface 0 on every third cylinder.
    let servo = Region {
        surfaces: Some(vec![0]),
        cylinders: [0, 9],
        every: 3,
        angle: None,
        width: None,
    };
    let want: Vec<[u64; 2]> = [0u64, 3, 6, 9]
        .iter()
        .map(|c| [c * 200 * 512, (c * 200 + 100) * 512])
        .collect();
    assert_eq!(faulty(vec![servo]), want);
    // A band over all surfaces of cylinders 4–5 is one consecutive run.
    let band = Region {
        surfaces: None,
        cylinders: [4, 5],
        every: 1,
        angle: None,
        width: None,
    };
    assert_eq!(faulty(vec![band]), vec![[800 * 512, 1200 * 512]]);
}

#[test]
fn fault_regions_are_checked_and_need_geometry() {
    use wattio_devices::fault::{Faults, Region};
    let r = Region {
        surfaces: None,
        cylinders: [5, 4],
        every: 1,
        angle: Some(0.2),
        width: None,
    };
    let f = Faults {
        region: vec![r.clone()],
        ..Faults::default()
    };
    assert_eq!(
        f.validate("device[0].fault").unwrap_err(),
        "device[0].fault.region[0].cylinders: expected [first, last] with first ≤ last, got [5, 4]"
    );
    let f = Faults {
        region: vec![Region {
            cylinders: [4, 5],
            ..r
        }],
        ..Faults::default()
    };
    assert_eq!(
        f.validate("device[0].fault").unwrap_err(),
        "device[0].fault.region[0]: give both `angle` and `width` (an angular window), or neither (whole tracks)"
    );
}

#[test]
fn a_prebuffered_write_takes_the_bus_while_a_read_miss_is_disconnected() {
    // Write-back, prebuffering, no bus time; a read disconnects 0.02 ms after its 0.5 ms
    // command overhead and a write-back write costs 0.1 ms of overhead.
    let mut pb = write_back(true);
    let mut d = MechanicalDisk::new(pb.clone()).unwrap();
    assert!(d.prebuffers());
    // A: read miss of block 0 at 0 ms, off the bus from 0.52 ms until block 0 is in at
    // 10.1 ms (`read_miss_then_cached_hit`).
    assert_eq!(d.service(0, &io(Op::Read, 0, 1)).total(), 10_100_000);
    let fua = Io {
        fua: true,
        ..io(Op::Write, 200, 1)
    };
    // Not taken: before A disconnects, A's own block, a FUA write, a read, and a write
    // whose 0.1 ms would end after A reconnects.
    assert!(!d.admits(300_000, &io(Op::Write, 200, 1), 0));
    assert!(!d.admits(MS, &io(Op::Write, 0, 1), 0));
    assert!(!d.admits(MS, &fua, 0));
    assert!(!d.admits(MS, &io(Op::Read, 200, 1), 0));
    assert!(!d.admits(10_050_000, &io(Op::Write, 200, 1), 0));
    // W: block 200 at 1 ms is taken, done once its data is in (1.1 ms). Its media write
    // follows A's: from 10.1 ms, seek one cylinder + settle 1.2 ms to 11.3 ms (angle 0.13),
    // wait for angle 0.30, write: on the media at 13.1 ms.
    assert!(d.admits(MS, &io(Op::Write, 200, 1), 0));
    assert_eq!(d.service(MS, &io(Op::Write, 200, 1)).total(), 100_000);
    // B: read of block 30 (angle 0.30, cylinder 0) when A ends at 10.1 ms: the media is
    // W's until 13.1 ms, then seek back one cylinder (1.0 ms) to 14.1 ms (angle 0.41), a
    // revolution less 0.11 to angle 0.30 (23.0 ms), read to 23.1 ms: 13.0 ms after 10.1.
    // Without W it would be on the media at 13.1 ms: 3.0 ms.
    assert_eq!(
        d.service(10_100_000, &io(Op::Read, 30, 1)).total(),
        13_000_000
    );
    let mut alone = MechanicalDisk::new(pb.clone()).unwrap();
    alone.service(0, &io(Op::Read, 0, 1));
    assert_eq!(
        alone.service(10_100_000, &io(Op::Read, 30, 1)).total(),
        3_000_000
    );
    assert_eq!(d.counters(), vec![("prebuffered_writes".to_string(), 1.0)]);
    // Only writes in the drive's own queue: with room for two commands (one in service),
    // the first queued one; with room for one, none.
    pb.controller.queue_depth = 2;
    let mut d = MechanicalDisk::new(pb.clone()).unwrap();
    d.service(0, &io(Op::Read, 0, 1));
    assert!(d.admits(MS, &io(Op::Write, 200, 1), 0));
    assert!(!d.admits(MS, &io(Op::Write, 200, 1), 1));
    pb.controller.queue_depth = 1;
    assert!(!MechanicalDisk::new(pb.clone()).unwrap().prebuffers());
    // Only with write-back: a write-through drive never prebuffers.
    pb.controller.queue_depth = 0;
    pb.cache.fast_write_level = 1;
    assert!(!MechanicalDisk::new(pb).unwrap().prebuffers());
}

#[test]
fn full_write_back_without_prebuffering_waits_for_the_destage_before_it() {
    // DiskSim takes a write's data while the mechanism destages only with prebuffering:
    // without it, level 2 holds a write that does not append as level 1 does
    // (`limited_write_back_takes_one_stream_and_makes_others_wait_for_the_media`): B at
    // 1 ms waits for A's destage (3.1 ms) and is done then, 2.1 ms; with prebuffering
    // B is done once its data is in, 0.1 ms.
    let mut d = MechanicalDisk::new(write_back(false)).unwrap();
    assert_eq!(d.service(0, &io(Op::Write, 200, 1)).total(), 100_000);
    assert_eq!(d.service(MS, &io(Op::Write, 500, 1)).total(), 2_100_000);
    let mut d = MechanicalDisk::new(write_back(true)).unwrap();
    assert_eq!(d.service(0, &io(Op::Write, 200, 1)).total(), 100_000);
    assert_eq!(d.service(MS, &io(Op::Write, 500, 1)).total(), 100_000);
}

#[test]
fn a_prebuffered_write_behind_queued_commands_is_destaged_after_them() {
    // As `a_prebuffered_write_takes_the_bus_while_a_read_miss_is_disconnected`, but W is
    // taken with one command queued before it (B): its data is in at 1.1 ms, and its media
    // write waits for B's, as DiskSim's drive writes it when it becomes its current
    // request.
    let mut d = MechanicalDisk::new(write_back(true)).unwrap();
    assert_eq!(d.service(0, &io(Op::Read, 0, 1)).total(), 10_100_000);
    assert!(d.admits(MS, &io(Op::Write, 200, 1), 1));
    assert_eq!(d.service(MS, &io(Op::Write, 200, 1)).total(), 100_000);
    // B (block 30) when A ends: the media is free, so as with no W at all, 3.0 ms
    // (on the media at 13.1 ms).
    assert_eq!(
        d.service(10_100_000, &io(Op::Read, 30, 1)).total(),
        3_000_000
    );
    // Then W: from 13.1 ms, seek one cylinder + settle 1.2 ms to 14.3 ms (angle 0.43),
    // a revolution less 0.13 to angle 0.30 (23.0 ms), written at 23.1 ms. C (block 60,
    // angle 0.60) at 13.1 ms: command to 13.6 ms, the media W's until 23.1 ms, seek back
    // 1.0 ms to 24.1 ms (angle 0.41), wait to 0.60 (26.0 ms), read: 26.1 ms, 13.0 ms.
    assert_eq!(
        d.service(13_100_000, &io(Op::Read, 60, 1)).total(),
        13_000_000
    );
}

#[test]
fn prebuffered_writes_wait_for_every_destage_once_the_write_segments_are_full() {
    // Write-back with prebuffering, write-hit overhead 0.1 ms, two write segments. W1
    // (block 200) at 0 ms: done at 0.1 ms, on the media from 0.1 to 3.1 ms (as in
    // `fua_write_goes_through_a_write_back_cache`). W2 (block 500: cylinder 2, head 1,
    // angle 0.70) at 1 ms: done at 1.1 ms, on the media from 3.1 ms: seek one cylinder +
    // settle to 4.3 ms (angle 0.43), wait to 7.0 ms, written at 7.1 ms. W3 at 2 ms finds
    // both segments dirty and waits, as DiskSim's drive does, until all are clean (7.1
    // ms): 5.1 ms. With a third segment it is done at once.
    let mut pb = write_back(true);
    pb.cache.write_segments = 2;
    let run = |pb: &MechanicalDef, last: Io| {
        let mut d = MechanicalDisk::new(pb.clone()).unwrap();
        assert_eq!(d.service(0, &io(Op::Write, 200, 1)).total(), 100_000);
        assert_eq!(d.service(MS, &io(Op::Write, 500, 1)).total(), 100_000);
        d.service(2 * MS, &last).total()
    };
    let flush = Io {
        len: 0,
        ..io(Op::Flush, 0, 0)
    };
    assert_eq!(run(&pb, flush), 5_100_000);
    assert_eq!(run(&pb, io(Op::Write, 800, 1)), 5_100_000);
    pb.cache.write_segments = 3;
    assert_eq!(run(&pb, io(Op::Write, 800, 1)), 100_000);
}

/// `def()` serving its queue in DiskSim's LBN order `name`.
fn scheduled(name: &str) -> MechanicalDisk {
    let mut d = def();
    d.scheduler = name.into();
    MechanicalDisk::new(d).unwrap()
}

fn reads(lbns: &[u64]) -> Vec<Io> {
    lbns.iter().map(|&b| io(Op::Read, b, 8)).collect()
}

#[test]
fn clook_takes_the_next_block_from_the_last_start_and_wraps() {
    let mut d = scheduled("clook");
    assert!(d.schedules());
    // From block 0: the lowest block, the earliest queued of two at the same block.
    assert_eq!(d.pick(0, &reads(&[700, 300, 300, 900])), 1);
    // A request starting at 1000 moves the reference to its start (not its end, 1008).
    d.service(0, &io(Op::Read, 1000, 8));
    assert_eq!(d.pick(0, &reads(&[1500, 200, 1000, 1200])), 2);
    assert_eq!(d.pick(0, &reads(&[1500, 200, 1001, 1200])), 2);
    // Nothing at or after 1000: back to the lowest.
    assert_eq!(d.pick(0, &reads(&[600, 150, 999])), 1);
}

#[test]
fn look_keeps_its_direction_while_a_request_lies_ahead() {
    let mut d = scheduled("look");
    d.service(0, &io(Op::Read, 1000, 8));
    // Ascending (1000 > 0): 1900 ahead is taken before 990 just behind.
    assert_eq!(d.pick(0, &reads(&[990, 1900])), 1);
    // Nothing ahead: turn.
    assert_eq!(d.pick(0, &reads(&[990, 20])), 0);
    // A request at 400 turns it downwards: 100 before 401, one block ahead of the old
    // direction; a request at the reference block itself (distance 0) is taken first.
    d.service(0, &io(Op::Read, 400, 8));
    assert_eq!(d.pick(0, &reads(&[401, 100])), 1);
    assert_eq!(d.pick(0, &reads(&[100, 400])), 1);
    // Descending with nothing behind: turn up.
    assert_eq!(d.pick(0, &reads(&[1500, 500])), 1);
}

#[test]
fn sstf_lbn_measures_from_the_last_end_and_alternates_on_ties() {
    let mut d = scheduled("sstf-lbn");
    // The reference is the end of the request: 1000 + 8 = 1008.
    d.service(0, &io(Op::Read, 1000, 8));
    assert_eq!(d.pick(0, &reads(&[1100, 950])), 1); // 92 against 58
    assert_eq!(d.pick(0, &reads(&[1060, 950])), 0); // 52 against 58
                                                    // 1018 and 998 are both 10 away: the first tie goes up, the next down, then up.
    let tie = reads(&[1018, 998]);
    assert_eq!(d.pick(0, &tie), 0);
    assert_eq!(d.pick(0, &tie), 1);
    assert_eq!(d.pick(0, &tie), 0);
}

#[test]
fn an_unknown_scheduler_is_named_in_the_error() {
    let mut d = def();
    d.scheduler = "elevator".into();
    let e = MechanicalDisk::new(d).unwrap_err();
    assert!(e.contains("timing.scheduler: unknown `elevator`"), "{e}");
    assert!(e.contains("clook"), "{e}");
}

/// The test drive reading ahead to the end of its segment (150 blocks), with no command
/// overhead on a read miss.
fn reading_ahead() -> MechanicalDef {
    let mut base = def();
    base.cache.continuous_read = 3;
    base.cache.max_read_ahead = 150;
    base.controller.read_miss_after_read_ms = 0.0;
    base
}

/// A read-ahead stopped for a waiting command first finishes what it is doing (DiskSim's
/// `disk_buffer_stopable_access`): here the head switch to its next track.
#[test]
fn a_read_ahead_stopped_in_its_head_switch_finishes_the_switch_first() {
    let mut d = MechanicalDisk::new(reading_ahead()).unwrap();
    let g = d.geometry().unwrap();
    // Block 0 at t = 0, no command overhead: sector 0 is under the head, done at 0.1 ms;
    // the read-ahead goes on through block 99 (done 10.0 ms), then switches to head 1
    // (0.3 ms, to 10.3 ms).
    assert_eq!(d.service(0, &io(Op::Read, 0, 1)).total(), 100_000);
    // A miss at 10.1 ms, in the switch. Block 1067 (cylinder 5, head 0, sector 67) sits at
    // angle 0.17: 67 sectors + 5 track skews (50) + 5 cylinder skews (100) = 217 sectors.
    let at = g.locate(1067 * 512).unwrap();
    assert_eq!((at.cylinder, at.surface, at.sector), (5, 0, 67));
    assert!((at.angle - 0.17).abs() < 1e-12, "{}", at.angle);
    let seek = g.seek_time(100 * 512, 1067 * 512, false).unwrap();
    assert_eq!(seek, 1_500_000);
    // The seek from head 1 starts when the switch ends (10.3 ms) and arrives at 11.8 ms,
    // just past 11.7 ms where the sector was: a turn later, done at 21.8 ms. Started at the
    // command (10.1 ms) it would have caught the sector at 11.7 and been done at 11.8.
    let s = d.service(10_100_000, &io(Op::Read, 1067, 1));
    assert_eq!(s.total(), 11_700_000, "{}", ms(s.total()));
}

/// `Stop prefetch in sector`: a read-ahead stopped for a waiting command while it reads a
/// sector abandons that sector and frees the arm at once; without it the sector is
/// finished first (`a_read_ahead_stopped_in_its_head_switch_finishes_the_switch_first`
/// for a head switch, which is finished either way).
#[test]
fn a_read_ahead_stopped_in_a_sector_stops_there_only_if_the_drive_does() {
    let miss_at = |stop_in_sector: bool| {
        let mut base = reading_ahead();
        base.cache.stop_prefetch_in_sector = stop_in_sector;
        let mut d = MechanicalDisk::new(base).unwrap();
        let g = d.geometry().unwrap();
        // Block 0 at t = 0, done at 0.1 ms; the read-ahead reads block 1 from 0.1 to 0.2.
        assert_eq!(d.service(0, &io(Op::Read, 0, 1)).total(), 100_000);
        // Block 624 (cylinder 3, head 0, sector 24) sits at angle 0.14: 24 sectors + 3
        // track skews (30) + 3 cylinder skews (60) = 114; its sector passes at 1.4–1.5 ms.
        let at = g.locate(624 * 512).unwrap();
        assert_eq!((at.cylinder, at.surface, at.sector), (3, 0, 24));
        assert!((at.angle - 0.14).abs() < 1e-12, "{}", at.angle);
        assert_eq!(g.seek_time(512, 624 * 512, false).unwrap(), 1_250_000);
        // A miss at 0.13 ms, in block 1's sector.
        d.service(130_000, &io(Op::Read, 624, 1)).total()
    };
    // Stopped at once: the seek (1.25 ms) lands at 1.38 ms, before the sector: done at
    // 1.5 ms, 1.37 ms after the command.
    assert_eq!(miss_at(true), 1_370_000);
    // Block 1 finished first (0.2 ms): lands at 1.45 ms, past the sector: a turn later.
    assert_eq!(miss_at(false), 11_370_000);
}
