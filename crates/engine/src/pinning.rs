//! Hybrid-disk pinning of a launch sequence: which parts of a launch to pin in a hybrid
//! disk's flash so that launching costs the least disk time, under a flash budget
//! (Joo et al., *Improving Application Launch Times with Hybrid Disks*, CODES+ISSS 2009:
//! pin 26 % of the launch sequence → disk access time −48 %, launch time −31 %).
//! docs/functions/pinning.md.
//!
//! **Latency model.** A hybrid disk is an HDD (a catalogue `hdd-parametric` model) and a
//! flash part (any catalogue timing model). A launch sequence is cut into **chunks**:
//! maximal runs of consecutive requests each starting where the previous ended (read in one
//! sweep, with no positioning in between). A pinned chunk is read from flash; the others
//! from the HDD in launch order, the head moving from the end of one unpinned chunk to the
//! start of the next — so pinning a chunk also changes the seeks of its unpinned
//! neighbours. Every time comes from the device models themselves (`Timing::service`).
//!
//! **ILP.** Binary `x_c` (chunk *c* pinned) and `y_ij` (the head goes from the end of
//! unpinned chunk *i* to unpinned chunk *j*, every chunk between pinned), over the chunks
//! plus a source (the head's start) and a sink: a unit flow from the source to the sink
//! through exactly the unpinned chunks — in(c) = out(c) = 1 − x_c — with edges only forward,
//! so the flow is one path visiting the unpinned chunks in launch order. Minimise
//! Σ y_ij·hdd(i→j) + Σ x_c·flash(c) subject to Σ x_c·bytes(c) ≤ budget. Edges span at most
//! `window` chunks, plus an edge from every node to the sink (a longer run of pinned
//! chunks elsewhere is not considered); with `window` ≥ the number of chunks the ILP is
//! exact for the model.
//!
//! **Baselines** (the paper's): FCFP, first-come first-pinned (chunks in launch order while
//! they fit), and SCF, small chunks first (ascending size while they fit).

use good_lp::{
    constraint, microlp, variable, Expression, ResolutionError, Solution, SolverModel, Variable,
};
use wattio_core::device::Timing;
use wattio_core::io::{Io, Op, Request};
use wattio_core::time::Nanos;
use wattio_devices::hdd::ParametricHdd;

/// One chunk: requests `from..to` of the sequence.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Chunk {
    pub from: usize,
    pub to: usize,
    pub offset: u64,
    pub bytes: u64,
}

/// A launch sequence (offset, length) on a hybrid disk.
pub struct Hybrid<'a> {
    hdd: &'a ParametricHdd,
    flash: &'a mut dyn Timing,
    seq: Vec<(u64, u32)>,
    pub chunks: Vec<Chunk>,
}

/// What a pin set costs.
#[derive(Clone, Debug, PartialEq)]
pub struct Pinned {
    pub pins: Vec<bool>,
    pub pinned_bytes: u64,
    /// Time of the launch's requests: HDD part (positioning + transfer) and flash part.
    pub hdd: Nanos,
    pub flash: Nanos,
}

impl Pinned {
    pub fn total(&self) -> Nanos {
        self.hdd + self.flash
    }
}

/// The ILP's answer.
#[derive(Clone, Debug, PartialEq)]
pub struct Solved {
    pub pinned: Pinned,
    /// The ILP's objective (ns) and the LP relaxation's (a lower bound on the optimum):
    /// their relative difference is the optimality gap the solution is known to be within.
    pub objective: f64,
    pub bound: f64,
    pub seconds: f64,
}

impl Solved {
    pub fn gap(&self) -> f64 {
        if self.objective > 0.0 {
            (self.objective - self.bound).max(0.0) / self.objective
        } else {
            0.0
        }
    }
}

impl<'a> Hybrid<'a> {
    /// The launch's requests `seq` (offset, length, in launch order).
    pub fn new(hdd: &'a ParametricHdd, flash: &'a mut dyn Timing, seq: &[(u64, u32)]) -> Self {
        let mut chunks: Vec<Chunk> = Vec::new();
        for (i, &(offset, len)) in seq.iter().enumerate() {
            match chunks.last_mut() {
                Some(c) if c.offset + c.bytes == offset => {
                    c.to = i + 1;
                    c.bytes += len as u64;
                }
                _ => chunks.push(Chunk {
                    from: i,
                    to: i + 1,
                    offset,
                    bytes: len as u64,
                }),
            }
        }
        Hybrid {
            hdd,
            flash,
            seq: seq.to_vec(),
            chunks,
        }
    }

    fn read(&self, k: usize) -> Io {
        let (offset, len) = self.seq[k];
        Request::new(0, Op::Read, offset, len).io(k as u64)
    }

    /// HDD time of chunk `c` with the head at `head` (`None`: where a fresh disk has it).
    fn hdd_time(&self, head: Option<u64>, c: usize) -> Nanos {
        let mut d = self.hdd.clone();
        if let Some(at) = head {
            // A zero-length access leaves the model's head at `at`.
            d.service(0, &Request::new(0, Op::Read, at, 0).io(0));
        }
        let ch = self.chunks[c];
        (ch.from..ch.to)
            .map(|k| d.service(0, &self.read(k)).total())
            .sum()
    }

    fn flash_time(&mut self, c: usize) -> Nanos {
        let ch = self.chunks[c];
        (ch.from..ch.to)
            .map(|k| {
                let io = self.read(k);
                self.flash.service(0, &io).total()
            })
            .sum()
    }

    fn end(&self, c: usize) -> u64 {
        self.chunks[c].offset + self.chunks[c].bytes
    }

    /// Each request's service time under a pin set: from flash if its chunk is pinned, else
    /// from the HDD, whose head the unpinned requests move in launch order.
    pub fn latencies(&mut self, pins: &[bool]) -> Vec<Nanos> {
        let mut hdd = self.hdd.clone();
        let mut out = Vec::with_capacity(self.seq.len());
        for (c, &pinned) in pins.iter().enumerate().take(self.chunks.len()) {
            let ch = self.chunks[c];
            for k in ch.from..ch.to {
                let io = self.read(k);
                out.push(if pinned {
                    self.flash.service(0, &io).total()
                } else {
                    hdd.service(0, &io).total()
                });
            }
        }
        out
    }

    /// The latency model: what a pin set costs.
    pub fn evaluate(&mut self, pins: &[bool]) -> Pinned {
        let lat = self.latencies(pins);
        let (mut hdd, mut flash, mut bytes) = (0, 0, 0);
        for (c, ch) in self.chunks.iter().enumerate() {
            let t: Nanos = lat[ch.from..ch.to].iter().sum();
            if pins[c] {
                flash += t;
                bytes += ch.bytes;
            } else {
                hdd += t;
            }
        }
        Pinned {
            pins: pins.to_vec(),
            pinned_bytes: bytes,
            hdd,
            flash,
        }
    }

    /// Pin chunks in `order` while they fit in `budget` bytes.
    fn greedy(&mut self, order: impl Iterator<Item = usize>, budget: u64) -> Pinned {
        let mut pins = vec![false; self.chunks.len()];
        let mut left = budget;
        for c in order {
            if self.chunks[c].bytes <= left {
                pins[c] = true;
                left -= self.chunks[c].bytes;
            }
        }
        self.evaluate(&pins)
    }

    /// FCFP: first come, first pinned.
    pub fn fcfp(&mut self, budget: u64) -> Pinned {
        self.greedy(0..self.chunks.len(), budget)
    }

    /// SCF: small chunks first (ties in launch order).
    pub fn scf(&mut self, budget: u64) -> Pinned {
        let mut order: Vec<usize> = (0..self.chunks.len()).collect();
        order.sort_by_key(|&c| (self.chunks[c].bytes, c));
        self.greedy(order.into_iter(), budget)
    }

    /// The ILP (module docs), solved with microlp through good_lp; `seconds` is the wall
    /// time of both solves (a report, never part of a run's output).
    pub fn optimal(&mut self, budget: u64, window: usize) -> Result<Solved, String> {
        let t0 = std::time::Instant::now();
        let n = self.chunks.len();
        let window = window.max(1);
        // Nodes: 0 = source, 1..=n chunks, n + 1 = sink. Costs in µs: the solver's
        // tolerances are absolute, and nanoseconds in the millions would blur them.
        let mut edges: Vec<(usize, usize, f64)> = Vec::new();
        for i in 0..=n {
            for j in i + 1..=(i + window).min(n + 1) {
                let cost = if j == n + 1 {
                    0
                } else {
                    let head = (i > 0).then(|| self.end(i - 1));
                    self.hdd_time(head, j - 1)
                };
                edges.push((i, j, cost as f64 / 1e3));
            }
            if i + window < n + 1 {
                // Pinning the whole tail is a choice too.
                edges.push((i, n + 1, 0.0));
            }
        }
        let flash: Vec<f64> = (0..n).map(|c| self.flash_time(c) as f64 / 1e3).collect();
        let bytes: Vec<f64> = self.chunks.iter().map(|c| c.bytes as f64).collect();
        let solve = |integer: bool| -> Result<(f64, Vec<f64>), ResolutionError> {
            let mut vars = good_lp::variables!();
            let kind = |v: good_lp::VariableDefinition| {
                if integer {
                    v.binary()
                } else {
                    v.min(0.0).max(1.0)
                }
            };
            let x: Vec<Variable> = (0..n).map(|_| vars.add(kind(variable()))).collect();
            let y: Vec<Variable> = edges.iter().map(|_| vars.add(kind(variable()))).collect();
            let mut objective = Expression::from(0.0);
            for (e, &(_, _, c)) in edges.iter().enumerate() {
                objective += c * y[e];
            }
            let mut used = Expression::from(0.0);
            for c in 0..n {
                objective += flash[c] * x[c];
                used += bytes[c] * x[c];
            }
            let mut inflow = vec![Expression::from(0.0); n + 2];
            let mut outflow = vec![Expression::from(0.0); n + 2];
            for (e, &(i, j, _)) in edges.iter().enumerate() {
                outflow[i] += y[e];
                inflow[j] += y[e];
            }
            let mut model = vars.minimise(objective.clone()).using(microlp);
            model = model.with(constraint!(outflow[0].clone() == 1.0));
            model = model.with(constraint!(inflow[n + 1].clone() == 1.0));
            for c in 0..n {
                model = model.with(constraint!(inflow[c + 1].clone() + x[c] == 1.0));
                model = model.with(constraint!(outflow[c + 1].clone() + x[c] == 1.0));
            }
            model = model.with(constraint!(used <= budget as f64));
            let s = model.solve()?;
            let xs = x.iter().map(|&v| s.value(v)).collect();
            Ok((s.eval(&objective), xs))
        };
        let (objective, xs) = solve(true).map_err(|e| format!("pinning ILP: {e}"))?;
        let (bound, _) = solve(false).map_err(|e| format!("pinning LP relaxation: {e}"))?;
        let pins: Vec<bool> = xs.iter().map(|&v| v > 0.5).collect();
        let pinned = self.evaluate(&pins);
        Ok(Solved {
            pinned,
            objective: objective * 1e3,
            bound: bound * 1e3,
            seconds: t0.elapsed().as_secs_f64(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wattio_devices::flash::Flash;

    /// 1 GB disk, 6000 rpm (5 ms half rotation), 10 ms average seek (no curve: any move
    /// costs 10 ms + 5 ms), 50 MB/s. Flash: 1 ms per read plus 4096 B at 4.096 MB/s = 1 ms:
    /// 2 ms per 4 KiB read.
    fn devices() -> (ParametricHdd, Flash) {
        let hdd = ParametricHdd::from_toml(
            &toml::from_str(
                "capacity_bytes = 1_000_000_000\nrpm = 6000\navg_seek_ms = 10.0\nmedia_rate_mbps = 50",
            )
            .unwrap(),
        )
        .unwrap();
        let flash = Flash::from_toml(
            &toml::from_str(
                "capacity_bytes = 1_000_000_000\npage_bytes = 4096\nread_page_us = 0\nprogram_page_us = 0\nread_mbps = 4.096\nwrite_mbps = 4.096\noverhead_us = 1000",
            )
            .unwrap(),
        )
        .unwrap();
        (hdd, flash)
    }

    #[test]
    fn a_small_instance_has_the_hand_checked_optimum() {
        let (hdd, mut flash) = devices();
        const P: u64 = 4096;
        // Chunks (4 KiB reads; HDD transfer 81,920 ns each; a move costs 15 ms more):
        //   A at 0 (1 read; the head starts there: no move), B at 100 MB (1 read),
        //   C at 4 KiB (3 reads, right after A on the disk), D at 200 MB (1 read),
        //   E at 100 MB + 4 KiB (2 reads, right after B on the disk).
        let seq = [
            (0, P as u32),
            (100_000_000, P as u32),
            (P, P as u32),
            (2 * P, P as u32),
            (3 * P, P as u32),
            (200_000_000, P as u32),
            (100_000_000 + P, P as u32),
            (100_000_000 + 2 * P, P as u32),
        ];
        let mut h = Hybrid::new(&hdd, &mut flash, &seq);
        let sizes: Vec<u64> = h.chunks.iter().map(|c| c.bytes / P).collect();
        assert_eq!(sizes, vec![1, 1, 3, 1, 2]);
        let none = h.evaluate(&[false; 5]);
        assert_eq!(
            none.hdd,
            81_920 + 15_081_920 + 15_245_760 + 15_081_920 + 15_163_840
        );
        // Budget 2 pages. By hand: pinning B and D (2 ms each from flash) leaves A, C, E:
        // A, C right after it (245,760), one move to E (15,163,840): 81,920 + 245,760 +
        // 15,163,840 + 4,000,000 = 19,491,520 ns. Every other set of ≤ 2 pages leaves at
        // least two moves (checked exhaustively below).
        let best = h.optimal(2 * P, 8).unwrap();
        assert_eq!(best.pinned.pins, vec![false, true, false, true, false]);
        assert_eq!(best.pinned.total(), 19_491_520);
        assert!(
            (best.objective - 19_491_520.0).abs() < 1.0,
            "{}",
            best.objective
        );
        assert!(best.bound <= best.objective + 1.0, "{best:?}");
        // Exhaustively: no pin set within the budget does better.
        let mut brute = u64::MAX;
        for m in 0u32..32 {
            let pins: Vec<bool> = (0..5).map(|c| m & (1 << c) != 0).collect();
            let p = h.evaluate(&pins);
            if p.pinned_bytes <= 2 * P {
                brute = brute.min(p.total());
            }
        }
        assert_eq!(brute, 19_491_520);
        // FCFP pins A and B (first come, both fit); SCF the smallest, A and B (1 page each,
        // then D no longer fits): C, D and E each cost a move.
        let fcfp = h.fcfp(2 * P);
        assert_eq!(fcfp.pins, vec![true, true, false, false, false]);
        assert_eq!(
            fcfp.total(),
            4_000_000 + 15_245_760 + 15_081_920 + 15_163_840
        );
        assert_eq!(h.scf(2 * P).pins, vec![true, true, false, false, false]);
    }
}
