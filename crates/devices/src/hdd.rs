//! The parametric disk (`model = "hdd-parametric"`): the analytical model of the spin-down
//! literature and of FS2's evaluation (§5): T = overhead + seek + rotation + transfer.
//!
//! * Seek: zero for a request that starts where the previous one ended (sequential);
//!   otherwise, if `track_to_track_ms` and `full_stroke_ms` are given, the three-point curve
//!   of Lee and Katz (SIGMETRICS 1993; DiskSim's `SEEK_3PT_CURVE`), in x = seek distance /
//!   capacity: `t(x) = t2t + b·√x + c·x` with `b = (−10·t2t + 15·avg − 5·full) / 3` and
//!   `c = (7·t2t − 15·avg + 8·full) / 3`. It starts at track-to-track, reaches the full
//!   stroke at x = 1, and its mean over two uniform random positions (distance density
//!   2(1 − x)) is the average seek, which is how datasheets define "average seek" (the
//!   weighted average of all seek combinations) — not the seek at a third of the stroke,
//!   which a concave curve puts above the mean. Anchors for which the curve would fall
//!   anywhere (b < 0 or b/2 + c < 0) are rejected. Without the two anchors, the average
//!   seek for any move.
//! * Rotation: half a revolution for a non-sequential request (the expected latency; this
//!   model does not track rotational phase — the `hdd-mechanical` model does).
//! * Transfer: `len` at the media rate, interpolated linearly from the outer-zone rate at
//!   offset 0 to the inner-zone rate at the end (zoned recording), or one rate if only
//!   `media_rate_mbps` is given.
//!
//! Timing parameters (`[timing]`): `capacity_bytes`, `rpm`, `avg_seek_ms`,
//! optional `track_to_track_ms`, `full_stroke_ms`, `media_rate_mbps` or
//! `media_rate_outer_mbps` + `media_rate_inner_mbps`, optional `overhead_ms`.

use crate::params::{check_keys, count, opt_f64, positive};
use wattio_core::device::{Service, Timing};
use wattio_core::io::Io;
use wattio_core::time::{secs_to_ns, Nanos};

#[derive(Clone, Debug)]
pub struct ParametricHdd {
    capacity: u64,
    /// 1 / capacity: a multiply per request instead of two divisions, which dominated the
    /// model's cost.
    inv_capacity: f64,
    half_rotation: Nanos,
    avg_seek: Nanos,
    /// Three-point curve `t2t + b·√x + c·x` as (t2t, b, c) in seconds, when it is given.
    curve: Option<(f64, f64, f64)>,
    /// Bytes per second at offset 0 and at the end.
    rate_outer: f64,
    rate_inner: f64,
    overhead: Nanos,
    head: u64,
}

const KEYS: &[&str] = &[
    "capacity_bytes",
    "rpm",
    "avg_seek_ms",
    "track_to_track_ms",
    "full_stroke_ms",
    "media_rate_mbps",
    "media_rate_outer_mbps",
    "media_rate_inner_mbps",
    "overhead_ms",
];

impl ParametricHdd {
    pub fn from_toml(t: &toml::Table) -> Result<ParametricHdd, String> {
        check_keys(t, KEYS)?;
        let capacity = count(t, "capacity_bytes")?;
        let rpm = positive(t, "rpm")?;
        let avg_seek = positive(t, "avg_seek_ms")? / 1e3;
        let t2t = opt_f64(t, "track_to_track_ms")?.map(|v| v / 1e3);
        let full = opt_f64(t, "full_stroke_ms")?.map(|v| v / 1e3);
        let curve = match (t2t, full) {
            (Some(t2t), Some(full)) => {
                if !(t2t <= avg_seek && avg_seek <= full) {
                    return Err(format!(
                        "timing: expected track_to_track_ms ≤ avg_seek_ms ≤ full_stroke_ms, got {} / {} / {}",
                        t2t * 1e3, avg_seek * 1e3, full * 1e3
                    ));
                }
                let b = (-10.0 * t2t + 15.0 * avg_seek - 5.0 * full) / 3.0;
                let c = (7.0 * t2t - 15.0 * avg_seek + 8.0 * full) / 3.0;
                // t'(x) = b/(2√x) + c is smallest at x = 1 when c < 0: monotone iff b ≥ 0 and
                // b/2 + c ≥ 0 (a tolerance for rounding at the boundary).
                if b < -1e-12 || b / 2.0 + c < -1e-12 {
                    return Err(format!(
                        "timing: track_to_track_ms / avg_seek_ms / full_stroke_ms = {} / {} / {} give no rising seek curve whose mean over random seeks is the average (Lee-Katz: need 3·avg ≥ 2·t2t + full and 15·avg ≤ 4·t2t + 11·full)",
                        t2t * 1e3, avg_seek * 1e3, full * 1e3
                    ));
                }
                Some((t2t, b, c))
            }
            (None, None) => None,
            _ => {
                return Err(
                    "timing: give both track_to_track_ms and full_stroke_ms, or neither".into(),
                )
            }
        };
        let (outer, inner) = match (
            opt_f64(t, "media_rate_mbps")?,
            opt_f64(t, "media_rate_outer_mbps")?,
            opt_f64(t, "media_rate_inner_mbps")?,
        ) {
            (Some(r), None, None) if r < 1e-6 => {
                return Err(format!(
                    "timing.media_rate_mbps: expected a rate > 0, got {r}"
                ))
            }
            (Some(r), None, None) => (r, r),
            (None, Some(o), Some(i)) => (o, i),
            _ => return Err(
                "timing: give media_rate_mbps, or media_rate_outer_mbps and media_rate_inner_mbps"
                    .into(),
            ),
        };
        for (k, v) in [
            ("media_rate_outer_mbps", outer),
            ("media_rate_inner_mbps", inner),
        ] {
            if v < 1e-6 {
                return Err(format!("timing.{k}: expected a rate > 0, got {v}"));
            }
        }
        Ok(ParametricHdd {
            capacity,
            inv_capacity: 1.0 / capacity.max(1) as f64,
            half_rotation: secs_to_ns(30.0 / rpm),
            avg_seek: secs_to_ns(avg_seek),
            curve,
            rate_outer: outer * 1e6,
            rate_inner: inner * 1e6,
            overhead: secs_to_ns(opt_f64(t, "overhead_ms")?.unwrap_or(0.0) / 1e3),
            head: 0,
        })
    }

    /// Seek time for a move of `distance` bytes.
    pub fn seek_time(&self, distance: u64) -> Nanos {
        if distance == 0 {
            return 0;
        }
        match self.curve {
            None => self.avg_seek,
            Some((t2t, b, c)) => {
                // Clamped to the capacity (< 2⁶³; parked heads give a huge distance), then through
                // i64: one conversion instruction instead of the unsigned sequence.
                let x = (distance.min(self.capacity) as i64 as f64 * self.inv_capacity).min(1.0);
                secs_to_ns(t2t + b * x.sqrt() + c * x)
            }
        }
    }

    /// Transfer time of `len` bytes at `offset`.
    pub fn transfer_time(&self, offset: u64, len: u32) -> Nanos {
        let x = (offset.min(self.capacity) as i64 as f64 * self.inv_capacity).min(1.0);
        let rate = self.rate_outer + (self.rate_inner - self.rate_outer) * x;
        secs_to_ns(len as f64 / rate)
    }

    pub fn half_rotation(&self) -> Nanos {
        self.half_rotation
    }
}

impl Timing for ParametricHdd {
    fn capacity(&self) -> u64 {
        self.capacity
    }

    fn service(&mut self, _start: Nanos, io: &Io) -> Service {
        if !io.op.moves_data() {
            // Flush and discard cost one command overhead; this model keeps no write cache.
            return Service {
                overhead_ns: self.overhead,
                ..Service::default()
            };
        }
        let sequential = io.offset == self.head;
        let distance = io.offset.abs_diff(self.head);
        let svc = Service {
            seek_ns: self.seek_time(distance),
            rotate_ns: if sequential { 0 } else { self.half_rotation },
            transfer_ns: self.transfer_time(io.offset, io.len),
            overhead_ns: self.overhead,
            ..Service::default()
        };
        self.head = io.end();
        svc
    }

    fn on_power(&mut self, _now: Nanos, ready: bool) {
        // Heads park on spin-down: the next access is never sequential.
        if !ready {
            self.head = u64::MAX;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wattio_core::io::{Op, Request};

    fn disk(extra: &str) -> ParametricHdd {
        let t: toml::Table = toml::from_str(&format!(
            "model = \"hdd-parametric\"\ncapacity_bytes = 1_000_000_000\nrpm = 6000\navg_seek_ms = 10.0\nmedia_rate_mbps = 50\n{extra}"
        ))
        .unwrap();
        ParametricHdd::from_toml(&t).unwrap()
    }

    #[test]
    fn random_then_sequential_by_hand() {
        let mut d = disk("overhead_ms = 0.5");
        let io = Request::new(0, Op::Read, 500_000_000, 50_000).io(0);
        let s = d.service(0, &io);
        // 6000 rpm → 10 ms per revolution → 5 ms; 50 kB at 50 MB/s = 1 ms.
        assert_eq!(s.seek_ns, 10_000_000);
        assert_eq!(s.rotate_ns, 5_000_000);
        assert_eq!(s.transfer_ns, 1_000_000);
        assert_eq!(s.total(), 16_500_000);
        let next = Request::new(0, Op::Write, 500_050_000, 50_000).io(1);
        let s = d.service(0, &next);
        assert_eq!((s.seek_ns, s.rotate_ns, s.total()), (0, 0, 1_500_000));
    }

    #[test]
    fn three_point_curve_by_hand() {
        // t2t 1, avg 10, full 20 ms: b = (−10 + 150 − 100)/3 = 40/3, c = (7 − 150 + 160)/3 = 17/3.
        let d = disk("track_to_track_ms = 1.0\nfull_stroke_ms = 20.0");
        assert_eq!(d.seek_time(1_000_000_000), 20_000_000);
        // x = 1/4: 1 + 40/3 · 1/2 + 17/3 · 1/4 = 9.08333 ms.
        assert_eq!(d.seek_time(250_000_000), 9_083_333);
        // One byte: x = 1e-9, 1 + 40/3 · 3.1623e-5 ms = 1.000422 ms.
        assert_eq!(d.seek_time(1), 1_000_422);
        // The seek at a third of the stroke lies above the average, the curve being concave.
        assert_eq!(d.seek_time(333_333_333), 10_586_892); // 1 + 40/3 · 0.57735 + 17/9
    }

    #[test]
    fn three_point_curve_mean_is_the_average_seek() {
        // The mean over two uniform random positions (distance density 2(1 − x)) is the
        // datasheet's average seek: midpoint rule over 100,000 strips.
        let d = disk("track_to_track_ms = 1.0\nfull_stroke_ms = 20.0");
        let n = 100_000;
        let mean: f64 = (0..n)
            .map(|i| {
                let x = (i as f64 + 0.5) / n as f64;
                2.0 * (1.0 - x) * d.seek_time((x * 1e9) as u64) as f64 / n as f64
            })
            .sum();
        assert!((mean - 10_000_000.0).abs() < 2_000.0, "{mean}");
    }

    #[test]
    fn three_point_curve_rejects_anchors_it_cannot_fit() {
        for (t2t, full) in [(1.0, 25.0), (0.1, 10.5)] {
            let t: toml::Table = toml::from_str(&format!(
                "capacity_bytes = 1000\nrpm = 7200\navg_seek_ms = {}\ntrack_to_track_ms = {t2t}\nfull_stroke_ms = {full}\nmedia_rate_mbps = 1",
                if full > 20.0 { 8.0 } else { 10.0 }
            ))
            .unwrap();
            let e = ParametricHdd::from_toml(&t).unwrap_err();
            assert!(e.contains("no rising seek curve"), "{e}");
        }
    }

    #[test]
    fn parked_heads_pay_a_full_stroke() {
        let mut d = disk("track_to_track_ms = 1.0\nfull_stroke_ms = 20.0");
        d.on_power(0, false);
        let io = Request::new(0, Op::Read, 0, 50_000).io(0);
        let s = d.service(0, &io);
        // Spin-down parks the heads: the first access seeks the full stroke and rotates.
        assert_eq!((s.seek_ns, s.rotate_ns), (20_000_000, 5_000_000));
    }

    #[test]
    fn zoned_rate_interpolates() {
        let t: toml::Table = toml::from_str(
            "capacity_bytes = 1000\nrpm = 7200\navg_seek_ms = 9\nmedia_rate_outer_mbps = 60\nmedia_rate_inner_mbps = 30",
        )
        .unwrap();
        let d = ParametricHdd::from_toml(&t).unwrap();
        assert_eq!(d.transfer_time(0, 60_000), 1_000_000);
        assert_eq!(d.transfer_time(1000, 30_000), 1_000_000);
        assert_eq!(d.transfer_time(500, 45_000), 1_000_000);
    }

    #[test]
    fn errors_name_the_key() {
        let t: toml::Table = toml::from_str(
            "capacity_bytes = 1000\nrpm = 7200\navg_seek_ms = -1\nmedia_rate_mbps = 1",
        )
        .unwrap();
        let e = ParametricHdd::from_toml(&t).unwrap_err();
        assert!(e.starts_with("timing.avg_seek_ms"), "{e}");
        let t: toml::Table = toml::from_str(
            "capacity_bytes = 1000\nrpm = 7200\navg_seek_ms = 1\nmedia_rate_mbps = 1\nseek = 3",
        )
        .unwrap();
        assert!(ParametricHdd::from_toml(&t)
            .unwrap_err()
            .starts_with("timing.seek: unknown key"));
    }
}
