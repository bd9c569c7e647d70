//! The energy ledger: residency, entries and energy per power state (and per transition) of
//! one device. Time is integrated exactly in integer nanoseconds, so residency over all
//! slots sums to the ledger's span by construction; energy is derived at the end.

use crate::power::PowerSpec;
use crate::time::{ns_to_secs, Nanos};

#[derive(Clone, Debug)]
pub struct Ledger {
    /// Current slot: a state index, or `states + transition index` during a transition.
    cur: usize,
    /// The slot before `cur`: a device enters a state ahead of time (a seek's end is known
    /// when it starts), so a ledger read before `since` must give that time back to it.
    prev: usize,
    since: Nanos,
    start: Nanos,
    residency: Vec<Nanos>,
    entries: Vec<u64>,
    /// Energy charged per operation on top of state power (e.g. NAND program energy).
    op_energy_j: f64,
    spin_ups: u64,
}

/// One row of a closed ledger.
#[derive(Clone, Debug, PartialEq)]
pub struct LedgerRow {
    pub slot: String,
    pub is_transition: bool,
    pub watts: f64,
    pub residency_ns: Nanos,
    pub entries: u64,
    pub energy_j: f64,
}

impl Ledger {
    pub fn new(spec: &PowerSpec, initial: usize, start: Nanos) -> Ledger {
        let slots = spec.states.len() + spec.transitions.len();
        let mut entries = vec![0; slots];
        entries[initial] += 1;
        Ledger {
            cur: initial,
            prev: initial,
            since: start,
            start,
            residency: vec![0; slots],
            entries,
            op_energy_j: 0.0,
            spin_ups: 0,
        }
    }

    /// Move to `slot` at time `at` (must not precede the previous change).
    #[inline]
    pub fn enter(&mut self, slot: usize, at: Nanos) {
        debug_assert!(at >= self.since, "ledger time went backwards");
        self.residency[self.cur] += at - self.since;
        self.since = at;
        self.prev = self.cur;
        self.cur = slot;
        self.entries[slot] += 1;
    }

    /// Move to `slot` at `at`, which may fall inside an entry made ahead of time (a crash
    /// in the middle of a seek): that entry is undone as [`residency_at`](Self::residency_at)
    /// would read it, so residency still sums to the span.
    pub fn cut(&mut self, slot: usize, at: Nanos) {
        if at >= self.since {
            return self.enter(slot, at);
        }
        self.residency[self.prev] -= (self.since - at).min(self.residency[self.prev]);
        self.entries[self.cur] -= 1;
        self.since = at;
        self.cur = self.prev;
        self.enter(slot, at);
    }

    pub fn current(&self) -> usize {
        self.cur
    }

    pub fn add_op_energy(&mut self, j: f64) {
        self.op_energy_j += j;
    }

    pub fn count_spin_up(&mut self) {
        self.spin_ups += 1;
    }

    pub fn spin_ups(&self) -> u64 {
        self.spin_ups
    }

    pub fn op_energy_j(&self) -> f64 {
        self.op_energy_j
    }

    /// Residency per slot as of `now` (the current slot is charged up to `now`).
    pub fn residency_at(&self, now: Nanos) -> Vec<Nanos> {
        let mut r = self.residency.clone();
        if now >= self.since {
            r[self.cur] += now - self.since;
        } else {
            // Read in the middle of an entry made ahead of time (a run cut inside a seek):
            // the previous slot was charged up to `since`, only `now` has passed.
            r[self.prev] -= (self.since - now).min(r[self.prev]);
        }
        r
    }

    /// Entries per slot as of `now`: an entry made ahead of time has not happened yet.
    fn entries_at(&self, now: Nanos) -> Vec<u64> {
        let mut e = self.entries.clone();
        if now < self.since {
            e[self.cur] -= 1;
        }
        e
    }

    /// Total energy as of `now`.
    pub fn energy_at(&self, spec: &PowerSpec, now: Nanos) -> f64 {
        self.rows(spec, now).iter().map(|r| r.energy_j).sum::<f64>() + self.op_energy_j
    }

    /// The ledger as of `now`, one row per state then per transition.
    pub fn rows(&self, spec: &PowerSpec, now: Nanos) -> Vec<LedgerRow> {
        let res = self.residency_at(now);
        let entries = self.entries_at(now);
        let names = spec.slot_names();
        let watts = spec.slot_watts();
        let ns = spec.states.len();
        (0..res.len())
            .map(|i| {
                let is_transition = i >= ns;
                // A zero-latency transition has no residency: charge its energy per entry.
                let energy_j = if is_transition && spec.transitions[i - ns].latency == 0 {
                    spec.transitions[i - ns].energy_j * entries[i] as f64
                } else {
                    watts[i] * ns_to_secs(res[i])
                };
                LedgerRow {
                    slot: names[i].clone(),
                    is_transition,
                    watts: watts[i],
                    residency_ns: res[i],
                    entries: entries[i],
                    energy_j,
                }
            })
            .collect()
    }

    pub fn start(&self) -> Nanos {
        self.start
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::power::tests::laptop;

    #[test]
    fn a_read_inside_an_entry_made_ahead_of_time() {
        let spec = PowerSpec::from_def(&laptop()).unwrap();
        let (active, seek, idle) = (
            spec.active as usize,
            spec.seek.unwrap() as usize,
            spec.idle as usize,
        );
        let mut l = Ledger::new(&spec, idle, 0);
        // A service starts at 10 ns with a 6 ns seek: seek now, active from 16 ns.
        l.enter(seek, 10);
        l.enter(active, 16);
        // Cut at 13 ns: 10 ns idle, 3 ns seek, no active yet; the sum is the span.
        let r = l.residency_at(13);
        assert_eq!((r[idle], r[seek], r[active]), (10, 3, 0));
        assert_eq!(r.iter().sum::<u64>(), 13);
        let rows = l.rows(&spec, 13);
        assert_eq!(rows[active].entries, 0);
        assert_eq!(rows[seek].entries, 1);
        // At 20 ns the active entry has happened.
        let r = l.residency_at(20);
        assert_eq!((r[idle], r[seek], r[active]), (10, 6, 4));
        assert_eq!(l.rows(&spec, 20)[active].entries, 1);
    }

    #[test]
    fn a_cut_inside_an_entry_made_ahead_of_time() {
        let spec = PowerSpec::from_def(&laptop()).unwrap();
        let (active, seek, idle) = (
            spec.active as usize,
            spec.seek.unwrap() as usize,
            spec.idle as usize,
        );
        let mut l = Ledger::new(&spec, idle, 0);
        l.enter(seek, 10);
        l.enter(active, 16);
        // Power cut at 13 ns, back to idle: 10 ns idle, 3 ns seek, the active entry undone.
        l.cut(idle, 13);
        let r = l.residency_at(30);
        assert_eq!((r[idle], r[seek], r[active]), (10 + 17, 3, 0));
        assert_eq!(r.iter().sum::<u64>(), 30);
        let rows = l.rows(&spec, 30);
        assert_eq!(
            (rows[idle].entries, rows[seek].entries, rows[active].entries),
            (2, 1, 0)
        );
        // A cut at or after the last change is a plain entry.
        l.cut(active, 40);
        assert_eq!(l.residency_at(40).iter().sum::<u64>(), 40);
        assert_eq!(l.residency_at(40)[idle], 37);
    }
}
