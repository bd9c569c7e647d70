//! Fault injection: a device that fails I/O on an offset range, serves slower than its
//! model, or is missing when the run starts. Data of a `[device.fault]` table in the run
//! config (see `docs/integrity.md`); the engine wraps the device's timing model in
//! [`Faulty`] when a table is given, so a run without faults pays nothing.

use serde::Deserialize;
use wattio_core::device::{Service, Timing};
use wattio_core::io::{Io, Status};
use wattio_core::time::Nanos;

#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Faults {
    /// Byte ranges `[from, to)`: a read or write overlapping one fails with EIO (the device
    /// still spends its service time on it; a failed write stores nothing).
    #[serde(default)]
    pub eio: Vec<[u64; 2]>,
    /// Service-time multiplier: every phase of every service takes this many times longer.
    #[serde(default)]
    pub slow: Option<f64>,
    /// The device is absent when the run starts: building the run fails with an error
    /// naming it.
    #[serde(default)]
    pub missing: bool,
}

impl Faults {
    /// Check the table; errors name the key under `prefix` (e.g. `device[2].fault`).
    pub fn validate(&self, prefix: &str) -> Result<(), String> {
        for (i, [from, to]) in self.eio.iter().enumerate() {
            if from >= to {
                return Err(format!(
                    "{prefix}.eio[{i}]: expected [from, to) with from < to, got [{from}, {to}]"
                ));
            }
        }
        if let Some(s) = self.slow {
            if !(s.is_finite() && s > 0.0 && s <= 1e6) {
                return Err(format!(
                    "{prefix}.slow: expected a multiplier in (0, 1e6], got {s}"
                ));
            }
        }
        Ok(())
    }
}

/// A timing model with faults injected.
pub struct Faulty {
    inner: Box<dyn Timing>,
    eio: Vec<[u64; 2]>,
    slow: f64,
    failed: u64,
}

impl Faulty {
    pub fn new(inner: Box<dyn Timing>, faults: &Faults) -> Faulty {
        Faulty {
            inner,
            eio: faults.eio.clone(),
            slow: faults.slow.unwrap_or(1.0),
            failed: 0,
        }
    }
}

fn scale(ns: Nanos, k: f64) -> Nanos {
    (ns as f64 * k).round() as Nanos
}

impl Timing for Faulty {
    fn capacity(&self) -> u64 {
        self.inner.capacity()
    }

    fn service(&mut self, start: Nanos, io: &Io) -> Service {
        let mut s = self.inner.service(start, io);
        if self.slow != 1.0 {
            s.seek_ns = scale(s.seek_ns, self.slow);
            s.rotate_ns = scale(s.rotate_ns, self.slow);
            s.transfer_ns = scale(s.transfer_ns, self.slow);
            s.overhead_ns = scale(s.overhead_ns, self.slow);
        }
        if io.op.moves_data()
            && s.status == Status::Ok
            && self
                .eio
                .iter()
                .any(|&[from, to]| io.offset < to && io.end() > from)
        {
            s.status = Status::IoError;
            self.failed += 1;
        }
        s
    }

    fn max_concurrent(&self) -> u32 {
        self.inner.max_concurrent()
    }

    fn schedules(&self) -> bool {
        self.inner.schedules()
    }

    fn pick(&mut self, now: Nanos, queue: &[Io]) -> usize {
        self.inner.pick(now, queue)
    }

    fn counters(&self) -> Vec<(String, f64)> {
        let mut c = self.inner.counters();
        c.push(("fault_eio".into(), self.failed as f64));
        c
    }

    fn on_power(&mut self, now: Nanos, ready: bool) {
        self.inner.on_power(now, ready)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wattio_core::io::{Op, Request};

    struct Flat;
    impl Timing for Flat {
        fn capacity(&self) -> u64 {
            1 << 20
        }
        fn service(&mut self, _start: Nanos, _io: &Io) -> Service {
            Service {
                seek_ns: 10,
                rotate_ns: 5,
                transfer_ns: 3,
                overhead_ns: 1,
                ..Service::default()
            }
        }
    }

    #[test]
    fn eio_on_a_range_and_a_slower_device() {
        let faults: Faults = toml::from_str("eio = [[8192, 12288]]\nslow = 2.5").unwrap();
        faults.validate("device[0].fault").unwrap();
        let mut t = Faulty::new(Box::new(Flat), &faults);
        let at = |op, off, len| Request::new(0, op, off, len).io(0);
        let s = t.service(0, &at(Op::Read, 0, 4096));
        assert_eq!(s.status, Status::Ok);
        // 10, 5, 3, 1 ns × 2.5, rounded: 25 + 13 + 8 + 3.
        assert_eq!(s.total(), 49);
        // Touching the range by one byte at either end fails; a flush never does.
        assert_eq!(
            t.service(0, &at(Op::Write, 4096, 4097)).status,
            Status::IoError
        );
        assert_eq!(
            t.service(0, &at(Op::Read, 12287, 1)).status,
            Status::IoError
        );
        assert_eq!(t.service(0, &at(Op::Read, 12288, 4096)).status, Status::Ok);
        assert_eq!(t.service(0, &at(Op::Flush, 0, 0)).status, Status::Ok);
        assert_eq!(t.counters(), vec![("fault_eio".to_string(), 2.0)]);
    }

    #[test]
    fn bad_tables_name_the_key() {
        let f: Faults = toml::from_str("eio = [[5, 5]]").unwrap();
        assert_eq!(
            f.validate("device[1].fault").unwrap_err(),
            "device[1].fault.eio[0]: expected [from, to) with from < to, got [5, 5]"
        );
        let f: Faults = toml::from_str("slow = 0.0").unwrap();
        assert_eq!(
            f.validate("device[0].fault").unwrap_err(),
            "device[0].fault.slow: expected a multiplier in (0, 1e6], got 0"
        );
        assert!(toml::from_str::<Faults>("slowness = 2").is_err());
    }
}
