//! Page popularity: decayed per-quantum access counts (EXCES §4.1, §5.1).
//!
//! The paper ranks page P by rank(P) = Σ a_i · f(t_i): accesses per quantum weighted by an
//! exponential decay of their age. It keeps the timestamps of the last `H_SIZE` = 4 accesses
//! (`last_acc`) and folds them into the rank when the array is full. Re-decaying every
//! page at every quantum would cost O(pages) per quantum, so the weights are kept in
//! *absolute* time instead: an access in quantum q weighs 2^((q − base)/h) (h: half-life in
//! quanta). Relative to now (quantum Q) that is 2^(−(Q − q)/h) times the common factor
//! 2^((Q − base)/h), so every page's rank is the paper's decayed sum scaled by the same
//! number and their order is the paper's order. The weights grow without bound, so the
//! layer moves `base` forward (and scales every rank down) before they leave f64's range.

use wattio_core::time::Nanos;

/// Accesses remembered before they are folded into the rank (the paper's `H_SIZE`).
pub const H_SIZE: usize = 4;

/// Move `base` forward once the newest weight reaches 2^RESCALE_AT (far from f64's 2^1023,
/// so sums of many weights stay finite).
pub const RESCALE_AT: f64 = 256.0;

/// The decay function's clock: quanta since the start and the weight of each.
#[derive(Clone, Debug, PartialEq)]
pub struct Decay {
    pub start: Nanos,
    pub quantum: Nanos,
    /// Half-life in quanta.
    pub half_life: f64,
    /// The quantum whose weight is 1.
    pub base: u32,
}

impl Decay {
    pub fn new(quantum: Nanos, half_life: Nanos) -> Decay {
        Decay {
            start: 0,
            quantum,
            half_life: half_life as f64 / quantum as f64,
            base: 0,
        }
    }

    /// The quantum `now` falls in (saturating at u32::MAX: 136 years of 1 s quanta).
    pub fn quantum_of(&self, now: Nanos) -> u32 {
        (now.saturating_sub(self.start) / self.quantum).min(u32::MAX as u64) as u32
    }

    /// The weight of one access in quantum `q`.
    pub fn weight(&self, q: u32) -> f64 {
        ((q as f64 - self.base as f64) / self.half_life).exp2()
    }

    /// If quantum `q`'s weight has grown too large: the factor to scale every rank by as
    /// `base` moves to `q`.
    pub fn rescale(&mut self, q: u32) -> Option<f64> {
        let age = (q.saturating_sub(self.base)) as f64 / self.half_life;
        if age < RESCALE_AT {
            return None;
        }
        self.base = q;
        Some((-age).exp2())
    }
}

/// The paper's `page_ranker_t`: the folded rank and the last accesses not yet folded. How
/// many of `last_acc` are pending is the caller's byte (`filled`, 0 to `H_SIZE` − 1): kept
/// beside its other small fields, it lets EXCES's page entry stay at 32 bytes, half a
/// cache line.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PageRanker {
    /// Σ of the folded accesses' weights (the paper's `rank` + decomposed `tmp_rank`).
    pub rank: f64,
    last_acc: [u32; H_SIZE],
}

impl PageRanker {
    /// A page never accessed: rank 0, nothing pending.
    pub const fn new() -> PageRanker {
        PageRanker {
            rank: 0.0,
            last_acc: [0; H_SIZE],
        }
    }

    /// Record an access in quantum `q`, `filled` accesses being pending. When it fills
    /// `last_acc`, the accesses are weighed and folded into the rank: returns true (the
    /// rank changed).
    pub fn access(&mut self, filled: &mut u8, q: u32, decay: &Decay) -> bool {
        self.last_acc[*filled as usize] = q;
        *filled += 1;
        if (*filled as usize) < H_SIZE {
            return false;
        }
        *filled = 0;
        self.rank += self.last_acc.iter().map(|&t| decay.weight(t)).sum::<f64>();
        true
    }
}
