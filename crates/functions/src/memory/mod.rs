//! Memory power policies: who decides when a DRAM rank sleeps, and where a process's pages
//! go (Huang 2006, ch. 2–4).
//!
//! A memory policy is a sans-I/O plug-in like a storage [`Function`](wattio_core::Function),
//! but with its own interface, [`MemPolicy`]: memory runs make tens of millions of accesses,
//! each a few nanoseconds of model work, so the policy is called directly by the memory
//! simulator (`wattio_engine::memory`) and commands the ranks through [`Mem`] rather than
//! through `Action`s and the kernel's event heap. Time still arrives with each call; a
//! policy never reads a clock.
//!
//! | kind | module | what decides |
//! |---|---|---|
//! | `nopm` | [`immediate`] | nothing: idle ranks stay in standby |
//! | `ipd` | [`immediate`] | powerdown as soon as a rank has no outstanding access |
//! | `isr` | [`immediate`] | self refresh as soon as a rank has no outstanding access |
//! | `hw` | [`hw`] | the per-rank self-refresh threshold predictor of Fig. 2.9 |
//! | `hw-sw` | [`hw`] | the same, with its history saved and restored per process (ch. 3) |
//! | `pavm` | [`pavm`] | active-rank sets at context switches, preferred-rank allocation (ch. 2) |
//! | `pavm+ipd` | [`pavm`] | PAVM, and IPD inside a process's active ranks |
//! | `pavm+hw-sw` | [`pavm`] | PAVM telling the context-aware PMU the active ranks (ch. 3) |
//!
//! Traffic reshaping (ch. 4, [`reshape`]: the most accessed pages moved onto hot ranks) is
//! not a power policy but the kernel thread's plan under any of them (`[memory.reshape]`:
//! HW_x is `hw` with `pages_pct = x`).
//!
//! Policies are built from a `[memory.policy]` table by [`build`]; every parameter is
//! documented in `docs/functions/memory-*.md`.

pub mod delay_hiding;
pub mod hw;
pub mod immediate;
pub mod pavm;
pub mod reshape;

use serde::Deserialize;
use wattio_core::{Nanos, PowerStateId};
use wattio_devices::dram::{Rank, RankSpec};

/// The ranks a policy commands, and their part.
pub struct Mem<'a> {
    pub spec: &'a RankSpec,
    pub ranks: &'a mut [Rank],
}

impl Mem<'_> {
    /// Command rank `r` into `state` at `now` (or when its current operation ends).
    #[inline]
    pub fn set(&mut self, r: usize, now: Nanos, state: PowerStateId) -> Nanos {
        self.ranks[r].set_state(self.spec, now, state)
    }
}

/// A memory power policy. Every hook has a default that does nothing, so a policy
/// implements only what it decides.
pub trait MemPolicy: Send {
    fn name(&self) -> &str;

    /// The rank a newly touched page of `pid` should come from, given each rank's free
    /// pages; `None` leaves the choice to the allocator's default placement.
    fn place(&mut self, _pid: u32, _shared: bool, _free: &[u64]) -> Option<usize> {
        None
    }

    /// A page of `pid` was mapped on rank `r` (or unmapped from it).
    fn on_map(&mut self, _pid: u32, _r: usize) {}
    fn on_unmap(&mut self, _pid: u32, _r: usize) {}
    /// `pid` exited (its pages have been unmapped).
    fn on_exit(&mut self, _pid: u32) {}
    /// `pid` is a kernel thread: it may touch any memory, whatever it has mapped (told
    /// before the run starts).
    fn on_kernel_thread(&mut self, _pid: u32) {}

    /// The scheduler decided, at `now`, to run `next` on `cpu` after `prev`; `running` is
    /// every CPU's process after the switch. The switch itself takes the simulator's
    /// `switch_ns` after `now`: a rank woken here is ready that much earlier.
    fn on_switch(
        &mut self,
        _now: Nanos,
        _cpu: usize,
        _prev: Option<u32>,
        _next: Option<u32>,
        _running: &[Option<u32>],
        _mem: &mut Mem,
    ) {
    }

    /// Just before an access by `pid` to rank `r` arrives at `now`.
    fn before_access(&mut self, _now: Nanos, _pid: u32, _r: usize, _mem: &mut Mem) {}

    /// Just after an access to rank `r` was served, ending at `done`.
    fn after_access(&mut self, _done: Nanos, _pid: u32, _r: usize, _mem: &mut Mem) {}

    /// Page migration, if the policy migrates (PAVM's kmigrated).
    fn migration(&self) -> Option<Migration> {
        None
    }

    /// During a migration pass: the rank a page now on rank `r` should move to, given each
    /// rank's free pages; `None` leaves it where it is. `pids`: the processes mapping it
    /// (one for a private page; every sharer of a page-cache page, which moves for all of
    /// them). The simulator copies the page (a read of every line on `r`, a write on the
    /// target, on the channel) and reports the move through `on_unmap` and `on_map` for
    /// each of them.
    fn migrate_to(
        &mut self,
        _pids: &[u32],
        _shared: bool,
        _r: usize,
        _free: &[u64],
    ) -> Option<usize> {
        None
    }

    /// The policy's periodic tick, if it has one (the PMU runs every tREFI).
    fn tick_period(&self) -> Option<Nanos> {
        None
    }
    fn on_tick(&mut self, _now: Nanos, _mem: &mut Mem) {}

    /// At the end of the run, before the ledgers close.
    fn on_end(&mut self, _now: Nanos, _mem: &mut Mem) {}

    fn counters(&self) -> Vec<(String, f64)> {
        Vec::new()
    }
}

/// A `[memory.policy]` table: `kind` and that kind's parameters.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PolicyConfig {
    pub kind: String,
    /// HW, HW–SW: the predictor (Fig. 2.9).
    #[serde(default)]
    pub hw: hw::HwConfig,
    /// PAVM and its combinations.
    #[serde(default)]
    pub pavm: pavm::PavmConfig,
}

/// Every kind [`build`] knows, with a one-line summary.
pub const KINDS: &[(&str, &str)] = &[
    ("nopm", "no power management: idle ranks stay in standby"),
    (
        "ipd",
        "immediate powerdown when a rank has no outstanding access",
    ),
    (
        "isr",
        "immediate self refresh when a rank has no outstanding access",
    ),
    (
        "hw",
        "per-rank self-refresh threshold predictor (Huang Fig. 2.9)",
    ),
    (
        "hw-sw",
        "context-aware PMU: HW's history per process x rank, saved at switches",
    ),
    (
        "pavm",
        "power-aware virtual memory: active ranks per process, preferred-rank allocation",
    ),
    (
        "pavm+ipd",
        "PAVM, with immediate powerdown inside the active ranks",
    ),
    (
        "pavm+hw-sw",
        "PAVM telling the context-aware PMU the active ranks",
    ),
];

/// How a policy's page-migration passes run (PAVM's kmigrated).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Migration {
    /// A pass is due every this many ns.
    pub period_ns: Nanos,
    /// Most pages one pass moves.
    pub pages_per_pass: usize,
    /// A due pass is skipped (the next one comes a period later) when the memory channel
    /// was busy more than this fraction of the time since the pass before was checked (run
    /// or skipped): the thesis's "checks to see if the system is busy, and if so, it goes
    /// back to sleep".
    /// 1.0: never skipped.
    pub busy_above: f64,
}

/// Build a policy for `ranks` ranks of `spec` run on `cpus` CPUs.
pub fn build(
    cfg: &PolicyConfig,
    spec: &RankSpec,
    ranks: usize,
    cpus: usize,
) -> Result<Box<dyn MemPolicy>, String> {
    use wattio_devices::dram::{POWERDOWN, SELF_REFRESH, STANDBY};
    let hw = || hw::Hw::new(&cfg.hw, spec, ranks, false, cpus);
    let hwsw = || hw::Hw::new(&cfg.hw, spec, ranks, true, cpus);
    let pavm = |inner: Option<Box<dyn MemPolicy>>| {
        pavm::Pavm::new(&cfg.pavm, ranks, inner).map(|p| Box::new(p) as Box<dyn MemPolicy>)
    };
    Ok(match cfg.kind.as_str() {
        "nopm" => Box::new(immediate::Immediate::new("nopm", STANDBY)),
        "ipd" => Box::new(immediate::Immediate::new("ipd", POWERDOWN)),
        "isr" => Box::new(immediate::Immediate::new("isr", SELF_REFRESH)),
        "hw" => Box::new(hw()?),
        "hw-sw" => Box::new(hwsw()?),
        "pavm" => pavm(None)?,
        "pavm+ipd" => pavm(Some(Box::new(immediate::Immediate::new("ipd", POWERDOWN))))?,
        "pavm+hw-sw" => pavm(Some(Box::new(hwsw()?)))?,
        other => {
            let names: Vec<&str> = KINDS.iter().map(|k| k.0).collect();
            return Err(format!(
                "memory.policy.kind: unknown policy `{other}` (expected one of: {})",
                names.join(", ")
            ));
        }
    })
}
