//! The rank predictors of the delay-hiding paper: at system-call entry, which buffer-cache
//! ranks to wake for this file's I/O. Guesses are rank masks (bit `r` = rank `r`).
//!
//! | scheme | state | guess |
//! |---|---|---|
//! | ISR | none | nothing (the access wakes its rank, 500 ns exposed) |
//! | ALL | none | every rank |
//! | MRA | the last rank any I/O used | that rank |
//! | F-MRA | per file: its last rank | that rank |
//! | F-MFA | per file: a counter per rank, +1 per completed access | fewest ranks, largest first, whose share ≥ T |
//! | F-DRD | per file: blocks per rank (+1 placed, −1 replaced) | fewest ranks, largest first, whose share ≥ T |
//! | AF-MFA, AF-DRD | as F-*, plus a per-file threshold stepped to meet the global target | as F-* with the file's threshold |
//! | AF-MRA | per file: an MRU stack of ranks and `num_ranks` | the top `num_ranks` of the stack |
//!
//! F-DRD-all is F-DRD with the threshold T at 100 %: every rank holding any block of the
//! file. The paper introduces it as "AF-DRD's global coverage set to 100 %" but defines it
//! by its effect ("turns on all ranks containing any portion of the file"); under the
//! adaptive rule a 100 % target still lowers a file's threshold after every fully covered
//! access (coverage can equal the target, never exceed it), so the literal reading does not
//! have that effect. The literal reading stays available as `af-drd` with `target = 1`.

/// Which predictor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scheme {
    Isr,
    All,
    Mra,
    FMra,
    FMfa,
    FDrd,
    AfMra,
    AfMfa,
    AfDrd,
}

/// The predictors' names, as configs spell them (each but `isr` and `all` also with `-et`).
pub const SCHEMES: &[&str] = &[
    "isr",
    "all",
    "mra",
    "f-mra",
    "f-mfa",
    "f-drd",
    "af-mra",
    "af-mfa",
    "af-drd",
    "f-drd-all",
];

/// Parse a predictor name: the scheme, whether it turns wrong ranks off early (`-et`), and
/// the coverage threshold T it forces (F-DRD-all: 100 %).
pub fn parse(name: &str) -> Option<(Scheme, bool, Option<f64>)> {
    let (base, et) = match name.strip_suffix("-et") {
        Some(b) => (b, true),
        None => (name, false),
    };
    let (scheme, threshold) = match base {
        "isr" => (Scheme::Isr, None),
        "all" => (Scheme::All, None),
        "mra" => (Scheme::Mra, None),
        "f-mra" => (Scheme::FMra, None),
        "f-mfa" => (Scheme::FMfa, None),
        "f-drd" => (Scheme::FDrd, None),
        "af-mra" => (Scheme::AfMra, None),
        "af-mfa" => (Scheme::AfMfa, None),
        "af-drd" => (Scheme::AfDrd, None),
        "f-drd-all" => (Scheme::FDrd, Some(1.0)),
        _ => return None,
    };
    // ISR wakes nothing and ALL needs every rank: neither has a wrong rank to turn off.
    if et && matches!(scheme, Scheme::Isr | Scheme::All) {
        return None;
    }
    Some((scheme, et, threshold))
}

/// The predictors' parameters (see `docs/functions/delay-hiding.md`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Params {
    /// Coverage threshold T of F-MFA and F-DRD (0: the single largest rank).
    pub threshold: f64,
    /// Global coverage target of the adaptive predictors.
    pub target: f64,
    /// A file's first threshold (AF-MFA, AF-DRD).
    pub threshold_start: f64,
    /// How far an adaptive threshold moves after each access.
    pub threshold_step: f64,
}

const NONE: u8 = u8::MAX;

#[derive(Clone, Copy, Debug)]
struct FileState {
    last: u8,
    mru_len: u8,
    num_ranks: u8,
    threshold: f64,
    hits: u64,
    accesses: u64,
}

impl FileState {
    fn new(p: &Params) -> FileState {
        FileState {
            last: NONE,
            mru_len: 0,
            num_ranks: 1,
            threshold: p.threshold_start,
            hits: 0,
            accesses: 0,
        }
    }
}

pub struct Predictor {
    scheme: Scheme,
    params: Params,
    ranks: usize,
    max_files: usize,
    last_global: u8,
    files: Vec<FileState>,
    /// Per file × rank: F-MFA access counts or F-DRD resident blocks.
    counts: Vec<u32>,
    /// Per file × rank: AF-MRA's MRU stack (most recent first).
    mru: Vec<u8>,
}

impl Predictor {
    /// A predictor over `ranks` ranks (1..=64) for file ids below `max_files`.
    pub fn new(scheme: Scheme, params: Params, ranks: usize, max_files: usize) -> Predictor {
        debug_assert!((1..=64).contains(&ranks));
        Predictor {
            scheme,
            params,
            ranks,
            max_files,
            last_global: NONE,
            files: Vec::new(),
            counts: Vec::new(),
            mru: Vec::new(),
        }
    }

    pub fn scheme(&self) -> Scheme {
        self.scheme
    }

    fn all(&self) -> u64 {
        if self.ranks == 64 {
            u64::MAX
        } else {
            (1u64 << self.ranks) - 1
        }
    }

    /// Make room for `file`'s state; an id at or beyond `max_files` is an error.
    #[inline]
    fn slot(&mut self, file: u32) -> Result<usize, String> {
        let f = file as usize;
        if f >= self.files.len() {
            if f >= self.max_files {
                return Err(format!(
                    "file id {file}: expected below max_files = {}",
                    self.max_files
                ));
            }
            let fresh = FileState::new(&self.params);
            self.files.resize(f + 1, fresh);
            self.counts.resize((f + 1) * self.ranks, 0);
            self.mru.resize((f + 1) * self.ranks, NONE);
        }
        Ok(f)
    }

    /// The ranks to wake at entry to an I/O call on `file`.
    #[inline]
    pub fn guess(&mut self, file: u32) -> Result<u64, String> {
        Ok(match self.scheme {
            Scheme::Isr => 0,
            Scheme::All => self.all(),
            Scheme::Mra => bit(self.last_global),
            Scheme::FMra => {
                let f = self.slot(file)?;
                bit(self.files[f].last)
            }
            Scheme::FMfa | Scheme::FDrd => {
                let f = self.slot(file)?;
                self.covering(f, self.params.threshold)
            }
            Scheme::AfMfa | Scheme::AfDrd => {
                let f = self.slot(file)?;
                self.covering(f, self.files[f].threshold)
            }
            Scheme::AfMra => {
                let f = self.slot(file)?;
                let s = &self.files[f];
                let n = s.num_ranks.min(s.mru_len) as usize;
                self.mru[f * self.ranks..f * self.ranks + n]
                    .iter()
                    .fold(0, |m, &r| m | bit(r))
            }
        })
    }

    /// The fewest of file `f`'s ranks, largest count first (ties: lower rank), whose
    /// combined share of its count is at least `t`; none if the file has no count yet.
    fn covering(&self, f: usize, t: f64) -> u64 {
        let c = &self.counts[f * self.ranks..(f + 1) * self.ranks];
        let total: u64 = c.iter().map(|&n| u64::from(n)).sum();
        if total == 0 {
            return 0;
        }
        let need = t * total as f64;
        let (mut mask, mut acc) = (0u64, 0u64);
        loop {
            let mut best = None;
            for (r, &n) in c.iter().enumerate() {
                if n > 0 && mask & (1 << r) == 0 && best.is_none_or(|(_, b)| n > b) {
                    best = Some((r, n));
                }
            }
            let Some((r, n)) = best else { return mask };
            mask |= 1 << r;
            acc += u64::from(n);
            if acc as f64 >= need {
                return mask;
            }
        }
    }

    /// A block of `file` was placed on rank `r` (F-DRD counts it).
    #[inline]
    pub fn on_place(&mut self, file: u32, r: usize) -> Result<(), String> {
        if matches!(self.scheme, Scheme::FDrd | Scheme::AfDrd) {
            let f = self.slot(file)?;
            self.counts[f * self.ranks + r] += 1;
        }
        Ok(())
    }

    /// A block of `file` was replaced on rank `r`.
    #[inline]
    pub fn on_evict(&mut self, file: u32, r: usize) {
        if matches!(self.scheme, Scheme::FDrd | Scheme::AfDrd) {
            // The file's state exists: its block was placed before.
            let c = &mut self.counts[file as usize * self.ranks + r];
            *c = c.saturating_sub(1);
        }
    }

    /// The call on `file` guessed `guess`, needed the ranks `need` woken (0: none needed a
    /// guess, the call does not count toward coverage) and used the ranks `order` (in
    /// block order, repeats allowed; not empty): learn from it.
    #[inline]
    pub fn update(&mut self, file: u32, guess: u64, need: u64, order: &[u8]) -> Result<(), String> {
        let last = *order.last().expect("a call that used ranks");
        self.last_global = last;
        if matches!(self.scheme, Scheme::Isr | Scheme::All | Scheme::Mra) {
            return Ok(());
        }
        let f = self.slot(file)?;
        let ranks = self.ranks;
        let p = self.params;
        let s = &mut self.files[f];
        s.last = last;
        let counted = need != 0;
        if counted {
            s.accesses += 1;
            s.hits += u64::from(need & !guess == 0);
        }
        let below = (s.hits as f64) < p.target * s.accesses as f64;
        match self.scheme {
            Scheme::FMfa | Scheme::AfMfa => {
                let mut seen = 0u64;
                for &r in order {
                    if seen & bit(r) == 0 {
                        seen |= bit(r);
                        self.counts[f * ranks + r as usize] += 1;
                    }
                }
            }
            Scheme::AfMra => {
                let stack = &mut self.mru[f * ranks..(f + 1) * ranks];
                let mut len = s.mru_len as usize;
                for &r in order {
                    let at = stack[..len]
                        .iter()
                        .position(|&x| x == r)
                        .unwrap_or_else(|| {
                            len += 1;
                            len - 1
                        });
                    stack.copy_within(0..at, 1);
                    stack[0] = r;
                }
                s.mru_len = len as u8;
            }
            _ => {}
        }
        match self.scheme {
            _ if !counted => {}
            Scheme::AfMfa | Scheme::AfDrd => {
                s.threshold = if below {
                    (s.threshold + p.threshold_step).min(1.0)
                } else {
                    (s.threshold - p.threshold_step).max(0.0)
                };
            }
            Scheme::AfMra => {
                s.num_ranks = if below {
                    (s.num_ranks + 1).min(ranks as u8)
                } else {
                    (s.num_ranks - 1).max(1)
                };
            }
            _ => {}
        }
        Ok(())
    }

    /// File `file`'s adaptive state: (threshold, num_ranks, hits, accesses).
    pub fn file_state(&self, file: u32) -> Option<(f64, u8, u64, u64)> {
        self.files
            .get(file as usize)
            .map(|s| (s.threshold, s.num_ranks, s.hits, s.accesses))
    }
}

#[inline]
fn bit(r: u8) -> u64 {
    if r == NONE {
        0
    } else {
        1 << r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: Params = Params {
        threshold: 0.0,
        target: 0.95,
        threshold_start: 0.5,
        threshold_step: 0.25,
    };

    fn pred(name: &str, params: Params) -> Predictor {
        let (scheme, _, target) = parse(name).unwrap();
        let params = Params {
            target: target.unwrap_or(params.target),
            ..params
        };
        Predictor::new(scheme, params, 4, 100)
    }

    #[test]
    fn names_parse_and_isr_all_have_no_early_turn_off() {
        assert_eq!(parse("af-mra-et"), Some((Scheme::AfMra, true, None)));
        assert_eq!(parse("f-drd-all"), Some((Scheme::FDrd, false, Some(1.0))));
        assert_eq!(parse("isr-et"), None);
        assert_eq!(parse("all-et"), None);
        assert_eq!(parse("lru"), None);
        for n in SCHEMES {
            assert!(parse(n).is_some(), "{n}");
        }
    }

    #[test]
    fn isr_guesses_nothing_and_all_everything() {
        let mut isr = pred("isr", P);
        let mut all = pred("all", P);
        isr.update(3, 0, 0b0100, &[2]).unwrap();
        assert_eq!(isr.guess(3).unwrap(), 0);
        assert_eq!(all.guess(3).unwrap(), 0b1111);
    }

    #[test]
    fn mra_follows_the_last_rank_of_any_file() {
        let mut p = pred("mra", P);
        assert_eq!(p.guess(1).unwrap(), 0, "cold: no guess");
        p.update(1, 0, 0b0101, &[0, 2]).unwrap();
        assert_eq!(
            p.guess(9).unwrap(),
            0b0100,
            "another file: the global last rank"
        );
        p.update(9, 0b0100, 0b1000, &[3]).unwrap();
        assert_eq!(p.guess(1).unwrap(), 0b1000);
    }

    #[test]
    fn f_mra_keeps_a_last_rank_per_file() {
        let mut p = pred("f-mra", P);
        p.update(1, 0, 0b0100, &[2]).unwrap();
        p.update(2, 0, 0b1010, &[1, 3]).unwrap();
        assert_eq!(p.guess(1).unwrap(), 0b0100);
        assert_eq!(p.guess(2).unwrap(), 0b1000);
        assert_eq!(p.guess(5).unwrap(), 0);
    }

    #[test]
    fn f_mfa_counts_completed_accesses_and_wakes_the_largest() {
        let mut p = pred("f-mfa", P);
        // Rank 1 in three calls (twice in one call counts once), rank 2 in two.
        p.update(1, 0, 0b0010, &[1, 1]).unwrap();
        p.update(1, 0, 0b0100, &[2]).unwrap();
        p.update(1, 0, 0b0110, &[1, 2]).unwrap();
        p.update(1, 0, 0b0010, &[1]).unwrap();
        assert_eq!(p.guess(1).unwrap(), 0b0010);
    }

    #[test]
    fn coverage_threshold_wakes_the_fewest_ranks_reaching_t() {
        // The digest's example: shares 62/30/8 % with T = 90 % wake two ranks.
        let t = |threshold| Params { threshold, ..P };
        for (threshold, want) in [
            (0.0, 0b0001),
            (0.6, 0b0001),
            (0.9, 0b0011),
            (0.91, 0b0011),
            (0.93, 0b1011),
            (1.0, 0b1011),
        ] {
            let mut p = pred("f-drd", t(threshold));
            for (r, n) in [(0usize, 62), (1, 30), (3, 8)] {
                for _ in 0..n {
                    p.on_place(4, r).unwrap();
                }
            }
            assert_eq!(p.guess(4).unwrap(), want, "T = {threshold}");
        }
    }

    #[test]
    fn f_drd_counts_placements_minus_replacements() {
        let mut p = pred("f-drd", P);
        p.on_place(1, 0).unwrap();
        p.on_place(1, 2).unwrap();
        p.on_place(1, 2).unwrap();
        assert_eq!(p.guess(1).unwrap(), 0b0100);
        p.on_evict(1, 2);
        p.on_evict(1, 2);
        assert_eq!(p.guess(1).unwrap(), 0b0001);
        p.on_evict(1, 0);
        assert_eq!(p.guess(1).unwrap(), 0, "no blocks resident: no guess");
    }

    #[test]
    fn adaptive_thresholds_step_toward_the_target() {
        let mut p = pred("af-drd", P);
        for (r, n) in [(0usize, 6), (1, 3), (2, 1)] {
            for _ in 0..n {
                p.on_place(1, r).unwrap();
            }
        }
        // Threshold 0.5: rank 0 alone (60 %).
        assert_eq!(p.guess(1).unwrap(), 0b0001);
        // A wrong guess: coverage 0 < 95 % → threshold 0.75 → ranks 0 and 1 (90 %).
        p.update(1, 0b0001, 0b0010, &[1]).unwrap();
        assert_eq!(p.file_state(1).unwrap().0, 0.75);
        assert_eq!(p.guess(1).unwrap(), 0b0011);
        // A hit: coverage 1/2 still below → 1.0 → every resident rank.
        p.update(1, 0b0011, 0b0001, &[0]).unwrap();
        assert_eq!(p.file_state(1).unwrap().0, 1.0);
        assert_eq!(p.guess(1).unwrap(), 0b0111);
        // Hits until coverage ≥ 95 %: 2 of 3, ... 19 of 20 first reaches it.
        for i in 3..=20 {
            p.update(1, 0b0111, 0b0001, &[0]).unwrap();
            let (thr, _, hits, n) = p.file_state(1).unwrap();
            assert_eq!((hits, n), (i - 1, i));
            assert_eq!(thr, if i < 20 { 1.0 } else { 0.75 }, "access {i}");
        }
    }

    #[test]
    fn af_mfa_threshold_is_capped_at_one_and_floored_at_zero() {
        let mut p = pred(
            "af-mfa",
            Params {
                threshold_start: 0.1,
                ..P
            },
        );
        p.update(1, 0b1111, 0b0001, &[0]).unwrap();
        assert_eq!(p.file_state(1).unwrap().0, 0.0);
        for _ in 0..30 {
            p.update(1, 0, 0b1000, &[3]).unwrap();
        }
        assert_eq!(p.file_state(1).unwrap().0, 1.0);
        // Counts: rank 0 once, rank 3 thirty times; threshold 1.0 wakes both.
        assert_eq!(p.guess(1).unwrap(), 0b1001);
    }

    #[test]
    fn af_mra_wakes_the_top_of_its_mru_stack_and_steps_num_ranks() {
        let mut p = pred("af-mra", P);
        assert_eq!(p.guess(1).unwrap(), 0);
        p.update(1, 0, 0b0100, &[2]).unwrap(); // miss: coverage 0 → num_ranks 2; stack [2]
        assert_eq!(p.file_state(1).unwrap().1, 2);
        assert_eq!(p.guess(1).unwrap(), 0b0100);
        p.update(1, 0b0100, 0b1001, &[0, 3]).unwrap(); // wrong: num_ranks 3; stack [3, 0, 2]
        assert_eq!(p.file_state(1).unwrap().1, 3);
        assert_eq!(p.guess(1).unwrap(), 0b1101);
        p.update(1, 0b1101, 0b0001, &[0]).unwrap(); // hit, 1/3 → num_ranks 4; stack [0, 3, 2]
        assert_eq!(p.file_state(1).unwrap().1, 4);
        // The stack holds three ranks: four wanted, three woken.
        assert_eq!(p.guess(1).unwrap(), 0b1101);
        let mut q = pred("af-mra", Params { target: 0.5, ..P });
        q.update(1, 0, 0b0010, &[1]).unwrap(); // 0/1 < 50 % → 2
        q.update(1, 0b10, 0b0010, &[1]).unwrap(); // 1/2 ≥ 50 % → 1
        assert_eq!(q.file_state(1).unwrap().1, 1);
        q.update(1, 0b10, 0b0001, &[0]).unwrap(); // 1/3 → 2; stack [0, 1]
        assert_eq!(q.guess(1).unwrap(), 0b11);
        q.update(1, 0b11, 0b0001, &[0]).unwrap(); // 2/4 → 1
        assert_eq!(q.guess(1).unwrap(), 0b01);
        // A call that needed no rank woken (its blocks came from storage) moves the stack
        // but neither the coverage nor num_ranks.
        q.update(1, 0b01, 0, &[1]).unwrap();
        assert_eq!(q.file_state(1).unwrap(), (0.5, 1, 2, 4));
        assert_eq!(q.guess(1).unwrap(), 0b10);
    }

    #[test]
    fn file_ids_beyond_the_bound_are_refused() {
        let mut p = pred("f-mra", P);
        assert_eq!(
            p.guess(100).unwrap_err(),
            "file id 100: expected below max_files = 100"
        );
        assert!(p.guess(99).is_ok());
    }
}
