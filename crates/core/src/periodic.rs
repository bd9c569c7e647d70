//! A periodic timer for functions that act on a schedule (PARAID's load monitor, EXCES's
//! quanta, FS2's epochs): armed at start, re-armed at each expiry on the fixed grid
//! start + k·period (no drift from late delivery; periods the executor skipped are not
//! replayed, so a late executor runs the function once, not once per missed period).

use crate::function::{Actions, TimerId};
use crate::time::Nanos;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Periodic {
    timer: TimerId,
    period: Nanos,
    next: Nanos,
}

impl Periodic {
    /// `period` must be > 0.
    pub fn new(timer: TimerId, period: Nanos) -> Periodic {
        assert!(period > 0, "a periodic timer needs a positive period");
        Periodic {
            timer,
            period,
            next: 0,
        }
    }

    pub fn period(&self) -> Nanos {
        self.period
    }

    /// Arm the first expiry one period after `now`.
    pub fn start(&mut self, now: Nanos, out: &mut Actions) {
        self.next = now.saturating_add(self.period);
        out.set_timer(self.timer, self.next);
    }

    /// Is `timer` this one's expiry? If so, arm the next one on the grid after `now`.
    pub fn fired(&mut self, now: Nanos, timer: TimerId, out: &mut Actions) -> bool {
        if timer != self.timer {
            return false;
        }
        let behind = now.saturating_sub(self.next) / self.period;
        self.next = self
            .next
            .saturating_add((behind + 1).saturating_mul(self.period));
        out.set_timer(self.timer, self.next);
        true
    }

    pub fn stop(&mut self, out: &mut Actions) {
        out.cancel_timer(self.timer);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::function::Action;

    #[test]
    fn stays_on_its_grid_when_delivered_late() {
        let mut p = Periodic::new(7, 10);
        let mut out = Actions::new();
        p.start(3, &mut out);
        assert!(!p.fired(13, 8, &mut out), "another timer");
        assert!(p.fired(13, 7, &mut out));
        // Delivered 4 ns late at 27 (due 23): the next is 33, not 37.
        assert!(p.fired(27, 7, &mut out));
        // Delivered two periods late at 55 (due 33): 43 and 53 are skipped, next 63.
        assert!(p.fired(55, 7, &mut out));
        let at: Vec<_> = out
            .as_slice()
            .iter()
            .map(|a| match a {
                Action::SetTimer { timer: 7, at } => *at,
                a => panic!("{a:?}"),
            })
            .collect();
        assert_eq!(at, vec![13, 23, 33, 63]);
    }
}
