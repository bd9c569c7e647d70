//! Write counts of every PRAM and STT-RAM cell, for the lifetime (the most-written cell).
//!
//! The counters are bit-sliced: a row of cells (a frame's data and flag cells, or a write
//! buffer's) keeps 32 planes, plane `p` holding bit `p` of every cell's count. A write adds
//! one to the cells of a mask by a ripple carry over whole words, so its cost follows the
//! carries (a few planes), not the number of cells it programmed: a cell-at-a-time counter
//! was a quarter of a looped replay's time. Same memory as one `u32` per cell; counts
//! saturate at 2^32 − 1 as those did.

/// Planes per row: counts up to 2^32 − 1.
const PLANES: usize = 32;

/// Words per plane at most (the carry and candidate arrays' size).
const MAX_WORDS: usize = 16;

pub struct CellWear {
    /// Words per plane (cells per row / 64, rounded up).
    words: usize,
    /// The last word's valid cells (a row whose cells are not a multiple of 64).
    last_mask: u64,
    /// Row-major: `rows` × `PLANES` × `words`.
    planes: Vec<u64>,
}

impl CellWear {
    /// `rows` rows of `cells_per_row` cells (1 to 1,024: a line's 512 data cells and at most
    /// 256 flag cells fit).
    pub fn new(rows: usize, cells_per_row: usize) -> Self {
        assert!(
            (1..=64 * MAX_WORDS).contains(&cells_per_row),
            "a row of {cells_per_row} cells"
        );
        let words = cells_per_row.div_ceil(64);
        let last_mask = match cells_per_row % 64 {
            0 => u64::MAX,
            r => (1u64 << r) - 1,
        };
        CellWear {
            words,
            last_mask,
            planes: vec![0; rows * PLANES * words],
        }
    }

    /// One write to each cell of `row` whose bit is set in `mask` (word `i` covers cells
    /// `64 i ..`; missing words are zero, bits beyond the row's cells are ignored).
    #[inline]
    pub fn add(&mut self, row: usize, mask: &[u64]) {
        let n = self.words;
        let mut carry = [0u64; MAX_WORDS];
        let mut any = 0;
        for (c, &m) in carry.iter_mut().zip(mask).take(n) {
            *c = m;
            any |= m;
        }
        carry[n - 1] &= self.last_mask;
        if any == 0 {
            return;
        }
        let row_planes = &mut self.planes[row * PLANES * n..(row + 1) * PLANES * n];
        for plane in row_planes.chunks_exact_mut(n) {
            let mut any = 0;
            for (x, c) in plane.iter_mut().zip(carry.iter_mut()) {
                let old = *x;
                *x = old ^ *c;
                *c &= old;
                any |= *c;
            }
            if any == 0 {
                return;
            }
        }
        // Counted past 2^32 − 1: those cells wrapped to zero in every plane; saturate them.
        for plane in row_planes.chunks_exact_mut(n) {
            for (x, c) in plane.iter_mut().zip(carry.iter()) {
                *x |= *c;
            }
        }
    }

    /// The largest count in `row`: from the top plane down, keep the cells that have the
    /// plane's bit whenever any of the remaining ones do.
    pub fn row_max(&self, row: usize) -> u64 {
        let n = self.words;
        let mut cand = [u64::MAX; MAX_WORDS];
        cand[n - 1] = self.last_mask;
        let mut value = 0u64;
        let row_planes = &self.planes[row * PLANES * n..(row + 1) * PLANES * n];
        for (p, plane) in row_planes.chunks_exact(n).enumerate().rev() {
            let mut t = [0u64; MAX_WORDS];
            let mut any = 0;
            for ((t, &c), &x) in t.iter_mut().zip(&cand).zip(plane) {
                *t = c & x;
                any |= *t;
            }
            if any != 0 {
                cand = t;
                value |= 1 << p;
            }
        }
        value
    }

    /// The count of one cell (tests and reports).
    pub fn count(&self, row: usize, cell: usize) -> u64 {
        let n = self.words;
        (0..PLANES)
            .map(|p| (self.planes[(row * PLANES + p) * n + cell / 64] >> (cell % 64) & 1) << p)
            .sum()
    }

    pub fn rows(&self) -> usize {
        if self.words == 0 {
            0
        } else {
            self.planes.len() / (PLANES * self.words)
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A xorshift64 stream from `seed` (non-zero): the crate's unit tests' random inputs.
    pub(crate) fn xorshift(seed: u64) -> impl FnMut() -> u64 {
        let mut x = seed;
        move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        }
    }

    /// Against one counter per cell, on random masks over rows of awkward widths.
    #[test]
    fn counts_as_one_counter_per_cell() {
        let mut next = xorshift(0x9E37_79B9_7F4A_7C15);
        for cells in [64, 100, 512, 512 + 64, 512 + 256] {
            let rows = 3;
            let mut w = CellWear::new(rows, cells);
            let mut model = vec![vec![0u64; cells]; rows];
            for _ in 0..3000 {
                let row = (next() % rows as u64) as usize;
                // Sparse and dense masks, and some words left out.
                let words = cells.div_ceil(64);
                let mask: Vec<u64> = (0..words)
                    .map(|_| match next() % 4 {
                        0 => 0,
                        1 => next() & next() & next(),
                        2 => u64::MAX,
                        _ => next(),
                    })
                    .collect();
                w.add(row, &mask);
                for (c, m) in model[row].iter_mut().enumerate() {
                    *m += mask[c / 64] >> (c % 64) & 1;
                }
            }
            for (r, m) in model.iter().enumerate() {
                for (c, &want) in m.iter().enumerate() {
                    assert_eq!(w.count(r, c), want, "cells {cells} row {r} cell {c}");
                }
                assert_eq!(
                    w.row_max(r),
                    *m.iter().max().unwrap(),
                    "cells {cells} row {r}"
                );
            }
            assert_eq!(w.rows(), rows);
        }
    }

    #[test]
    fn counts_saturate_at_the_top_of_32_bits() {
        let mut w = CellWear::new(1, 64);
        // Cell 0 at 2^32 − 2 (every plane but the lowest set), cell 1 at 2^32 − 1.
        for p in 0..PLANES {
            w.planes[p] = if p == 0 { 0b10 } else { 0b11 };
        }
        w.add(0, &[0b11]);
        assert_eq!(w.count(0, 0), u64::from(u32::MAX));
        assert_eq!(w.count(0, 1), u64::from(u32::MAX));
        assert_eq!(w.row_max(0), u64::from(u32::MAX));
        // Bits beyond a row's cells are not counted.
        let mut w = CellWear::new(1, 3);
        w.add(0, &[u64::MAX]);
        assert_eq!((w.count(0, 2), w.count(0, 3), w.row_max(0)), (1, 0, 1));
    }
}
