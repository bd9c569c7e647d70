//! Delay-hiding (Bi, Duan, Gniady): the DRAM ranks holding the OS buffer cache sleep in
//! self refresh after every file-I/O system call, and a predictor wakes the rank(s) the
//! call will copy from at system-call entry, so the 500 ns self-refresh exit overlaps the
//! kernel's 500 ns from entry to the copy.
//!
//! [`DelayHiding`] models one buffer cache over `ranks` ranks of a catalogue DRAM part and
//! takes file-I/O calls one at a time ([`DelayHiding::call`]): predict at entry, look the
//! blocks up (LRU, sequential placement: [`buffer_cache`]), turn wrongly woken ranks off at
//! the lookup (`-et`), copy, then every rank back to self refresh. Calls run back to back
//! on a clock of their own, so the ledgers cover file-I/O time only — the paper's "energy
//! from entry to exit". Every choice the paper leaves open is a [`DelayHidingConfig`] key,
//! documented in `docs/functions/delay-hiding.md`.

pub mod buffer_cache;
pub mod predictor;
pub mod writeback;

use buffer_cache::{BufferCache, Lookup};
use predictor::{Params, Predictor, Scheme};
use serde::Deserialize;
use wattio_core::time::secs_to_ns;
use wattio_core::Nanos;
use wattio_devices::dram::{Rank, RankSpec, SELF_REFRESH, STANDBY};
use writeback::{StorageIo, Writeback, WrittenBack};

/// A `[delay_hiding]` table.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct DelayHidingConfig {
    /// `isr`, `all`, `mra`, `f-mra`, `f-mfa`, `f-drd`, `af-mra`, `af-mfa`, `af-drd`,
    /// `f-drd-all`, and each but `isr`/`all` with `-et`.
    pub predictor: String,
    /// The catalogue DRAM part of a rank.
    pub dram: String,
    pub ranks: usize,
    /// Buffer-cache block size.
    pub block_bytes: u64,
    /// Buffers per rank; 0: the rank's bytes / `block_bytes` (a scaled cache sets it).
    pub blocks_per_rank: u32,
    /// System-call entry (file-id lookup) to the copy.
    pub entry_to_copy_ns: Nanos,
    /// Buffer-cache lookup (block located) to the copy.
    pub lookup_to_copy_ns: Nanos,
    /// Kernel time after the copy to the call's exit.
    pub exit_ns: Nanos,
    /// F-MFA, F-DRD: coverage threshold T (0: the single largest rank).
    pub threshold: f64,
    /// Adaptive predictors: the global coverage target.
    pub target: f64,
    pub threshold_start: f64,
    pub threshold_step: f64,
    /// `-et`: also wake, at the lookup, a needed rank the guess missed (hides
    /// `lookup_to_copy_ns` of its exit); the paper's "a wrong guess exposes the full
    /// wake-up" is `false`.
    pub et_wake_missed: bool,
    /// A block not in the cache is read from storage before the copy, and its rank is
    /// woken to receive it: the exit hides behind the storage access (whose time is not
    /// file-I/O memory time here), so only ranks of cached blocks need a prediction.
    /// `false`: missed blocks are served like cached ones (storage counted only).
    pub hide_miss_wakeup: bool,
    /// File ids must be below this (the per-file predictor state is bounded by it).
    pub max_files: u32,
    /// With storage in the loop ([`DelayHiding::enable_storage`]): a file dirty this long
    /// is written back at the flusher's next wakeup (Linux `dirty_expire_centisecs`).
    pub dirty_expire_s: f64,
    /// The flusher's period (Linux `dirty_writeback_centisecs`).
    pub writeback_interval_s: f64,
}

impl Default for DelayHidingConfig {
    fn default() -> Self {
        DelayHidingConfig {
            predictor: "af-mra-et".into(),
            dram: "ddr2-800-delay-hiding".into(),
            ranks: 4,
            block_bytes: 4096,
            blocks_per_rank: 0,
            entry_to_copy_ns: 500,
            lookup_to_copy_ns: 120,
            exit_ns: 0,
            threshold: 0.0,
            target: 0.95,
            threshold_start: 0.5,
            threshold_step: 0.05,
            et_wake_missed: false,
            hide_miss_wakeup: true,
            max_files: 1 << 24,
            dirty_expire_s: 30.0,
            writeback_interval_s: 5.0,
        }
    }
}

/// How the calls' predictions fared.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Predictions {
    /// Every rank the copy needed was woken.
    pub hit: u64,
    /// Nothing was woken (no guess: ISR, or a cold predictor).
    pub miss: u64,
    /// Ranks were woken but a needed one was not.
    pub wrong: u64,
    /// Ranks woken that the copy did not need.
    pub wasted_wakeups: u64,
    /// Calls every block of which came from storage (`hide_miss_wakeup`): no rank needed
    /// a prediction, so the call is none of hit, miss, wrong.
    pub all_from_storage: u64,
}

/// Buffer-cache energy split as the paper's figures.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct EnergySplit {
    pub io_j: f64,
    pub precharge_j: f64,
    pub powerdown_j: f64,
    pub self_refresh_j: f64,
    pub transitions_j: f64,
}

impl EnergySplit {
    pub fn total_j(&self) -> f64 {
        self.io_j + self.precharge_j + self.powerdown_j + self.self_refresh_j + self.transitions_j
    }
}

/// A run's results.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Report {
    pub calls: u64,
    /// Calls that moved no bytes (no rank touched, not predicted).
    pub empty_calls: u64,
    pub predictions: Predictions,
    pub cache_hits: u64,
    pub cache_misses: u64,
    /// File-I/O time split: the copies, the kernel path, and exposed wake-ups.
    pub memory_io_ns: Nanos,
    pub kernel_ns: Nanos,
    pub delay_ns: Nanos,
    pub energy: EnergySplit,
}

impl Report {
    /// File-I/O time normalized to the ideal (no delay).
    pub fn normalized_time(&self) -> f64 {
        let ideal = self.memory_io_ns + self.kernel_ns;
        if ideal == 0 {
            1.0
        } else {
            (ideal + self.delay_ns) as f64 / ideal as f64
        }
    }
}

pub struct DelayHiding {
    spec: RankSpec,
    ranks: Vec<Rank>,
    cache: BufferCache,
    predictor: Predictor,
    early_off: bool,
    cfg: DelayHidingConfig,
    clock: Nanos,
    /// Per call: the rank and bytes of each block, in order (reused).
    blocks: Vec<(u8, u64)>,
    order: Vec<u8>,
    report: Report,
    /// The buffer cache's storage traffic, when storage is in the loop.
    storage: Option<Writeback>,
    /// The trace's clock: when the next call arrives ([`DelayHiding::at`]).
    now: Nanos,
}

fn err(key: &str, msg: impl std::fmt::Display) -> String {
    format!("delay_hiding.{key}: {msg}")
}

fn unit(key: &str, v: f64) -> Result<f64, String> {
    if v.is_finite() && (0.0..=1.0).contains(&v) {
        Ok(v)
    } else {
        Err(err(key, format!("expected a number from 0 to 1, got {v}")))
    }
}

impl DelayHiding {
    pub fn new(cfg: &DelayHidingConfig) -> Result<DelayHiding, String> {
        let (scheme, early_off, forced_threshold) = predictor::parse(&cfg.predictor)
            .ok_or_else(|| {
                err(
                    "predictor",
                    format!(
                        "unknown predictor `{}` (expected one of: {}; each but isr and all also with -et)",
                        cfg.predictor,
                        predictor::SCHEMES.join(", ")
                    ),
                )
            })?;
        let spec = RankSpec::named(&cfg.dram).map_err(|e| err("dram", e))?;
        if !(1..=64).contains(&cfg.ranks) {
            return Err(err("ranks", format!("expected 1 to 64, got {}", cfg.ranks)));
        }
        if !(512..=(1 << 20)).contains(&cfg.block_bytes) {
            return Err(err(
                "block_bytes",
                format!("expected 512 to 1048576, got {}", cfg.block_bytes),
            ));
        }
        let per_rank = if cfg.blocks_per_rank == 0 {
            u32::try_from(spec.rank_bytes / cfg.block_bytes).unwrap_or(u32::MAX)
        } else {
            cfg.blocks_per_rank
        };
        let cache = BufferCache::new(cfg.ranks, per_rank).map_err(|e| err("blocks_per_rank", e))?;
        if cfg.lookup_to_copy_ns > cfg.entry_to_copy_ns {
            return Err(err(
                "lookup_to_copy_ns",
                format!(
                    "expected at most entry_to_copy_ns = {}, got {}",
                    cfg.entry_to_copy_ns, cfg.lookup_to_copy_ns
                ),
            ));
        }
        for (key, v) in [
            ("entry_to_copy_ns", cfg.entry_to_copy_ns),
            ("exit_ns", cfg.exit_ns),
        ] {
            if v > 1_000_000_000 {
                return Err(err(key, format!("expected at most 1 s (1e9 ns), got {v}")));
            }
        }
        let params = Params {
            threshold: forced_threshold.unwrap_or(unit("threshold", cfg.threshold)?),
            target: unit("target", cfg.target)?,
            threshold_start: unit("threshold_start", cfg.threshold_start)?,
            threshold_step: unit("threshold_step", cfg.threshold_step)?,
        };
        if cfg.max_files == 0 || cfg.max_files > 1 << 26 {
            return Err(err(
                "max_files",
                format!("expected 1 to {}, got {}", 1 << 26, cfg.max_files),
            ));
        }
        for (key, v, min) in [
            ("dirty_expire_s", cfg.dirty_expire_s, 0.0),
            ("writeback_interval_s", cfg.writeback_interval_s, 1e-3),
        ] {
            if !(v.is_finite() && (min..=86_400.0).contains(&v)) {
                return Err(err(
                    key,
                    format!("expected seconds from {min} to 86400, got {v}"),
                ));
            }
        }
        let ranks = (0..cfg.ranks)
            .map(|_| Rank::new(&spec, SELF_REFRESH, 0))
            .collect();
        Ok(DelayHiding {
            predictor: Predictor::new(scheme, params, cfg.ranks, cfg.max_files as usize),
            spec,
            ranks,
            cache,
            early_off,
            cfg: cfg.clone(),
            clock: 0,
            blocks: Vec::new(),
            order: Vec::new(),
            report: Report::default(),
            storage: None,
            now: 0,
        })
    }

    /// Put storage in the loop: from now on the buffer cache's misses and write-backs are
    /// queued as [`StorageIo`] ([`DelayHiding::storage_io`]). The memory model is the same
    /// either way (storage time is not file-I/O memory time here).
    pub fn enable_storage(&mut self) {
        self.storage = Some(Writeback::new(
            secs_to_ns(self.cfg.dirty_expire_s),
            secs_to_ns(self.cfg.writeback_interval_s),
        ));
    }

    /// The next call arrives at `now` on the trace's clock (not before the last): the
    /// flusher runs up to it.
    pub fn at(&mut self, now: Nanos) {
        self.now = self.now.max(now);
        if let Some(wb) = &mut self.storage {
            wb.advance(self.now);
        }
    }

    /// `fsync`/`fdatasync` of `file`: its dirty blocks are written back (no rank is
    /// touched: the data leaves from where it is, by DMA).
    pub fn sync(&mut self, file: u32) {
        if let Some(wb) = &mut self.storage {
            wb.sync_file(self.now, file);
        }
    }

    /// The trace has ended: the flusher writes back whatever is still dirty.
    pub fn finish_storage(&mut self) {
        if let Some(wb) = &mut self.storage {
            wb.finish();
        }
    }

    /// The storage I/O queued so far, oldest first (the caller drains it); `None` without
    /// storage in the loop.
    pub fn storage_io(&mut self) -> Option<&mut Vec<StorageIo>> {
        self.storage.as_mut().map(|wb| &mut wb.out)
    }

    /// Blocks written back so far, by cause.
    pub fn written_back(&self) -> WrittenBack {
        self.storage
            .as_ref()
            .map(|wb| wb.written_back)
            .unwrap_or_default()
    }

    pub fn scheme(&self) -> Scheme {
        self.predictor.scheme()
    }

    pub fn ranks(&self) -> &[Rank] {
        &self.ranks
    }

    pub fn spec(&self) -> &RankSpec {
        &self.spec
    }

    pub fn predictor(&self) -> &Predictor {
        &self.predictor
    }

    /// One read or write call of `len` bytes at `offset` of `file`. A call longer than
    /// the whole buffer cache is refused (it could only be a corrupt trace).
    pub fn call(&mut self, file: u32, offset: u64, len: u64, write: bool) -> Result<(), String> {
        self.report.calls += 1;
        if len == 0 {
            self.report.empty_calls += 1;
            return Ok(());
        }
        let bs = self.cfg.block_bytes;
        let end = offset
            .checked_add(len)
            .ok_or_else(|| format!("offset {offset} + len {len}: beyond 2^64"))?;
        let (first, last) = (offset / bs, (end - 1) / bs);
        let capacity = self.ranks.len() as u64 * u64::from(self.cache_blocks_per_rank());
        if last - first >= capacity {
            return Err(format!(
                "len {len}: expected at most the buffer cache ({capacity} blocks of {bs} B)"
            ));
        }
        let t0 = self.clock;
        let guess = self.predictor.guess(file)?;
        for r in Bits(guess) {
            self.ranks[r].set_state(&self.spec, t0, STANDBY);
        }
        // The lookup: locate (or place) every block of the call.
        self.blocks.clear();
        self.order.clear();
        let (mut used, mut fetched) = (0u64, 0u64);
        for b in first..=last {
            let lo = (b * bs).max(offset);
            let hi = ((b + 1) * bs).min(end);
            let found = self.cache.access((file, b));
            let r = found.rank() as u8;
            if let Lookup::Miss { rank, evicted } = found {
                if let Some((f, eb, r)) = evicted {
                    self.predictor.on_evict(f, r);
                    if let Some(wb) = &mut self.storage {
                        wb.evicted(self.now, f, eb);
                    }
                }
                if let Some(wb) = &mut self.storage {
                    // A write of the whole block needs nothing from storage; a partial
                    // one reads the block first, as the page cache does.
                    if !(write && hi - lo == bs) {
                        wb.out.push(StorageIo {
                            at: self.now,
                            file,
                            block: b,
                            write: false,
                        });
                    }
                }
                self.predictor.on_place(file, rank)?;
                fetched |= 1 << r;
            } else {
                used |= 1 << r;
            }
            self.blocks.push((r, hi - lo));
            self.order.push(r);
            if write {
                if let Some(wb) = &mut self.storage {
                    wb.dirty(self.now, file, b);
                }
            }
        }
        // `used`: ranks of cached blocks, which the guess had to cover.
        if self.cfg.hide_miss_wakeup {
            for r in Bits(fetched & !guess & !used) {
                self.ranks[r].set_state(&self.spec, t0, STANDBY);
            }
        } else {
            used |= fetched;
        }
        let guess_or_fetched = guess
            | if self.cfg.hide_miss_wakeup {
                fetched
            } else {
                0
            };
        let copy = t0 + self.cfg.entry_to_copy_ns;
        if self.early_off {
            let lookup = copy - self.cfg.lookup_to_copy_ns;
            for r in Bits(guess_or_fetched & !used & !fetched) {
                self.ranks[r].set_state(&self.spec, lookup, SELF_REFRESH);
            }
            if self.cfg.et_wake_missed {
                for r in Bits(used & !guess) {
                    self.ranks[r].set_state(&self.spec, lookup, STANDBY);
                }
            }
        }
        let mut t = copy;
        let mut io = 0;
        for &(r, bytes) in &self.blocks {
            let service = self.spec.burst_ns(bytes as u32);
            io += service;
            t = self.ranks[r as usize]
                .access(&self.spec, t, write, service)
                .done;
        }
        for r in Bits(used | guess_or_fetched) {
            self.ranks[r].set_state(&self.spec, t, SELF_REFRESH);
        }
        let exit = t + self.cfg.exit_ns;
        let kernel = self.cfg.entry_to_copy_ns + self.cfg.exit_ns;
        let rep = &mut self.report;
        rep.memory_io_ns += io;
        rep.kernel_ns += kernel;
        rep.delay_ns += (exit - t0) - io - kernel;
        let p = &mut rep.predictions;
        if used == 0 {
            p.all_from_storage += 1;
        } else if used & !guess == 0 {
            p.hit += 1;
        } else if guess == 0 {
            p.miss += 1;
        } else {
            p.wrong += 1;
        }
        p.wasted_wakeups += u64::from((guess & !used & !fetched).count_ones());
        self.predictor.update(file, guess, used, &self.order)?;
        // A wasted rank turned off early may still be finishing its exit.
        self.clock = self
            .ranks
            .iter()
            .map(Rank::busy_until)
            .fold(exit, Nanos::max);
        Ok(())
    }

    fn cache_blocks_per_rank(&self) -> u32 {
        if self.cfg.blocks_per_rank == 0 {
            u32::try_from(self.spec.rank_bytes / self.cfg.block_bytes).unwrap_or(u32::MAX)
        } else {
            self.cfg.blocks_per_rank
        }
    }

    /// The results so far: time split, predictions, and every rank's energy as of the
    /// end of the last call, split by what the rank was doing.
    pub fn report(&self) -> Report {
        let mut rep = self.report;
        rep.cache_hits = self.cache.hits;
        rep.cache_misses = self.cache.misses;
        let mut e = EnergySplit::default();
        for rank in &self.ranks {
            for row in rank.rows(&self.spec, self.clock) {
                let slot = if row.is_transition {
                    &mut e.transitions_j
                } else {
                    match row.slot.as_str() {
                        "read" | "write" => &mut e.io_j,
                        "standby" => &mut e.precharge_j,
                        "powerdown" => &mut e.powerdown_j,
                        _ => &mut e.self_refresh_j,
                    }
                };
                *slot += row.energy_j;
            }
        }
        rep.energy = e;
        rep
    }

    /// The end of the last call on the run's clock.
    pub fn clock(&self) -> Nanos {
        self.clock
    }
}

/// The set bits of a rank mask.
struct Bits(u64);

impl Iterator for Bits {
    type Item = usize;
    #[inline]
    fn next(&mut self) -> Option<usize> {
        if self.0 == 0 {
            return None;
        }
        let r = self.0.trailing_zeros() as usize;
        self.0 &= self.0 - 1;
        Some(r)
    }
}

#[cfg(test)]
mod tests;
