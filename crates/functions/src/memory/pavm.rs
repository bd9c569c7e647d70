//! PAVM, power-aware virtual memory (Huang 2006, ch. 2): the operating system keeps each
//! process's pages on few ranks and, at every context switch, powers down every rank the
//! running processes do not use.
//!
//! * **Active ranks α_i**: one counter per process and rank, +1 when a page of the process
//!   is mapped on the rank, −1 when it is unmapped; the rank is in α_i while its counter is
//!   positive (shared-library pages count for each process that maps them).
//! * **At a context switch**: the ranks in the union of the running processes' α go to
//!   standby, woken at the switch decision so the exit overlaps the switch itself
//!   (`early_wake`); every other rank goes to self refresh.
//! * **Preferred ranks ρ_i** (worst fit): a process's first page comes from the rank with
//!   the most free pages, which joins ρ_i; later pages come from ρ_i while it has room, then
//!   again from the rank with the most free pages, which joins ρ_i.
//! * **DLL aggregation** (`dll_aggregation`): shared-library pages ignore ρ and fill the
//!   ranks in order from rank 0, so the libraries every process maps sit on few ranks.
//!
//! Inside the active ranks PAVM alone leaves idle ranks in standby; `pavm+ipd` adds
//! immediate powerdown, `pavm+hw-sw` the context-aware PMU (the inner policy gets every
//! hook; PAVM's switch decision runs after the PMU has restored the incoming history).
//!
//! * **Page migration** (kmigrated, every `migrate_period_ms`, at most
//!   `migrate_pages_per_pass` pages a pass): a private page off ρ_i, or on a rank that
//!   joined ρ_i later than one that has room again, moves to the first rank of ρ_i with
//!   room; a shared page moves to an earlier rank already in every sharer's α. The simulator copies the
//!   page.
//!
//! Pages shared between processes: a trace that names its mappings' files gives every
//! process mapping a file page the same physical page (the simulator's page cache); such a
//! page counts in each mapper's α and moves only to a rank in all of theirs.
//!
//! * **Kernel threads** (`kind = "kernel-thread"` processes) may touch any memory: while
//!   one runs every rank is active.
//!
//! DMA (the thesis's §2.6 rule, buffers in the first rank) is the memory simulator's
//! allocator's (`memory.dma_zone`, `[[dma]]` devices): PAVM sees a transfer's lines as
//! accesses of pid 0 and is not told of the devices.

use super::{Mem, MemPolicy, Migration};
use serde::Deserialize;
use std::collections::HashMap;
use wattio_core::Nanos;
use wattio_devices::dram::{SELF_REFRESH, STANDBY};

#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct PavmConfig {
    /// Shared-library pages fill ranks from rank 0, ignoring ρ.
    pub dll_aggregation: bool,
    /// Wake the incoming process's active ranks at the switch decision.
    pub early_wake: bool,
    /// Period of the page-migration passes (kmigrated), in ms; 0: no migration. The
    /// thesis: every 3 s.
    pub migrate_period_ms: u64,
    /// Most pages one migration pass moves (the thesis bounds it without a number: 256
    /// pages, 1 MiB of 4 KiB pages, about 1.1 ms of DDR-400 channel time at 128 B lines).
    pub migrate_pages_per_pass: usize,
    /// A pass is skipped when the memory channel was busy more than this fraction of the
    /// time since the last pass was checked (the thesis: kmigrated "checks to see if the system
    /// is busy, and if so, it goes back to sleep", no measure given); 1.0: never skipped.
    pub migrate_busy_above: f64,
}

impl Default for PavmConfig {
    fn default() -> Self {
        PavmConfig {
            dll_aggregation: true,
            early_wake: true,
            migrate_period_ms: 3000,
            migrate_pages_per_pass: 256,
            migrate_busy_above: 0.5,
        }
    }
}

pub struct Pavm {
    name: String,
    cfg: PavmConfig,
    ranks: usize,
    alpha: HashMap<u32, Vec<u32>>,
    rho: HashMap<u32, Vec<usize>>,
    /// Kernel threads: every rank is active while one runs.
    kernel: Vec<u32>,
    inner: Option<Box<dyn MemPolicy>>,
    active: Vec<bool>,
    switches: u64,
    woken: u64,
    slept: u64,
}

impl Pavm {
    pub fn new(
        cfg: &PavmConfig,
        ranks: usize,
        inner: Option<Box<dyn MemPolicy>>,
    ) -> Result<Pavm, String> {
        let b = cfg.migrate_busy_above;
        if !(b > 0.0 && b <= 1.0) {
            return Err(format!(
                "memory.policy.pavm.migrate_busy_above: expected a fraction in (0, 1], got {b}"
            ));
        }
        let name = match &inner {
            None => "pavm".to_string(),
            Some(p) => format!("pavm+{}", p.name()),
        };
        Ok(Pavm {
            name,
            cfg: cfg.clone(),
            ranks,
            alpha: HashMap::new(),
            rho: HashMap::new(),
            kernel: Vec::new(),
            inner,
            active: vec![false; ranks],
            switches: 0,
            woken: 0,
            slept: 0,
        })
    }

    /// The active ranks of `pid` (α), in rank order.
    pub fn active_ranks(&self, pid: u32) -> Vec<usize> {
        self.alpha
            .get(&pid)
            .map(|c| (0..c.len()).filter(|&r| c[r] > 0).collect())
            .unwrap_or_default()
    }

    /// The preferred ranks of `pid` (ρ), in the order they were added.
    pub fn preferred_ranks(&self, pid: u32) -> &[usize] {
        self.rho.get(&pid).map(Vec::as_slice).unwrap_or(&[])
    }
}

/// The rank with the most free pages (the lowest on ties), if any has one.
fn most_free(free: &[u64]) -> Option<usize> {
    let mut best: Option<usize> = None;
    for (r, &f) in free.iter().enumerate() {
        if f > 0 && best.is_none_or(|b| f > free[b]) {
            best = Some(r);
        }
    }
    best
}

impl MemPolicy for Pavm {
    fn name(&self) -> &str {
        &self.name
    }

    fn place(&mut self, pid: u32, shared: bool, free: &[u64]) -> Option<usize> {
        if shared && self.cfg.dll_aggregation {
            return free.iter().position(|&f| f > 0);
        }
        let rho = self.rho.entry(pid).or_default();
        if let Some(&r) = rho.iter().find(|&&r| free[r] > 0) {
            return Some(r);
        }
        let r = most_free(free)?;
        rho.push(r);
        Some(r)
    }

    fn migration(&self) -> Option<Migration> {
        let (ms, pages) = (self.cfg.migrate_period_ms, self.cfg.migrate_pages_per_pass);
        (ms > 0 && pages > 0).then(|| Migration {
            period_ns: ms.saturating_mul(1_000_000),
            pages_per_pass: pages,
            busy_above: self.cfg.migrate_busy_above,
        })
    }

    /// kmigrated's rule: a private page off ρ moves into ρ (its first rank with room), and
    /// one on a later rank of ρ to an earlier one with room (the model's reading: in it
    /// every private page is placed in ρ, and a rank that joined ρ when the earlier ones
    /// were full is the one to empty once they have room again); a shared page moves to
    /// an earlier rank already active for every process mapping it, so no sharer's α
    /// grows.
    fn migrate_to(&mut self, pids: &[u32], shared: bool, r: usize, free: &[u64]) -> Option<usize> {
        if shared && self.cfg.dll_aggregation {
            let alphas: Option<Vec<&Vec<u32>>> = pids.iter().map(|p| self.alpha.get(p)).collect();
            let alphas = alphas.filter(|a| !a.is_empty())?;
            (0..r).find(|&t| free[t] > 0 && alphas.iter().all(|a| a[t] > 0))
        } else {
            let &[pid] = pids else {
                // A private page has one owner.
                return None;
            };
            // Only ranks before `r` in ρ (all of ρ if `r` is not in it).
            let rho = self.rho.get(&pid)?;
            let end = rho.iter().position(|&t| t == r).unwrap_or(rho.len());
            rho[..end].iter().copied().find(|&t| free[t] > 0)
        }
    }

    fn on_map(&mut self, pid: u32, r: usize) {
        let n = self.ranks;
        self.alpha.entry(pid).or_insert_with(|| vec![0; n])[r] += 1;
        if let Some(p) = &mut self.inner {
            p.on_map(pid, r);
        }
    }

    fn on_unmap(&mut self, pid: u32, r: usize) {
        if let Some(c) = self.alpha.get_mut(&pid) {
            c[r] = c[r].saturating_sub(1);
        }
        if let Some(p) = &mut self.inner {
            p.on_unmap(pid, r);
        }
    }

    fn on_kernel_thread(&mut self, pid: u32) {
        if !self.kernel.contains(&pid) {
            self.kernel.push(pid);
        }
        if let Some(p) = &mut self.inner {
            p.on_kernel_thread(pid);
        }
    }

    fn on_exit(&mut self, pid: u32) {
        self.alpha.remove(&pid);
        self.rho.remove(&pid);
        self.kernel.retain(|&k| k != pid);
        if let Some(p) = &mut self.inner {
            p.on_exit(pid);
        }
    }

    fn on_switch(
        &mut self,
        now: Nanos,
        cpu: usize,
        prev: Option<u32>,
        next: Option<u32>,
        running: &[Option<u32>],
        mem: &mut Mem,
    ) {
        if let Some(p) = &mut self.inner {
            p.on_switch(now, cpu, prev, next, running, mem);
        }
        self.switches += 1;
        self.active.iter_mut().for_each(|a| *a = false);
        for pid in running.iter().flatten() {
            if self.kernel.contains(pid) {
                // A kernel thread may touch any memory (the thesis: kernel threads power
                // all ranks).
                self.active.iter_mut().for_each(|a| *a = true);
                break;
            }
            if let Some(c) = self.alpha.get(pid) {
                for (a, &n) in self.active.iter_mut().zip(c) {
                    *a |= n > 0;
                }
            }
        }
        for r in 0..self.ranks {
            let state = mem.ranks[r].state();
            if self.active[r] {
                if self.cfg.early_wake && state == SELF_REFRESH {
                    mem.set(r, now, STANDBY);
                    self.woken += 1;
                }
            } else if state != SELF_REFRESH {
                mem.set(r, now, SELF_REFRESH);
                self.slept += 1;
            }
        }
    }

    #[inline]
    fn before_access(&mut self, now: Nanos, pid: u32, r: usize, mem: &mut Mem) {
        if let Some(p) = &mut self.inner {
            p.before_access(now, pid, r, mem);
        }
    }

    #[inline]
    fn after_access(&mut self, done: Nanos, pid: u32, r: usize, mem: &mut Mem) {
        if let Some(p) = &mut self.inner {
            p.after_access(done, pid, r, mem);
        }
    }

    fn tick_period(&self) -> Option<Nanos> {
        self.inner.as_ref().and_then(|p| p.tick_period())
    }

    fn on_tick(&mut self, now: Nanos, mem: &mut Mem) {
        if let Some(p) = &mut self.inner {
            p.on_tick(now, mem);
        }
    }

    fn on_end(&mut self, now: Nanos, mem: &mut Mem) {
        if let Some(p) = &mut self.inner {
            p.on_end(now, mem);
        }
    }

    fn counters(&self) -> Vec<(String, f64)> {
        let mut v = vec![
            ("switches".to_string(), self.switches as f64),
            ("ranks_woken_early".to_string(), self.woken as f64),
            ("ranks_put_to_self_refresh".to_string(), self.slept as f64),
        ];
        if let Some(p) = &self.inner {
            v.extend(p.counters());
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wattio_devices::dram::{Rank, RankSpec, POWERDOWN};

    /// A scripted mix on 4 ranks: placement by worst fit into ρ, DLL pages from rank 0,
    /// α from the mapped pages, and the switch powering exactly α of the incoming process.
    #[test]
    fn active_sets_and_preferred_allocation() {
        let spec = RankSpec::named("ddr-400-thesis").unwrap();
        let mut p = Pavm::new(&PavmConfig::default(), 4, None).unwrap();
        let mut free = vec![10u64, 30, 20, 30];
        let alloc = |p: &mut Pavm, pid: u32, shared: bool, free: &mut [u64]| {
            let r = p.place(pid, shared, free).unwrap();
            free[r] -= 1;
            p.on_map(pid, r);
            r
        };
        // Process 1: worst fit picks rank 1 (30 free, lowest of the tie), then stays there.
        assert_eq!(alloc(&mut p, 1, false, &mut free), 1);
        for _ in 0..28 {
            assert_eq!(alloc(&mut p, 1, false, &mut free), 1);
        }
        // Process 2 starts: rank 3 has the most free now.
        assert_eq!(alloc(&mut p, 2, false, &mut free), 3);
        // Rank 1 fills up (1 left): process 1's next page, then it spills to the most free
        // rank (3: 29 left), which joins ρ_1.
        assert_eq!(alloc(&mut p, 1, false, &mut free), 1);
        assert_eq!(free[1], 0);
        assert_eq!(alloc(&mut p, 1, false, &mut free), 3);
        assert_eq!(p.preferred_ranks(1), &[1, 3]);
        // Shared-library pages go to rank 0 whoever touches them.
        assert_eq!(alloc(&mut p, 2, true, &mut free), 0);
        assert_eq!(p.active_ranks(1), vec![1, 3]);
        assert_eq!(p.active_ranks(2), vec![0, 3]);
        // Unmapping process 1's only page on rank 3 shrinks α_1.
        p.on_unmap(1, 3);
        assert_eq!(p.active_ranks(1), vec![1]);

        // Switch to process 2 at 1000: ranks 0 and 3 ready, 1 and 2 in self refresh.
        let mut ranks: Vec<Rank> = (0..4).map(|_| Rank::new(&spec, STANDBY, 0)).collect();
        ranks[3] = Rank::new(&spec, SELF_REFRESH, 0);
        let mut mem = Mem {
            spec: &spec,
            ranks: &mut ranks,
        };
        p.on_switch(1000, 0, Some(1), Some(2), &[Some(2)], &mut mem);
        let states: Vec<_> = mem.ranks.iter().map(|r| r.state()).collect();
        assert_eq!(states, vec![STANDBY, SELF_REFRESH, SELF_REFRESH, STANDBY]);
        // Rank 3 was woken early: ready at 2000, so an access after the switch is not
        // delayed.
        let a = mem.ranks[3].access(&spec, 2000, false, 70);
        assert_eq!((a.start, a.woke_from), (2000, None));
        // Process 2 exits: nothing is active at the next switch to no process.
        p.on_exit(2);
        p.on_switch(5000, 0, Some(2), None, &[None], &mut mem);
        assert!(mem.ranks.iter().all(|r| r.state() == SELF_REFRESH));
        assert_eq!(p.active_ranks(2), Vec::<usize>::new());
    }

    /// kmigrated's choices on a scripted mix of 3 ranks: a private page on a later rank of ρ
    /// goes back to an earlier one with room, never forward; a shared page goes to an
    /// earlier rank already in α, never to one that would grow α.
    #[test]
    fn migration_targets() {
        let mut q = Pavm::new(&PavmConfig::default(), 3, None).unwrap();
        assert_eq!(
            q.migration(),
            Some(Migration {
                period_ns: 3_000_000_000,
                pages_per_pass: 256,
                busy_above: 0.5
            })
        );
        // Process 1 fills rank 0 (the most free).
        let mut free = vec![9u64, 5, 1];
        for _ in 0..9 {
            let r = q.place(1, false, &free).unwrap();
            free[r] -= 1;
            q.on_map(1, r);
        }
        // Rank 0 is full: the next page opens rank 1 (most free), which joins ρ.
        assert_eq!(q.place(1, false, &free), Some(1));
        q.on_map(1, 1);
        assert_eq!(q.preferred_ranks(1), &[0, 1]);
        // Rank 0 has room again: rank 1's pages go back; rank 0's stay.
        let free = vec![2u64, 4, 1];
        assert_eq!(q.migrate_to(&[1], false, 1, &free), Some(0));
        assert_eq!(q.migrate_to(&[1], false, 0, &free), None);
        // No room before it in ρ: stays. Off ρ (rank 2): into ρ's first rank with room.
        assert_eq!(q.migrate_to(&[1], false, 1, &[0, 4, 1]), None);
        assert_eq!(q.migrate_to(&[1], false, 2, &[0, 4, 1]), Some(1));
        // Shared pages (DLL aggregation): to an earlier rank in α only.
        q.on_map(1, 2);
        assert_eq!(q.active_ranks(1), vec![0, 1, 2]);
        assert_eq!(q.migrate_to(&[1], true, 2, &[0, 3, 0]), Some(1));
        q.on_unmap(1, 1);
        assert_eq!(q.migrate_to(&[1], true, 2, &[0, 3, 0]), None);
        // A page-cache page of processes 1 (α {0, 2}) and 2 (α {1, 2}) on rank 2: no
        // earlier rank is in both αs; once rank 0 is in process 2's too, there.
        q.on_map(2, 1);
        q.on_map(2, 2);
        assert_eq!(q.migrate_to(&[1, 2], true, 2, &[1, 3, 0]), None);
        q.on_map(2, 0);
        assert_eq!(q.migrate_to(&[1, 2], true, 2, &[1, 3, 0]), Some(0));
        assert_eq!(q.migrate_to(&[1, 2, 7], true, 2, &[1, 3, 0]), None);
        // A private page has one owner.
        assert_eq!(q.migrate_to(&[1, 2], false, 2, &[1, 3, 0]), None);
        // An unknown process has nothing to move; migration can be switched off.
        assert_eq!(q.migrate_to(&[7], false, 2, &[5, 5, 5]), None);
        let off = PavmConfig {
            migrate_period_ms: 0,
            ..PavmConfig::default()
        };
        assert_eq!(Pavm::new(&off, 3, None).unwrap().migration(), None);
        // The busy limit is a fraction of the time.
        for bad in [0.0, -0.5, 1.5, f64::NAN] {
            let c = PavmConfig {
                migrate_busy_above: bad,
                ..PavmConfig::default()
            };
            let e = Pavm::new(&c, 3, None).err().unwrap();
            assert!(
                e.starts_with("memory.policy.pavm.migrate_busy_above: expected"),
                "{e}"
            );
        }
    }

    #[test]
    fn inner_policy_gets_the_hooks() {
        let spec = RankSpec::named("ddr-400-thesis").unwrap();
        let ipd = super::super::immediate::Immediate::new("ipd", POWERDOWN);
        let mut p = Pavm::new(&PavmConfig::default(), 1, Some(Box::new(ipd))).unwrap();
        assert_eq!(p.name(), "pavm+ipd");
        let mut ranks = vec![Rank::new(&spec, STANDBY, 0)];
        let mut mem = Mem {
            spec: &spec,
            ranks: &mut ranks,
        };
        let a = mem.ranks[0].access(&spec, 0, false, 70);
        p.after_access(a.done, 1, 0, &mut mem);
        assert_eq!(mem.ranks[0].state(), POWERDOWN);
    }
}
