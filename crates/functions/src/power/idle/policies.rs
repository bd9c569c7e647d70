//! Online timeout policies.

use super::TimeoutPolicy;
use wattio_core::time::{ns_to_secs, secs_to_ns, Nanos};

/// A fixed timeout (`None`: never spin down — the always-on baseline as a policy).
#[derive(Clone, Debug)]
pub struct Fixed(pub Option<Nanos>);

impl TimeoutPolicy for Fixed {
    fn timeout(&mut self) -> Option<Nanos> {
        self.0
    }
}

/// Parameters of [`Adaptive`].
#[derive(Clone, Debug, PartialEq)]
pub struct AdaptiveParams {
    pub initial: Nanos,
    pub min: Nanos,
    pub max: Nanos,
    /// Multiplier applied after a bad spin-down.
    pub increase: f64,
    /// Subtracted after a good spin-down or a missed opportunity.
    pub decrease: Nanos,
}

impl Default for AdaptiveParams {
    fn default() -> Self {
        AdaptiveParams {
            initial: secs_to_ns(10.0),
            min: secs_to_ns(1.0),
            max: secs_to_ns(120.0),
            increase: 2.0,
            decrease: secs_to_ns(1.0),
        }
    }
}

/// Adaptive timeout in the manner of Douglis, Krishnan and Bershad ("Adaptive Disk
/// Spin-down Policies for Mobile Computers", 1995): the timeout grows multiplicatively after
/// a spin-down that did not pay (the disk slept for less than the break-even time, so the
/// spin-down cost energy and made a request wait) and shrinks additively after one that did
/// pay, or after an idle period longer than the break-even time that it missed.
/// The exact update rule is a documented choice (`docs/functions/spindown.md`).
#[derive(Clone, Debug)]
pub struct Adaptive {
    p: AdaptiveParams,
    timeout: Nanos,
    break_even: Nanos,
    bad: u64,
    good: u64,
}

impl Adaptive {
    pub fn new(p: AdaptiveParams) -> Adaptive {
        Adaptive {
            timeout: p.initial.clamp(p.min, p.max),
            p,
            break_even: 0,
            bad: 0,
            good: 0,
        }
    }

    pub fn current(&self) -> Nanos {
        self.timeout
    }
}

impl TimeoutPolicy for Adaptive {
    fn set_break_even(&mut self, break_even: Nanos) {
        self.break_even = break_even;
    }

    fn timeout(&mut self) -> Option<Nanos> {
        Some(self.timeout)
    }

    fn observe(&mut self, length: Nanos, timeout: Option<Nanos>, slept: bool) {
        let Some(t) = timeout else { return };
        if slept {
            let asleep = length.saturating_sub(t);
            if asleep < self.break_even {
                self.bad += 1;
                let grown = (self.timeout as f64 * self.p.increase).round() as Nanos;
                self.timeout = grown.clamp(self.p.min, self.p.max);
            } else {
                self.good += 1;
                self.timeout = self.timeout.saturating_sub(self.p.decrease).max(self.p.min);
            }
        } else if length > self.break_even {
            // Stayed up through a gap long enough to have paid: be more eager.
            self.timeout = self.timeout.saturating_sub(self.p.decrease).max(self.p.min);
        }
    }

    fn counters(&self) -> Vec<(String, f64)> {
        vec![
            ("adaptive_bad_spin_downs".into(), self.bad as f64),
            ("adaptive_good_spin_downs".into(), self.good as f64),
            ("adaptive_final_timeout_s".into(), ns_to_secs(self.timeout)),
        ]
    }
}

/// Parameters of [`Share`].
#[derive(Clone, Debug, PartialEq)]
pub struct ShareParams {
    /// Number of experts (fixed timeouts).
    pub experts: usize,
    /// Largest expert timeout, as a multiple of the break-even time.
    pub max_multiple: f64,
    /// Learning rate η.
    pub learning_rate: f64,
    /// Share rate α.
    pub share_rate: f64,
}

impl Default for ShareParams {
    fn default() -> Self {
        ShareParams {
            experts: 25,
            max_multiple: 1.0,
            learning_rate: 4.0,
            share_rate: 0.08,
        }
    }
}

/// Helmbold, Long, Sherrod and Sconyers' share algorithm ("A Dynamic Disk Spin-down
/// Technique for Mobile Computing", MobiCom 1996): a weighted vote of experts, each a fixed
/// timeout, updated with Herbster and Warmuth's fixed-share rule after every idle period.
///
/// Expert i with timeout tᵢ on an idle period of length L pays, in units of the break-even
/// time T (idle power × time, the spin-down/up cycle costing T):
///   loss = L / T if L ≤ tᵢ, else (tᵢ + T) / T.
/// Weights: wᵢ ← wᵢ·e^(−η·lossᵢ); pool = Σ wᵢ(1 − (1−α)^lossᵢ); wᵢ ← wᵢ(1−α)^lossᵢ + pool/n;
/// the timeout used is Σ wᵢtᵢ / Σ wᵢ. Experts are spaced evenly on (0, max_multiple·T].
#[derive(Clone, Debug)]
pub struct Share {
    p: ShareParams,
    experts: Vec<f64>,
    weights: Vec<f64>,
    break_even: f64,
}

impl Share {
    pub fn new(p: ShareParams) -> Share {
        let n = p.experts.max(1);
        Share {
            experts: vec![0.0; n],
            weights: vec![1.0 / n as f64; n],
            p,
            break_even: 0.0,
        }
    }

    /// The timeout the vote currently gives, in seconds.
    pub fn predicted(&self) -> f64 {
        let w: f64 = self.weights.iter().sum();
        self.experts
            .iter()
            .zip(&self.weights)
            .map(|(t, w)| t * w)
            .sum::<f64>()
            / w
    }
}

impl TimeoutPolicy for Share {
    fn set_break_even(&mut self, break_even: Nanos) {
        self.break_even = ns_to_secs(break_even);
        let n = self.experts.len();
        let top = self.p.max_multiple * self.break_even;
        for (i, t) in self.experts.iter_mut().enumerate() {
            *t = top * (i + 1) as f64 / n as f64;
        }
    }

    fn timeout(&mut self) -> Option<Nanos> {
        Some(secs_to_ns(self.predicted()))
    }

    fn observe(&mut self, length: Nanos, _timeout: Option<Nanos>, _slept: bool) {
        if self.break_even <= 0.0 {
            return;
        }
        let l = ns_to_secs(length);
        let keep = 1.0 - self.p.share_rate;
        let mut pool = 0.0;
        for (t, w) in self.experts.iter().zip(self.weights.iter_mut()) {
            let loss = if l <= *t { l } else { t + self.break_even } / self.break_even;
            *w *= (-self.p.learning_rate * loss).exp();
            let stay = keep.powf(loss);
            pool += *w * (1.0 - stay);
            *w *= stay;
        }
        let n = self.weights.len() as f64;
        let mut total = 0.0;
        for w in &mut self.weights {
            *w += pool / n;
            total += *w;
        }
        // Renormalize so long runs cannot underflow every weight to zero.
        if total > 0.0 && total.is_finite() {
            for w in &mut self.weights {
                *w /= total;
            }
        } else {
            let u = 1.0 / n;
            self.weights.iter_mut().for_each(|w| *w = u);
        }
    }

    fn counters(&self) -> Vec<(String, f64)> {
        vec![("share_final_timeout_s".into(), self.predicted())]
    }
}
