//! NOPM, IPD and ISR (Huang 2006, §2.5 and §3.4.1): the static policies. The memory
//! controller puts a rank into a fixed state as soon as it has no outstanding access
//! (NOPM: standby, so it does nothing).

use super::{Mem, MemPolicy};
use wattio_core::{Nanos, PowerStateId};
use wattio_devices::dram::STANDBY;

pub struct Immediate {
    name: &'static str,
    state: PowerStateId,
}

impl Immediate {
    pub fn new(name: &'static str, state: PowerStateId) -> Immediate {
        Immediate { name, state }
    }
}

impl MemPolicy for Immediate {
    fn name(&self) -> &str {
        self.name
    }

    #[inline]
    fn after_access(&mut self, done: Nanos, _pid: u32, r: usize, mem: &mut Mem) {
        if self.state != STANDBY {
            mem.set(r, done, self.state);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wattio_devices::dram::{Rank, RankSpec, POWERDOWN, SELF_REFRESH};

    #[test]
    fn ipd_and_isr_sleep_after_every_access() {
        let spec = RankSpec::named("ddr-400-thesis").unwrap();
        for (state, exit) in [(POWERDOWN, 5), (SELF_REFRESH, 1000), (STANDBY, 0)] {
            let mut ranks = vec![Rank::new(&spec, STANDBY, 0)];
            let mut p = Immediate::new("x", state);
            let mut mem = Mem {
                spec: &spec,
                ranks: &mut ranks,
            };
            let a = mem.ranks[0].access(&spec, 0, false, 70);
            p.after_access(a.done, 1, 0, &mut mem);
            assert_eq!(mem.ranks[0].state(), state);
            let b = mem.ranks[0].access(&spec, 1000, false, 70);
            assert_eq!(b.start, 1000 + exit);
        }
    }
}
