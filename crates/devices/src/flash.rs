//! A simple flash device (`model = "flash"`): CompactFlash cards, USB sticks and other
//! devices whose datasheets give only per-page latencies and interface bandwidth.
//!
//! T = overhead + pages · page latency (read or program) + len / interface bandwidth, where
//! pages = ⌈len / page_bytes⌉. Erase is folded into the program latency; a device with a
//! page-mapped FTL worth modelling should use the `ssd` model.
//!
//! Timing parameters: `capacity_bytes`, `page_bytes`, `read_page_us`, `program_page_us`,
//! `read_mbps`, `write_mbps`, optional `overhead_us` (latencies at most 1 s, rates at least
//! 1 kB/s).
//!
//! ## Log-block FTL (`ftl = "log-block"`)
//!
//! The sustained rates of a card or stick are measured writing sequentially; small writes
//! scattered over it are far slower, because the controllers of the period map whole erase
//! blocks and keep only a few *log blocks* for pages written out of place (BAST: Kim et al.,
//! "A space-efficient flash translation layer for CompactFlash systems", IEEE Trans.
//! Consumer Electronics 48(2), 2002; Boboila and Desnoyers, FAST 2010, reverse-engineered
//! the FTLs of USB drives from their latencies). With `ftl = "log-block"` the model keeps
//! that state:
//!
//! * a write's NAND pages (`ftl_page_bytes`) go, block by block, into the log block of
//!   their data block (`ftl_pages_per_block` pages), taken when the block has none — the
//!   least recently written log is merged first when all `ftl_log_blocks` are in use;
//! * a log is *in order* while its slot i holds page i of its block. A full in-order log
//!   replaces its data block (a switch merge: no copy); an in-order log evicted before it
//!   fills takes the rest of its block's pages from the data block (a partial merge:
//!   pages_per_block − used copies); any other log is merged by copying every page of the
//!   block into a fresh one (a full merge: pages_per_block copies and one erase more);
//! * a copy costs `ftl_copy_page_us` (an internal copy-back, tR + tPROG, no bus transfer),
//!   an erase `ftl_erase_block_us`, both on top of the write's own time. A switch merge's
//!   erase (of the old data block) is what sequential writing pays too, so it is taken to
//!   be inside the sustained write rate and adds nothing; a full merge's second erase (of
//!   the log block) is charged.
//!
//! Merges happen in the foreground, in the service time of the write that caused them, as
//! on a card without a background cleaner. Every logical page is taken to hold data (a
//! formatted, used card: a merge copies the whole block), reads cost the same whether a
//! page is in a log or its data block, and DISCARD does not invalidate pages (cards of the
//! period had no TRIM). Counters: merges by kind, pages copied, blocks erased.

use crate::params::{check_keys, count, f64_key, latency_us, opt_f64, rate_mbps};
use wattio_core::device::{Service, Timing};
use wattio_core::io::{Io, Op};
use wattio_core::time::{secs_to_ns, Nanos};

#[derive(Clone, Debug)]
pub struct Flash {
    capacity: u64,
    page: u64,
    read_page: Nanos,
    program_page: Nanos,
    read_bps: f64,
    write_bps: f64,
    overhead: Nanos,
    ftl: Option<LogBlockFtl>,
}

const KEYS: &[&str] = &[
    "capacity_bytes",
    "page_bytes",
    "read_page_us",
    "program_page_us",
    "read_mbps",
    "write_mbps",
    "overhead_us",
    "ftl",
    "ftl_page_bytes",
    "ftl_pages_per_block",
    "ftl_log_blocks",
    "ftl_copy_page_us",
    "ftl_erase_block_us",
];

/// The most log blocks a model keeps: real controllers of this kind keep a handful, and a
/// write looks at every log to find its block's (and an eviction for the least recent).
pub const MAX_LOG_BLOCKS: u64 = 4096;

impl Flash {
    pub fn from_toml(t: &toml::Table) -> Result<Flash, String> {
        check_keys(t, KEYS)?;
        Ok(Flash {
            capacity: count(t, "capacity_bytes")?,
            page: count(t, "page_bytes")?,
            read_page: latency_us("read_page_us", f64_key(t, "read_page_us")?)?,
            program_page: latency_us("program_page_us", f64_key(t, "program_page_us")?)?,
            read_bps: rate_mbps(t, "read_mbps")?,
            write_bps: rate_mbps(t, "write_mbps")?,
            overhead: latency_us("overhead_us", opt_f64(t, "overhead_us")?.unwrap_or(0.0))?,
            ftl: LogBlockFtl::from_toml(t)?,
        })
    }
}

pub fn timing_from_toml(t: &toml::Table) -> Result<Box<dyn Timing>, String> {
    Ok(Box::new(Flash::from_toml(t)?))
}

impl Timing for Flash {
    fn capacity(&self) -> u64 {
        self.capacity
    }

    fn service(&mut self, _start: Nanos, io: &Io) -> Service {
        let pages = (io.len as u64).div_ceil(self.page);
        let (per_page, bps) = match io.op {
            Op::Read => (self.read_page, self.read_bps),
            Op::Write => (self.program_page, self.write_bps),
            Op::Flush | Op::Discard => {
                return Service {
                    overhead_ns: self.overhead,
                    ..Service::default()
                }
            }
        };
        let merges = match (&mut self.ftl, io.op) {
            // Past the end the I/O fails in the runtime; the FTL keeps to the card.
            (Some(ftl), Op::Write)
                if io.len > 0
                    && io
                        .offset
                        .checked_add(io.len as u64)
                        .is_some_and(|end| end <= self.capacity) =>
            {
                ftl.write(io.offset, io.len as u64)
            }
            _ => 0,
        };
        Service {
            transfer_ns: pages
                .saturating_mul(per_page)
                .saturating_add(secs_to_ns(io.len as f64 / bps))
                .saturating_add(merges),
            overhead_ns: self.overhead,
            ..Service::default()
        }
    }

    fn counters(&self) -> Vec<(String, f64)> {
        match &self.ftl {
            None => Vec::new(),
            Some(f) => vec![
                ("ftl_switch_merges".into(), f.switch_merges as f64),
                ("ftl_partial_merges".into(), f.partial_merges as f64),
                ("ftl_full_merges".into(), f.full_merges as f64),
                ("ftl_pages_copied".into(), f.copied as f64),
                ("ftl_blocks_erased".into(), f.erased as f64),
            ],
        }
    }
}

impl Flash {
    /// The log-block FTL's bookkeeping agrees with itself (tests and the fuzz target).
    pub fn check_invariants(&self) -> Result<(), String> {
        let Some(f) = &self.ftl else { return Ok(()) };
        if f.logs.len() > f.max_logs {
            return Err(format!("{} logs, at most {}", f.logs.len(), f.max_logs));
        }
        for (i, log) in f.logs.iter().enumerate() {
            if f.find(log.block) != Some(i) {
                return Err(format!("block {} has two logs", log.block));
            }
            // A log is merged the moment it fills, and holds a page from when it is taken.
            if log.used == 0 || log.used >= f.pages_per_block {
                return Err(format!("log {i} holds {} pages", log.used));
            }
        }
        let merges = f.switch_merges + f.partial_merges + f.full_merges;
        if f.erased != merges + f.full_merges {
            return Err(format!("{} erases for {merges} merges", f.erased));
        }
        Ok(())
    }
}

/// Fuzz entry (`fuzz/fuzz_targets/flash_timing.rs` and the corpus test): `data` is a
/// `[timing]` table as TOML text. Bad input must give an error, never a panic; a model
/// that builds is driven through writes and reads derived from the input's bytes, and
/// its FTL checked afterwards.
#[doc(hidden)]
pub fn fuzz_timing_toml(data: &[u8]) {
    let Some(t) = crate::fuzz_input::timing_table(data) else {
        return;
    };
    let Ok(mut f) = Flash::from_toml(&t) else {
        return;
    };
    let cap = f.capacity;
    let mut stream = crate::fuzz_input::Stream::of(data);
    for i in 0..2000 {
        let r = stream.next();
        let op = match r % 8 {
            0 => Op::Discard,
            1..=4 => Op::Write,
            _ => Op::Read,
        };
        // Mostly in range (where a card's writes gather), sometimes anywhere.
        let offset = match (r >> 8) % 16 {
            0 => u64::MAX - (r >> 16) % 4096,
            1..=8 => (r >> 16) % cap.min(1 << 22),
            _ => (r >> 16) % cap,
        };
        let len = ((r >> 40) % (1 << 18)) as u32;
        let svc = f.service(0, &Io::own(i, op, 0, offset, len));
        assert!(svc.total() < 1 << 62, "runaway time {svc:?}");
    }
    if let Err(e) = f.check_invariants() {
        panic!("FTL inconsistent: {e}");
    }
}

/// One log block: which data block it serves, how many of its pages are written, whether
/// slot i holds page i so far, and when it was last written (for the LRU eviction).
#[derive(Clone, Copy, Debug)]
struct Log {
    block: u64,
    used: u64,
    in_order: bool,
    stamp: u64,
}

/// The log-block FTL's state (see the module's note).
#[derive(Clone, Debug)]
struct LogBlockFtl {
    page: u64,
    pages_per_block: u64,
    max_logs: usize,
    copy_page: Nanos,
    erase: Nanos,
    logs: Vec<Log>,
    clock: u64,
    switch_merges: u64,
    partial_merges: u64,
    full_merges: u64,
    copied: u64,
    erased: u64,
}

/// `timing.<key>` errors from the shared readers, for a key that needs `ftl` set.
fn ftl_key<T>(
    t: &toml::Table,
    key: &str,
    read: fn(&toml::Table, &str) -> Result<T, String>,
) -> Result<T, String> {
    if !t.contains_key(key) {
        return Err(format!(
            "timing.{key}: missing (required with ftl = \"log-block\")"
        ));
    }
    read(t, key)
}

impl LogBlockFtl {
    fn from_toml(t: &toml::Table) -> Result<Option<LogBlockFtl>, String> {
        let kind = match t.get("ftl") {
            None => "none",
            Some(toml::Value::String(s)) => s.as_str(),
            Some(v) => {
                return Err(format!(
                    "timing.ftl: expected \"none\" or \"log-block\", got {v}"
                ))
            }
        };
        let ftl_keys = [
            "ftl_page_bytes",
            "ftl_pages_per_block",
            "ftl_log_blocks",
            "ftl_copy_page_us",
            "ftl_erase_block_us",
        ];
        match kind {
            "none" => {
                if let Some(k) = ftl_keys.iter().find(|k| t.contains_key(**k)) {
                    return Err(format!(
                        "timing.{k}: only used with ftl = \"log-block\" (ftl is \"none\")"
                    ));
                }
                return Ok(None);
            }
            "log-block" => {}
            other => {
                return Err(format!(
                    "timing.ftl: unknown `{other}` (expected \"none\" or \"log-block\")"
                ))
            }
        }
        let page = ftl_key(t, "ftl_page_bytes", count)?;
        if !(512..=1 << 20).contains(&page) {
            return Err(format!(
                "timing.ftl_page_bytes: expected a NAND page of 512 B to 1 MiB, got {page}"
            ));
        }
        let pages_per_block = ftl_key(t, "ftl_pages_per_block", count)?;
        if pages_per_block > 1 << 16 {
            return Err(format!(
                "timing.ftl_pages_per_block: expected at most 65536, got {pages_per_block}"
            ));
        }
        let logs = ftl_key(t, "ftl_log_blocks", count)?;
        if logs > MAX_LOG_BLOCKS {
            return Err(format!(
                "timing.ftl_log_blocks: expected at most {MAX_LOG_BLOCKS}, got {logs}"
            ));
        }
        Ok(Some(LogBlockFtl {
            page,
            pages_per_block,
            max_logs: logs as usize,
            copy_page: latency_us("ftl_copy_page_us", ftl_key(t, "ftl_copy_page_us", f64_key)?)?,
            erase: latency_us(
                "ftl_erase_block_us",
                ftl_key(t, "ftl_erase_block_us", f64_key)?,
            )?,
            logs: Vec::new(),
            clock: 0,
            switch_merges: 0,
            partial_merges: 0,
            full_merges: 0,
            copied: 0,
            erased: 0,
        }))
    }

    /// The index in `logs` of data `block`'s log.
    fn find(&self, block: u64) -> Option<usize> {
        self.logs.iter().position(|l| l.block == block)
    }

    /// A write of `len` ≥ 1 bytes at `offset`, inside the card: the time its merges take.
    fn write(&mut self, offset: u64, len: u64) -> Nanos {
        let first = offset / self.page;
        let last = (offset + len - 1) / self.page;
        let mut cost = 0;
        let mut p = first;
        while p <= last {
            let block = p / self.pages_per_block;
            let at = p % self.pages_per_block;
            // The pages of this write in `block`.
            let n = (last - p + 1).min(self.pages_per_block - at);
            cost += self.write_block(block, at, n);
            p += n;
        }
        cost
    }

    /// `n` pages from page `at` of data `block` (all in that block).
    fn write_block(&mut self, block: u64, mut at: u64, mut n: u64) -> Nanos {
        let mut cost = 0;
        while n > 0 {
            let i = match self.find(block) {
                Some(i) => i,
                None => {
                    if self.logs.len() == self.max_logs {
                        let lru = (0..self.logs.len())
                            .min_by_key(|&i| self.logs[i].stamp)
                            .expect("at least one log block");
                        cost += self.merge(lru);
                    }
                    self.logs.push(Log {
                        block,
                        used: 0,
                        in_order: true,
                        stamp: 0,
                    });
                    self.logs.len() - 1
                }
            };
            self.clock += 1;
            let log = &mut self.logs[i];
            let m = n.min(self.pages_per_block - log.used);
            log.in_order &= log.used == at;
            log.used += m;
            log.stamp = self.clock;
            at += m;
            n -= m;
            if log.used == self.pages_per_block {
                cost += self.merge(i);
            }
        }
        cost
    }

    /// Merge log `i` into its data block and free it: the time taken beyond the write.
    fn merge(&mut self, i: usize) -> Nanos {
        let log = self.logs.swap_remove(i);
        // The old data block is erased by every kind of merge (inside the write rate).
        self.erased += 1;
        if log.in_order && log.used == self.pages_per_block {
            self.switch_merges += 1;
            0
        } else if log.in_order {
            self.partial_merges += 1;
            let copies = self.pages_per_block - log.used;
            self.copied += copies;
            copies * self.copy_page
        } else {
            self.full_merges += 1;
            self.copied += self.pages_per_block;
            self.erased += 1;
            self.pages_per_block * self.copy_page + self.erase
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wattio_core::io::Request;

    #[test]
    fn service_by_hand() {
        let t: toml::Table = toml::from_str(
            "capacity_bytes = 2_000_000_000\npage_bytes = 2048\nread_page_us = 25\nprogram_page_us = 200\nread_mbps = 20\nwrite_mbps = 10\noverhead_us = 100",
        )
        .unwrap();
        let mut f = Flash::from_toml(&t).unwrap();
        // 4096 B read: 2 pages × 25 µs + 4096 / 20e6 s (204.8 µs) + 100 µs
        let s = f.service(0, &Request::new(0, Op::Read, 0, 4096).io(0));
        assert_eq!(s.total(), 50_000 + 204_800 + 100_000);
        // 5000 B write: 3 pages × 200 µs + 500 µs + 100 µs
        let s = f.service(0, &Request::new(0, Op::Write, 0, 5000).io(0));
        assert_eq!(s.total(), 600_000 + 500_000 + 100_000);
    }

    /// A card of 4-page erase blocks of 2 KiB pages with two log blocks, writing at
    /// 8 MB/s; copies 200 µs, erases 2 ms.
    fn card() -> Flash {
        let t: toml::Table = toml::from_str(
            "capacity_bytes = 1_048_576\npage_bytes = 512\nread_page_us = 0\nprogram_page_us = 0\n\
             read_mbps = 8\nwrite_mbps = 8\nftl = \"log-block\"\nftl_page_bytes = 2048\n\
             ftl_pages_per_block = 4\nftl_log_blocks = 2\nftl_copy_page_us = 200\nftl_erase_block_us = 2000",
        )
        .unwrap();
        Flash::from_toml(&t).unwrap()
    }

    fn write(f: &mut Flash, offset: u64, len: u32) -> Nanos {
        f.service(0, &Request::new(0, Op::Write, offset, len).io(0))
            .total()
    }

    fn counter(f: &Flash, name: &str) -> f64 {
        f.counters()
            .into_iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v)
            .unwrap_or_else(|| panic!("no counter {name}"))
    }

    #[test]
    fn sequential_writes_fill_logs_in_order_and_switch_without_cost() {
        let mut f = card();
        // 2 KiB at 8 MB/s = 256 µs, nothing more, for eight pages in order: two blocks
        // filled in order, two switch merges.
        for p in 0..8 {
            assert_eq!(write(&mut f, p * 2048, 2048), 256_000, "page {p}");
        }
        assert_eq!(counter(&f, "ftl_switch_merges"), 2.0);
        assert_eq!(counter(&f, "ftl_blocks_erased"), 2.0);
        assert_eq!(counter(&f, "ftl_pages_copied"), 0.0);
        // One 32 KiB write of four whole blocks: 4096 µs and four switch merges.
        assert_eq!(write(&mut f, 16_384, 32_768), 4_096_000);
        assert_eq!(counter(&f, "ftl_switch_merges"), 6.0);
    }

    #[test]
    fn scattered_writes_evict_logs_with_full_and_partial_merges() {
        let mut f = card();
        // Page 1 of block 0 (not slot 0: out of order), page 0 of block 1 (in order):
        // two logs, no merge yet.
        assert_eq!(write(&mut f, 2048, 2048), 256_000);
        assert_eq!(write(&mut f, 8192, 2048), 256_000);
        // Block 2 needs a third log: block 0's, the least recent and out of order, is
        // merged in full: 4 copies × 200 µs + one erase of 2 ms.
        assert_eq!(
            write(&mut f, 16_384 + 2048, 2048),
            256_000 + 800_000 + 2_000_000
        );
        assert_eq!(counter(&f, "ftl_full_merges"), 1.0);
        // Block 3: block 1's log (one page, in order) is evicted by a partial merge, the
        // three other pages copied: 600 µs.
        assert_eq!(write(&mut f, 24_576, 2048), 256_000 + 600_000);
        assert_eq!(counter(&f, "ftl_partial_merges"), 1.0);
        assert_eq!(counter(&f, "ftl_pages_copied"), 7.0);
        // Full merge: two blocks erased; partial: one.
        assert_eq!(counter(&f, "ftl_blocks_erased"), 3.0);
        // Rewriting page 1 of block 2 fills nothing and merges nothing (its log has room).
        assert_eq!(write(&mut f, 16_384 + 2048, 2048), 256_000);
        // A log that fills out of order is merged in full by the write that fills it:
        // block 2's log holds 2 pages; two more fill it.
        assert_eq!(write(&mut f, 16_384, 4096), 512_000 + 800_000 + 2_000_000);
        assert_eq!(counter(&f, "ftl_full_merges"), 2.0);
    }

    #[test]
    fn twenty_logs_evict_the_least_recent() {
        // 20 log blocks: pages 1 of blocks 0..20 take 20 logs, block 20
        // evicts block 0's (a full merge: 4 × 200 µs + 2 ms), and block 0 again evicts
        // block 1's; a write to block 5 finds its log and merges nothing.
        let t: toml::Table = toml::from_str(
            "capacity_bytes = 1_048_576\npage_bytes = 512\nread_page_us = 0\nprogram_page_us = 0\n\
             read_mbps = 8\nwrite_mbps = 8\nftl = \"log-block\"\nftl_page_bytes = 2048\n\
             ftl_pages_per_block = 4\nftl_log_blocks = 20\nftl_copy_page_us = 200\nftl_erase_block_us = 2000",
        )
        .unwrap();
        let mut f = Flash::from_toml(&t).unwrap();
        for b in 0..20 {
            assert_eq!(write(&mut f, b * 8192 + 2048, 2048), 256_000, "block {b}");
            f.check_invariants().unwrap();
        }
        assert_eq!(write(&mut f, 20 * 8192 + 2048, 2048), 256_000 + 2_800_000);
        assert_eq!(write(&mut f, 2048, 2048), 256_000 + 2_800_000);
        assert_eq!(write(&mut f, 5 * 8192 + 4096, 2048), 256_000);
        f.check_invariants().unwrap();
        assert_eq!(counter(&f, "ftl_full_merges"), 2.0);
        assert_eq!(f.ftl.as_ref().unwrap().logs.len(), 20);
    }

    #[test]
    fn reads_and_a_card_without_the_ftl_are_unchanged() {
        let mut f = card();
        write(&mut f, 2048, 2048);
        write(&mut f, 8192, 2048);
        let s = f.service(0, &Request::new(0, Op::Read, 16_384, 2048).io(0));
        assert_eq!(s.total(), 256_000);
        assert_eq!(counter(&f, "ftl_full_merges"), 0.0);
        let t: toml::Table = toml::from_str(
            "capacity_bytes = 1_048_576\npage_bytes = 512\nread_page_us = 0\nprogram_page_us = 0\nread_mbps = 8\nwrite_mbps = 8",
        )
        .unwrap();
        let mut plain = Flash::from_toml(&t).unwrap();
        for p in [1u64, 4, 9, 2, 12] {
            assert_eq!(write(&mut plain, p * 2048, 2048), 256_000);
        }
        assert!(plain.counters().is_empty());
    }

    #[test]
    fn ftl_keys_are_checked_by_name() {
        let base = "capacity_bytes = 1_048_576\npage_bytes = 512\nread_page_us = 0\nprogram_page_us = 0\nread_mbps = 8\nwrite_mbps = 8\n";
        let err = |extra: &str| {
            let t: toml::Table = toml::from_str(&format!("{base}{extra}")).unwrap();
            Flash::from_toml(&t).unwrap_err()
        };
        assert!(err("ftl = \"page\"").contains("timing.ftl: unknown `page`"));
        assert!(err("ftl = 3").contains("timing.ftl: expected"));
        assert!(err("ftl = \"log-block\"").contains("timing.ftl_page_bytes: missing"));
        assert!(err("ftl_log_blocks = 4").contains("timing.ftl_log_blocks: only used with"));
        let full = "ftl = \"log-block\"\nftl_page_bytes = 2048\nftl_pages_per_block = 64\nftl_copy_page_us = 225\nftl_erase_block_us = 2000\n";
        assert!(err(&format!("{full}ftl_log_blocks = 0")).contains("timing.ftl_log_blocks"));
        assert!(err(&format!("{full}ftl_log_blocks = 5000")).contains("at most 4096"));
        let tiny = full.replace("ftl_page_bytes = 2048", "ftl_page_bytes = 1");
        assert!(err(&format!("{tiny}ftl_log_blocks = 4"))
            .contains("timing.ftl_page_bytes: expected a NAND page"));
        let slow = full.replace("ftl_erase_block_us = 2000", "ftl_erase_block_us = 2e6");
        assert!(err(&format!("{slow}ftl_log_blocks = 4"))
            .contains("timing.ftl_erase_block_us: expected at most"));
        let t: toml::Table =
            toml::from_str(&base.replace("read_mbps = 8", "read_mbps = 0.0001")).unwrap();
        assert!(Flash::from_toml(&t)
            .unwrap_err()
            .contains("timing.read_mbps: expected at least"));
        let t: toml::Table =
            toml::from_str(&base.replace("read_page_us = 0", "read_page_us = 2e6")).unwrap();
        assert!(Flash::from_toml(&t)
            .unwrap_err()
            .contains("timing.read_page_us: expected at most"));
        assert!(err(&format!("{full}ftl_log_blocks = 4\nftl_erase = 1"))
            .contains("timing.ftl_erase: unknown key"));
    }
}
