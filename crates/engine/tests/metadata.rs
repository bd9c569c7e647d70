//! Functions' own metadata through the simulator: a layer logs every host write in a
//! [`Journal`] on the disk (`testing::WriteLog`, a write-intent log: the record is durable
//! before the write goes to the disk), and the records that survive a restart or a crash
//! are what it recovers.
//! The bytes live in the device runtime's media, so a crash (`DeviceRuntime::crash_with`)
//! loses — or tears — exactly what was not durable.

use crate::common;

use common::*;
use std::sync::{Arc, Mutex};
use wattio_core::integrity::Checker;
use wattio_core::io::{Op, Request};
use wattio_core::journal::{Journal, JournalConfig, Step};
use wattio_core::media::Tear;
use wattio_core::testing::{WriteLog, WriteLogSeen};
use wattio_core::trace::VecSource;
use wattio_core::{
    Actions, Completion, DeviceInfo, DeviceRuntime, Function, Io, IoId, Nanos, Region, Stack,
};
use wattio_devices::Catalogue;
use wattio_engine::{assemble, NullSink, Registry, Simulator};

/// Run the logger over the test disk in phases: each phase ends at a crash (torn with
/// `tear`) or, for the last, when the requests are done. Returns what it saw, and the
/// checker's verdicts held throughout.
fn run_phases(writes: &[(f64, u64)], crashes: &[(Nanos, Tear)]) -> Result<WriteLogSeen, String> {
    run_phases_over(writes, crashes, false)
}

/// Answers every read from a buffer of its own: reads the same bytes into its scratch
/// buffer, then `Copy`s them over the read's buffer (as a launch prefetcher answers from
/// its prefetch buffer). Writes and flushes pass.
#[derive(Default)]
struct AnswersFromItsBuffer {
    held: std::collections::HashMap<u64, Io>,
    next: u64,
}

impl Function for AnswersFromItsBuffer {
    fn name(&self) -> &str {
        "answers-from-its-buffer"
    }
    fn on_request(&mut self, _now: Nanos, io: Io, out: &mut Actions) {
        if io.op != Op::Read {
            return out.submit(io);
        }
        self.next += 1;
        let n = (1 << 40) + self.next;
        let mut own = Io::own(n, Op::Read, io.dev, io.offset, io.len);
        own.buf = wattio_core::Buf::Scratch { id: n, offset: 0 };
        self.held.insert(n, io);
        out.submit(own);
    }
    fn on_completion(&mut self, _now: Nanos, done: Completion, out: &mut Actions) {
        let mine = done
            .io
            .id
            .is_own()
            .then(|| self.held.remove(&(done.io.id.0 & !IoId::OWN)));
        let Some(io) = mine.flatten() else {
            return out.reply(done);
        };
        out.copy(io.buf, done.io.buf, io.len);
        out.release(done.io.buf);
        out.reply(Completion { io, ..done });
    }
}

/// [`run_phases`], with [`AnswersFromItsBuffer`] under the logger when `answered_below`.
fn run_phases_over(
    writes: &[(f64, u64)],
    crashes: &[(Nanos, Tear)],
    answered_below: bool,
) -> Result<WriteLogSeen, String> {
    let seen = Arc::new(Mutex::new(WriteLogSeen::default()));
    let cfg = config("");
    let reqs: Vec<Request> = writes
        .iter()
        .map(|&(t, off)| {
            let mut r = Request::new((t * 1e9) as Nanos, Op::Write, off, 4096);
            r.fua = true;
            r
        })
        .collect();
    let mut checker = Checker::new(4096)?;
    let mut devices: Option<Vec<DeviceRuntime>> = None;
    let mut start = 0;
    let ends = crashes.iter().map(|c| Some(*c)).chain([None]);
    for end in ends {
        let part: Vec<Request> = reqs
            .iter()
            .filter(|r| r.arrival >= start && end.is_none_or(|(t, _)| r.arrival <= t))
            .copied()
            .collect();
        let asm = assemble(
            &cfg,
            &Catalogue::default(),
            None,
            &mut Registry::new(),
            start,
        )?;
        let infos: Vec<DeviceInfo> = asm.devices.iter().map(|d| d.info.clone()).collect();
        let mut layers: Vec<Box<dyn Function>> = vec![Box::new(WriteLog::new(seen.clone()))];
        if answered_below {
            layers.push(Box::<AnswersFromItsBuffer>::default());
        }
        let mut stack = Stack::new(layers);
        stack.attach(&infos)?;
        let devs = devices.take().unwrap_or(asm.devices);
        let o = Simulator::new(stack, devs)
            .starting_at(start)
            .with_observer(&mut checker)
            .run(
                &mut VecSource::new(part),
                end.map(|(t, _)| t),
                0,
                &mut NullSink,
            )?;
        let mut devs = o.devices;
        if let Some((t, tear)) = end {
            for d in &mut devs {
                d.crash_with(t, tear);
            }
            checker.crash(t);
            start = t;
        }
        devices = Some(devs);
    }
    let s = std::mem::take(&mut *seen.lock().unwrap());
    Ok(s)
}

#[test]
fn records_survive_restarts_and_crashes() {
    let s = run_phases(
        &[(1.0, 0), (2.0, 4096), (3.0, 8192), (12.0, 12288)],
        &[(10_000_000_000, Tear::LoseAll)],
    )
    .unwrap();
    assert_eq!(s.durable, vec![0, 4096, 8192, 12288]);
    assert_eq!(
        s.recovered,
        vec![Ok(vec![]), Ok(vec![0, 4096, 8192])],
        "fresh, then the three records of before the crash"
    );
}

#[test]
fn records_read_back_through_a_layer_that_answers_from_its_own_buffer() {
    // The log's recovery reads are answered by a copy out of the lower layer's buffer: the
    // simulator carries the bytes there as the live executor does.
    let s = run_phases_over(
        &[(1.0, 0), (2.0, 4096), (3.0, 8192), (12.0, 12288)],
        &[(10_000_000_000, Tear::LoseAll)],
        true,
    )
    .unwrap();
    assert_eq!(
        s.recovered,
        vec![Ok(vec![]), Ok(vec![0, 4096, 8192])],
        "fresh, then the three records of before the crash"
    );
}

#[test]
fn a_record_in_flight_at_a_crash_survives_whole_or_not_at_all() {
    // The second write's record goes out at 1 s; the crash comes 100 µs later, before the
    // disk (10 ms seek) has finished it. Its 40 bytes lie in the block's first sector: the
    // torn write keeps that sector (the record survives, valid) or not (it is gone).
    let mut outcomes = Vec::new();
    for seed in 0..8 {
        let crash = 1_000_100_000;
        let s = run_phases(
            &[(0.5, 0), (1.0, 4096), (2.0, 8192)],
            &[(crash, Tear::Sectors(seed))],
        )
        .unwrap();
        assert_eq!(s.durable[0], 0);
        let got = s.recovered[1].clone().unwrap();
        assert!(
            got == vec![0] || got == vec![0, 4096],
            "seed {seed}: {got:?}"
        );
        outcomes.push(got.len());
    }
    assert!(
        outcomes.contains(&1) && outcomes.contains(&2),
        "{outcomes:?}"
    );
}

#[test]
fn a_region_holding_something_else_stops_the_run() {
    // First run: the region is formatted. Then another owner's journal in the same place
    // must refuse it, and the run stops with its message.
    struct Other(Option<Journal>);
    impl Function for Other {
        fn name(&self) -> &str {
            "other"
        }
        fn attach(&mut self, d: &[DeviceInfo]) -> Result<(), String> {
            self.0 = Some(Journal::new(JournalConfig {
                region: Region::at_end(&d[0], WriteLog::REGION_LEN)?,
                snapshot_bytes: 4096,
                owner: "other".into(),
                io_base: 0,
                priority: 0,
            })?);
            Ok(())
        }
        fn regions(&self) -> Vec<Region> {
            self.0.iter().map(|j| j.region()).collect()
        }
        fn on_start(&mut self, _: Nanos, out: &mut Actions) {
            self.0.as_mut().unwrap().recover(out)
        }
        fn on_request(&mut self, _: Nanos, io: Io, out: &mut Actions) {
            out.submit(io)
        }
        fn on_completion(&mut self, _: Nanos, done: Completion, out: &mut Actions) {
            if self.0.as_mut().unwrap().on_completion(&done, out) == Step::NotMine {
                out.reply(done)
            }
        }
        fn on_bytes(&mut self, _: Nanos, tag: u64, b: &[u8], out: &mut Actions) {
            if let Step::Failed(e) = self.0.as_mut().unwrap().on_bytes(tag, b, out) {
                out.fail(&e);
            }
        }
    }
    let seen = Arc::new(Mutex::new(WriteLogSeen::default()));
    let cfg = config("");
    let asm = assemble(&cfg, &Catalogue::default(), None, &mut Registry::new(), 0).unwrap();
    let infos: Vec<DeviceInfo> = asm.devices.iter().map(|d| d.info.clone()).collect();
    let mut stack = Stack::new(vec![Box::new(WriteLog::new(seen.clone()))]);
    stack.attach(&infos).unwrap();
    let o = Simulator::new(stack, asm.devices)
        .run(
            &mut VecSource::new(vec![]),
            Some(1_000_000_000),
            0,
            &mut NullSink,
        )
        .unwrap();
    let mut stack = Stack::new(vec![Box::new(Other(None))]);
    stack.attach(&infos).unwrap();
    let e = Simulator::new(stack, o.devices)
        .starting_at(1_000_000_000)
        .run(
            &mut VecSource::new(vec![]),
            Some(2_000_000_000),
            0,
            &mut NullSink,
        )
        .err()
        .expect("refused");
    assert!(
        e.starts_with("layer 0: metadata log `other`: device 0 bytes ")
            && e.ends_with("holds the log of `test-write-log`, not of `other`"),
        "{e}"
    );
}

#[test]
fn host_data_written_into_a_metadata_region_is_caught() {
    // A host write aimed at the logger's region (the last blocks of the disk): the layer
    // passes it through, so its data lands on the metadata. The checker refuses it.
    let end = 1_000_000_000 / 4096 * 4096;
    let e = run_phases(&[(1.0, end - WriteLog::REGION_LEN)], &[]).unwrap_err();
    assert!(
        e.contains("inside the metadata region") && e.contains("overlaps its metadata"),
        "{e}"
    );
}

/// RAID-0 over two labelled EXCES pairs (`pair_label`): the stack attaches bottom up and
/// presents each pair's volume — its disk less the label's 20 KiB, 999,976,960 bytes of
/// the 10^9 — to the array, which stripes within them: its volume is 2 × 999,976,960
/// bytes (with the disks' raw size it was 2 × 10^9, its last stripes over the labels). The
/// array's last pages written and read back across a crash, every one as acknowledged.
#[test]
fn an_array_over_labelled_exces_pairs_stripes_within_their_volumes() {
    const VOLUME: u64 = 244_135 * 4096;
    let mut config = String::from("[run]\nseed = 3\n\n");
    for (disk, card) in [("d0", "c0"), ("d1", "c1")] {
        config += &format!(
            "[[device]]\nname = \"{disk}\"\n{}\n[[device]]\nname = \"{card}\"\nmodel = \"sandisk-ultra-cf-2gb\"\n\n",
            wattio_core::testing::SpecDisk::ROUND.toml()
        );
    }
    config +=
        "[[function]]\nkind = \"raid\"\nlevel = 0\ndevices = [\"d0\", \"d1\"]\nchunk_kib = 4\n\n";
    for (disk, card) in [("d0", "c0"), ("d1", "c1")] {
        config += &format!(
            "[[function]]\nkind = \"exces\"\ndisk = \"{disk}\"\nflash = \"{card}\"\ncache_pages = 64\nabsorb_writes = \"always\"\npair_label = true\n\n"
        );
    }
    let cfg = wattio_engine::RunConfig::from_toml("array.toml", &config).unwrap();
    let cat = Catalogue::embedded().unwrap();
    let asm = assemble(&cfg, &cat, None, &mut Registry::new(), 0).unwrap();
    let v = asm.stack.volumes();
    assert_eq!(
        v.iter().map(|v| (v.dev, v.size)).collect::<Vec<_>>(),
        vec![(0, 2 * VOLUME)],
        "the array's volume only, within the pairs'"
    );
    // The array's last 16 pages written (a FLUSH after them), then read back after a crash.
    let end = 2 * VOLUME;
    let mut requests = Vec::new();
    for p in 0..16u64 {
        let t = 1_000_000 * (p + 1);
        requests.push(Request::new(t, Op::Write, end - (p + 1) * 4096, 4096));
    }
    requests.push(Request::new(20_000_000, Op::Flush, 0, 0));
    for p in 0..16u64 {
        requests.push(Request::new(
            2_000_000_000 + p,
            Op::Read,
            end - (p + 1) * 4096,
            4096,
        ));
    }
    let phases = run_with_crashes(&config, 4096, &requests, &[1_000_000_000]).unwrap();
    assert_eq!(phases.len(), 2);
}
