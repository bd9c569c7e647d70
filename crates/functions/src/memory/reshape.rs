//! Active memory-traffic reshaping (Huang 2006, ch. 4): hot and cold ranks.
//!
//! Self refresh pays only over idle gaps longer than its exit, and pages placed at random
//! leave every rank short gaps. Reshaping splits the ranks into *hot* ranks (`hot_ranks`,
//! the first ones; the thesis splits 50/50) and *cold* ranks, counts accesses per page (the
//! memory controller's counters), and a kernel thread moves the most accessed pages onto
//! the hot ranks: the hot ranks absorb the short gaps, the cold ranks get long ones for
//! self refresh. HW_x is HW on traffic reshaped by migrating x % of all pages.
//!
//! **The plan of one pass** ([`Reshape::plan`]): the hot set is the `pages_pct` % of the
//! mapped pages with the most accesses (ties: the lower page number; pages never accessed
//! since the counts were last halved are never hot). Each hot page on a cold rank, most
//! accessed first, moves to the first hot rank with a free page; when the hot ranks are full,
//! the least accessed page on them that is not hot first moves out to the cold rank with
//! the most free pages, and the hot page takes its rank. A pass moves at most twice the hot
//! set (each hot page, and each page it displaces). The simulator copies the pages and
//! halves every count after the pass, so the counts weigh recent passes most.
//!
//! The thesis gives the split, the counters and the x % but not the pass period, the
//! counters' decay or what happens when the hot ranks are full; those are this module's
//! documented choices (`docs/functions/memory-reshape.md`).

use serde::Deserialize;

#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ReshapeConfig {
    /// x of HW_x: the share of the mapped pages, in %, kept on the hot ranks (0 < x ≤ 100).
    pub pages_pct: f64,
    /// Period of the migration passes, ms (the first pass after one period).
    #[serde(default = "period")]
    pub period_ms: u64,
    /// Ranks `0..hot_ranks` are hot; 0 (the default): half the ranks, rounded down.
    #[serde(default)]
    pub hot_ranks: usize,
}

fn period() -> u64 {
    100
}

/// A mapped page as a pass sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PageUse {
    /// Accesses counted (halved after each pass).
    pub count: u32,
    /// The rank it is on.
    pub rank: usize,
    /// Its physical page number (ties and determinism).
    pub frame: u64,
}

/// One move of a plan: `pages[page]` goes to rank `to`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Move {
    pub page: usize,
    pub to: usize,
}

/// The reshaping planner for a machine of `ranks` ranks.
#[derive(Clone, Debug)]
pub struct Reshape {
    pub pages_pct: f64,
    pub period_ns: u64,
    pub hot: usize,
    pub ranks: usize,
}

impl Reshape {
    /// Check `c` for `ranks` ranks; errors name the key under `memory.reshape`.
    pub fn new(c: &ReshapeConfig, ranks: usize) -> Result<Reshape, String> {
        if !(c.pages_pct > 0.0 && c.pages_pct <= 100.0) {
            return Err(format!(
                "memory.reshape.pages_pct: expected a share in (0, 100] %, got {}",
                c.pages_pct
            ));
        }
        if !(1..=3_600_000).contains(&c.period_ms) {
            return Err(format!(
                "memory.reshape.period_ms: expected 1..=3600000 ms, got {}",
                c.period_ms
            ));
        }
        let hot = if c.hot_ranks == 0 {
            ranks / 2
        } else {
            c.hot_ranks
        };
        if ranks < 2 || !(1..ranks).contains(&hot) {
            return Err(format!(
                "memory.reshape.hot_ranks: expected 1..{ranks} hot ranks (some hot, some cold) on {ranks} ranks, got {hot}{}",
                if c.hot_ranks == 0 { " (half the ranks)" } else { "" }
            ));
        }
        Ok(Reshape {
            pages_pct: c.pages_pct,
            period_ns: c.period_ms * 1_000_000,
            hot,
            ranks,
        })
    }

    fn is_hot(&self, r: usize) -> bool {
        r < self.hot
    }

    /// The hot set's size for `mapped` pages: ⌈x % of them⌉.
    pub fn hot_pages(&self, mapped: usize) -> usize {
        ((mapped as f64 * self.pages_pct / 100.0).ceil() as usize).min(mapped)
    }

    /// The moves of one pass over `pages`, given each rank's free pages, in the order to
    /// make them (a page displaced from a full hot rank moves before the page taking its
    /// place).
    pub fn plan(&self, pages: &[PageUse], free: &[u64]) -> Vec<Move> {
        let mut free = free.to_vec();
        let mut order: Vec<usize> = (0..pages.len()).collect();
        order.sort_unstable_by_key(|&i| (std::cmp::Reverse(pages[i].count), pages[i].frame));
        let k = self.hot_pages(pages.len());
        let mut hot_set = vec![false; pages.len()];
        let mut wanted = Vec::new();
        for &i in order.iter().take(k).filter(|&&i| pages[i].count > 0) {
            hot_set[i] = true;
            if !self.is_hot(pages[i].rank) {
                wanted.push(i);
            }
        }
        // Pages that may leave the hot ranks: not hot, least accessed first.
        let mut evictable = order
            .iter()
            .rev()
            .copied()
            .filter(|&i| !hot_set[i] && self.is_hot(pages[i].rank));
        let mut moves = Vec::new();
        for i in wanted {
            let to = match (0..self.hot).find(|&r| free[r] > 0) {
                Some(r) => r,
                None => {
                    let Some(e) = evictable.next() else { break };
                    let Some(out) = (self.hot..self.ranks)
                        .filter(|&r| free[r] > 0)
                        .max_by_key(|&r| (free[r], std::cmp::Reverse(r)))
                    else {
                        break;
                    };
                    moves.push(Move { page: e, to: out });
                    free[out] -= 1;
                    free[pages[e].rank] += 1;
                    pages[e].rank
                }
            };
            moves.push(Move { page: i, to });
            free[to] -= 1;
            free[pages[i].rank] += 1;
        }
        moves
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reshape(pct: f64, ranks: usize) -> Reshape {
        Reshape::new(
            &ReshapeConfig {
                pages_pct: pct,
                period_ms: 100,
                hot_ranks: 0,
            },
            ranks,
        )
        .unwrap()
    }

    fn page(count: u32, rank: usize, frame: u64) -> PageUse {
        PageUse { count, rank, frame }
    }

    #[test]
    fn the_most_accessed_pages_on_cold_ranks_move_to_the_first_hot_rank_with_room() {
        // 4 ranks: 0 and 1 hot. 10 pages, 20 % → the 2 most accessed: pages 3 (90) and 7
        // (80). Page 3 is on cold rank 2, page 7 already on hot rank 1: only page 3 moves,
        // to rank 0 if it has room; rank 0 is full, rank 1 has one page.
        let r = reshape(20.0, 4);
        let mut pages: Vec<PageUse> = (0..10)
            .map(|i| page(10 + i, 2 + (i as usize % 2), 100 + u64::from(i)))
            .collect();
        pages[3] = page(90, 2, 103);
        pages[7] = page(80, 1, 107);
        assert_eq!(r.hot_pages(10), 2);
        assert_eq!(r.plan(&pages, &[0, 1, 5, 5]), vec![Move { page: 3, to: 1 }]);
        // 25 % of 10 is ⌈2.5⌉ = 3: page 9 (count 19, cold rank 3) too, after page 3.
        let r = reshape(25.0, 4);
        assert_eq!(
            r.plan(&pages, &[0, 2, 5, 5]),
            vec![Move { page: 3, to: 1 }, Move { page: 9, to: 1 }]
        );
    }

    #[test]
    fn a_full_hot_side_swaps_its_least_accessed_page_out_first() {
        // 2 ranks, rank 0 hot and full. The hot page (5 accesses, rank 1) displaces the
        // least accessed page on rank 0 (count 1, frame 2, before frame 1 with count 2).
        let r = reshape(33.0, 2);
        let pages = [page(2, 0, 1), page(1, 0, 2), page(5, 1, 9)];
        assert_eq!(
            r.plan(&pages, &[0, 3]),
            vec![Move { page: 1, to: 1 }, Move { page: 2, to: 0 }]
        );
        // No room anywhere: nothing moves.
        assert_eq!(r.plan(&pages, &[0, 0]), vec![]);
    }

    #[test]
    fn pages_never_accessed_are_never_hot_and_ties_go_to_the_lower_page() {
        let r = reshape(100.0, 2);
        assert_eq!(r.plan(&[page(0, 1, 5), page(0, 1, 6)], &[4, 4]), vec![]);
        let r = reshape(50.0, 2);
        // Equal counts: frame 3 (page 1) is hot, frame 8 (page 0) is not.
        assert_eq!(
            r.plan(&[page(4, 1, 8), page(4, 1, 3)], &[4, 4]),
            vec![Move { page: 1, to: 0 }]
        );
    }

    #[test]
    fn bad_settings_are_refused_naming_the_key() {
        let c = |pct: f64, period_ms: u64, hot_ranks: usize| ReshapeConfig {
            pages_pct: pct,
            period_ms,
            hot_ranks,
        };
        assert_eq!(
            Reshape::new(&c(0.0, 100, 0), 4).unwrap_err(),
            "memory.reshape.pages_pct: expected a share in (0, 100] %, got 0"
        );
        assert_eq!(
            Reshape::new(&c(f64::NAN, 100, 0), 4).unwrap_err(),
            "memory.reshape.pages_pct: expected a share in (0, 100] %, got NaN"
        );
        assert_eq!(
            Reshape::new(&c(5.0, 0, 0), 4).unwrap_err(),
            "memory.reshape.period_ms: expected 1..=3600000 ms, got 0"
        );
        assert_eq!(
            Reshape::new(&c(5.0, 100, 4), 4).unwrap_err(),
            "memory.reshape.hot_ranks: expected 1..4 hot ranks (some hot, some cold) on 4 ranks, got 4"
        );
        assert_eq!(
            Reshape::new(&c(5.0, 100, 0), 1).unwrap_err(),
            "memory.reshape.hot_ranks: expected 1..1 hot ranks (some hot, some cold) on 1 ranks, got 0 (half the ranks)"
        );
        let r = Reshape::new(&c(5.0, 3000, 0), 12).unwrap();
        assert_eq!((r.hot, r.period_ns), (6, 3_000_000_000));
    }
}
