//! One 64-byte cache line as eight little-endian words, and how a write of a new line into
//! a PRAM frame is encoded: every bit (the baseline), only the changed bits (differential
//! write, read-before-write) or data inverting per n-bit unit with one flag bit per unit.

use serde::{Deserialize, Serialize};

/// Bytes per line: the captures' line size, fixed so a line is eight machine words.
pub const LINE_BYTES: usize = 64;
/// Bits per line.
pub const LINE_BITS: u32 = 512;

/// A line's 512 bits; byte `i` is bits `8i..8i+8` of word `i / 8` (little-endian).
pub type Line = [u64; 8];

/// Flag bits of a frame under data inverting: one per unit, at most 256 (2-bit units).
pub type Flags = [u64; 4];

/// A line from 64 bytes.
pub fn from_bytes(b: &[u8; LINE_BYTES]) -> Line {
    let mut l = [0u64; 8];
    for (w, c) in l.iter_mut().zip(b.chunks_exact(8)) {
        *w = u64::from_le_bytes(c.try_into().expect("8-byte chunk"));
    }
    l
}

/// Writes `bytes` into `line` at byte offset `off` (`off + bytes.len() <= 64`).
pub fn put_bytes(line: &mut Line, off: usize, bytes: &[u8]) {
    let n = bytes.len();
    if let (Ok(word), 0) = (<[u8; 8]>::try_from(bytes), off % 8) {
        // An aligned 8-byte store (the commonest): the word is replaced, no copy.
        line[off / 8] = u64::from_le_bytes(word);
        return;
    }
    if n > 0 && n <= 8 && off % 8 + n <= 8 {
        // Within one word (nearly every store): one masked merge.
        let mut v = [0u8; 8];
        v[..n].copy_from_slice(bytes);
        let shift = (off % 8) * 8;
        let mask = if n == 8 {
            u64::MAX
        } else {
            ((1u64 << (n * 8)) - 1) << shift
        };
        let w = &mut line[off / 8];
        *w = (*w & !mask) | ((u64::from_le_bytes(v) << shift) & mask);
        return;
    }
    for (i, &b) in bytes.iter().enumerate() {
        let at = off + i;
        let shift = (at % 8) * 8;
        let w = &mut line[at / 8];
        *w = (*w & !(0xffu64 << shift)) | (u64::from(b) << shift);
    }
}

/// The way of a set's tags holding `key`, if any. Every way is compared, without an early
/// exit: the way that hits is as good as random, so a search that stops there mispredicts
/// its exit on nearly every access (it was the largest cost of the L1's hit path). A key is
/// in at most one way of its set.
#[inline]
pub fn way_of(tags: &[u64], key: u64) -> Option<usize> {
    // A plain index, not an `Option`, in the loop: it compiles to a conditional move.
    let mut hit = usize::MAX;
    for (w, &t) in tags.iter().enumerate() {
        if t == key {
            hit = w;
        }
    }
    (hit != usize::MAX).then_some(hit)
}

/// Bits that differ between two lines.
pub fn diff_bits(a: &Line, b: &Line) -> u32 {
    a.iter().zip(b).map(|(x, y)| (x ^ y).count_ones()).sum()
}

/// How a PRAM write is carried out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Encoding {
    /// Baseline: every cell of the line is programmed on every write.
    Bl,
    /// Differential write: the array compares and programs only cells whose value changes.
    Dw,
    /// Read-before-write: the controller reads the old line first, then programs only the
    /// changed cells (the same bit changes as DW, plus one array read per write).
    Rbw,
    /// Data inverting with `unit`-bit units (2..=64, a power of two): each unit is stored
    /// as is or inverted, whichever changes fewer cells counting its flag bit.
    Di { unit: u32 },
}

impl Encoding {
    /// Checks the unit size of data inverting.
    pub fn check(&self) -> Result<(), String> {
        match self {
            Encoding::Di { unit } if !(2..=64).contains(unit) || !unit.is_power_of_two() => Err(
                format!("data-inverting unit {unit} bits: expected a power of two from 2 to 64"),
            ),
            _ => Ok(()),
        }
    }

    /// Flag bits per line (data inverting only).
    pub fn flag_bits(&self) -> u32 {
        match self {
            Encoding::Di { unit } => LINE_BITS / unit,
            _ => 0,
        }
    }

    /// Whether each write reads the line first (RBW).
    pub fn reads_before_write(&self) -> bool {
        matches!(self, Encoding::Rbw)
    }
}

/// What one write did to a frame: the cells programmed, as masks over the data and the
/// flag bits (the wear), and their count (the bit changes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Programmed {
    pub data: Line,
    pub flags: Flags,
    pub bits: u32,
}

impl Programmed {
    /// `bits` set to the cells the masks name.
    pub fn counted(mut self) -> Self {
        self.bits = self
            .data
            .iter()
            .chain(&self.flags)
            .map(|w| w.count_ones())
            .sum();
        self
    }
}

/// Writes the logical line `new` into a frame holding the stored bits `stored` and flags
/// `flags` under `enc`; updates both and returns the cells programmed.
pub fn write(enc: Encoding, stored: &mut Line, flags: &mut Flags, new: &Line) -> Programmed {
    match enc {
        Encoding::Bl => {
            *stored = *new;
            Programmed {
                data: [u64::MAX; 8],
                flags: [0; 4],
                bits: LINE_BITS,
            }
        }
        Encoding::Dw | Encoding::Rbw => {
            let mut data = [0u64; 8];
            for i in 0..8 {
                data[i] = stored[i] ^ new[i];
            }
            *stored = *new;
            let bits = data.iter().map(|w| w.count_ones()).sum();
            Programmed {
                data,
                flags: [0; 4],
                bits,
            }
        }
        Encoding::Di { unit } => write_inverting(unit, stored, flags, new),
    }
}

/// Per-unit population counts of `x`: each `unit`-bit field of the result holds the number
/// of ones in that field of `x` (the SWAR steps of a popcount, stopped at the unit's width;
/// a count of at most `unit` fits its field). Portable code has no `popcnt` instruction, so
/// two counts per unit cost more than the rest of a data-inverting write.
#[inline(always)]
fn unit_counts(x: u64, unit: u32) -> u64 {
    let mut c = x - ((x >> 1) & 0x5555_5555_5555_5555);
    if unit >= 4 {
        c = (c & 0x3333_3333_3333_3333) + ((c >> 2) & 0x3333_3333_3333_3333);
    }
    if unit >= 8 {
        c = (c + (c >> 4)) & 0x0f0f_0f0f_0f0f_0f0f;
    }
    if unit >= 16 {
        c = (c + (c >> 8)) & 0x00ff_00ff_00ff_00ff;
    }
    if unit >= 32 {
        c = (c + (c >> 16)) & 0x0000_ffff_0000_ffff;
    }
    if unit >= 64 {
        c = (c + (c >> 32)) & 0xffff_ffff;
    }
    c
}

/// The masks of [`spread`]'s steps for `unit`-bit fields: after the step that moves blocks of
/// `b` bits (b = k/2, k/4, …, 1 for k = 64/unit bits), bit j sits at
/// j + (unit − 1)·(j without its bits below b), and at j·unit after the last.
const fn spread_masks(unit: u32) -> [u64; 6] {
    let k = 64 / unit;
    let mut out = [0u64; 6];
    let (mut i, mut b) = (0, k / 2);
    while b >= 1 {
        let (mut m, mut j) = (0u64, 0);
        while j < k {
            m |= 1 << (j + (unit - 1) * (j & !(b - 1)));
            j += 1;
        }
        out[i] = m;
        i += 1;
        b /= 2;
    }
    out
}

/// The unit-field layout of a word for `UNIT`-bit units.
struct Fields<const UNIT: u32>;

impl<const UNIT: u32> Fields<UNIT> {
    const PER_WORD: u32 = 64 / UNIT;
    const STEPS: usize = Self::PER_WORD.trailing_zeros() as usize;
    const MASKS: [u64; 6] = spread_masks(UNIT);
    const LOW: u64 = if Self::PER_WORD == 64 {
        u64::MAX
    } else {
        (1 << Self::PER_WORD) - 1
    };

    /// Bit u of `bits` (u < 64/UNIT) to bit u·UNIT, the lowest of field u (a `pdep` the
    /// portable target lacks), in log2(64/UNIT) shift-or-mask steps.
    #[inline(always)]
    fn spread(bits: u64) -> u64 {
        let mut x = bits & Self::LOW;
        let mut b = Self::PER_WORD / 2;
        let mut i = 0;
        while i < Self::STEPS {
            x = (x | (x << (b * (UNIT - 1)))) & Self::MASKS[i];
            b /= 2;
            i += 1;
        }
        x
    }

    /// The inverse of [`Fields::spread`]: the lowest bit of each field, packed (`pext`).
    #[inline(always)]
    fn gather(lows: u64) -> u64 {
        let mut x = lows;
        let mut b = 1;
        let mut i = Self::STEPS;
        while i > 0 {
            i -= 1;
            let keep = if i == 0 {
                Self::LOW
            } else {
                Self::MASKS[i - 1]
            };
            x = (x | (x >> (b * (UNIT - 1)))) & keep;
            b *= 2;
        }
        x
    }
}

/// Data inverting with `unit`-bit units: one copy per unit size, so that the loops over a
/// word's units unroll (as a run-time bound they cost a looped replay a third of its time).
fn write_inverting(unit: u32, stored: &mut Line, flags: &mut Flags, new: &Line) -> Programmed {
    match unit {
        2 => write_inverting_by::<2>(stored, flags, new),
        4 => write_inverting_by::<4>(stored, flags, new),
        8 => write_inverting_by::<8>(stored, flags, new),
        16 => write_inverting_by::<16>(stored, flags, new),
        32 => write_inverting_by::<32>(stored, flags, new),
        _ => write_inverting_by::<64>(stored, flags, new),
    }
}

fn write_inverting_by<const UNIT: u32>(
    stored: &mut Line,
    flags: &mut Flags,
    new: &Line,
) -> Programmed {
    let unit = UNIT;
    let per_word = 64 / unit;
    let unit_mask = if unit == 64 {
        u64::MAX
    } else {
        (1u64 << unit) - 1
    };
    // A unit is stored inverted when that programs fewer cells, its flag included:
    // (unit - c) + (1 - flag) < c + flag, i.e. c + flag > (unit + 1) / 2, where c counts
    // the cells that change if it is stored as is.
    let invert_at = unit / 2 + 1;
    let mut prog = Programmed {
        data: [0; 8],
        flags: [0; 4],
        bits: 0,
    };
    // A word's units' flags are `per_word` consecutive flag bits, in one flag word.
    let word_flags = if per_word == 64 {
        u64::MAX
    } else {
        (1u64 << per_word) - 1
    };
    for w in 0..8 {
        let counts = unit_counts(stored[w] ^ new[w], unit);
        let first = w as u32 * per_word;
        let (fw, fb) = ((first / 64) as usize, first % 64);
        let old_flags = (flags[fw] >> fb) & word_flags;
        let (invert, new_flags) = if (4..64).contains(&unit) {
            // Every unit at once: its flag joins its count in the unit's field (a sum of at
            // most unit + 1, below the field's top bit), and `(sum | top) - invert_at` keeps
            // the top bit exactly where sum >= invert_at, with no borrow between fields.
            let lsb = u64::MAX / unit_mask;
            let top = lsb << (unit - 1);
            let sum = counts + Fields::<UNIT>::spread(old_flags);
            let inv = (((sum | top) - lsb * u64::from(invert_at)) & top) >> (unit - 1);
            (inv.wrapping_mul(unit_mask), Fields::<UNIT>::gather(inv))
        } else {
            // 2-bit units (a sum of 3 reaches the field's top bit) and one 64-bit unit.
            let (mut invert, mut new_flags) = (0u64, 0u64);
            for u in 0..per_word {
                let flag = ((old_flags >> u) & 1) as u32;
                let c = ((counts >> (u * unit)) & unit_mask) as u32;
                let inv = u64::from(c + flag >= invert_at);
                invert |= (inv * unit_mask) << (u * unit);
                new_flags |= inv << u;
            }
            (invert, new_flags)
        };
        let out = new[w] ^ invert;
        prog.data[w] = stored[w] ^ out;
        stored[w] = out;
        let changed = old_flags ^ new_flags;
        prog.flags[fw] |= changed << fb;
        flags[fw] ^= changed << fb;
    }
    prog.counted()
}

/// The logical line a frame holds: its stored bits with inverted units turned back.
pub fn decode(enc: Encoding, stored: &Line, flags: &Flags) -> Line {
    let Encoding::Di { unit } = enc else {
        return *stored;
    };
    match unit {
        2 => decode_by::<2>(stored, flags),
        4 => decode_by::<4>(stored, flags),
        8 => decode_by::<8>(stored, flags),
        16 => decode_by::<16>(stored, flags),
        32 => decode_by::<32>(stored, flags),
        _ => decode_by::<64>(stored, flags),
    }
}

fn decode_by<const UNIT: u32>(stored: &Line, flags: &Flags) -> Line {
    let unit = UNIT;
    let per_word = 64 / unit;
    let unit_mask = if unit == 64 {
        u64::MAX
    } else {
        (1u64 << unit) - 1
    };
    let word_flags = if per_word == 64 {
        u64::MAX
    } else {
        (1u64 << per_word) - 1
    };
    let mut out = *stored;
    for (w, word) in out.iter_mut().enumerate() {
        // The word's units' flags, one flag word's consecutive bits, spread to their units'
        // lowest bits and widened to whole units without a branch per flag.
        let first = w as u32 * per_word;
        let fl = (flags[(first / 64) as usize] >> (first % 64)) & word_flags;
        *word ^= Fields::<UNIT>::spread(fl).wrapping_mul(unit_mask);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Data inverting unit by unit with two popcounts each: the definition the SWAR
    /// version must match.
    fn reference(unit: u32, stored: &mut Line, flags: &mut Flags, new: &Line) -> Programmed {
        let per_word = 64 / unit;
        let unit_mask = if unit == 64 {
            u64::MAX
        } else {
            (1u64 << unit) - 1
        };
        let mut prog = Programmed {
            data: [0; 8],
            flags: [0; 4],
            bits: 0,
        };
        for w in 0..8 {
            let mut out = 0u64;
            for u in 0..per_word {
                let m = unit_mask << (u * unit);
                let f = w as u32 * per_word + u;
                let (fw, fb) = ((f / 64) as usize, f % 64);
                let flag = (flags[fw] >> fb) & 1;
                let plain = ((stored[w] ^ new[w]) & m).count_ones() + flag as u32;
                let inverted = ((stored[w] ^ !new[w]) & m).count_ones() + (1 - flag as u32);
                let (bits, new_flag) = if inverted < plain {
                    (!new[w] & m, 1)
                } else {
                    (new[w] & m, 0)
                };
                out |= bits;
                if new_flag != flag {
                    prog.flags[fw] |= 1 << fb;
                    flags[fw] ^= 1 << fb;
                }
            }
            prog.data[w] = stored[w] ^ out;
            stored[w] = out;
        }
        prog.counted()
    }

    #[test]
    fn unit_counts_are_each_units_popcount() {
        // 0b1011 in the lowest 4-bit unit, 0xf in the next, 0 elsewhere.
        assert_eq!(unit_counts(0xfb, 4), 0x43);
        assert_eq!(unit_counts(0xfb, 8), 7);
        assert_eq!(unit_counts(0b11_10_01_00, 2), 0b10_01_01_00);
        assert_eq!(unit_counts(u64::MAX, 64), 64);
        assert_eq!(unit_counts(u64::MAX, 32), (32 << 32) | 32);
    }

    /// `spread` and `gather` against their bit-by-bit definitions: every value for up to 16
    /// units a word, random ones for 32.
    #[test]
    fn fields_spread_and_gather_bit_by_bit() {
        fn check<const UNIT: u32>(v: u64) {
            let k = 64 / UNIT;
            let mut want = 0u64;
            for u in 0..k {
                want |= ((v >> u) & 1) << (u * UNIT);
            }
            assert_eq!(Fields::<UNIT>::spread(v), want, "unit {UNIT}, {v:#x}");
            let low = if k == 64 { u64::MAX } else { (1 << k) - 1 };
            assert_eq!(Fields::<UNIT>::gather(want), v & low, "unit {UNIT}, {v:#x}");
        }
        for v in 0..1u64 << 16 {
            check::<4>(v);
            check::<8>(v);
            check::<16>(v);
            check::<32>(v);
            check::<64>(v);
        }
        let mut next = crate::cell_wear::tests::xorshift(0x1234_5678_9abc_def1);
        for _ in 0..100_000 {
            let v = next();
            check::<2>(v);
            check::<4>(v);
        }
    }

    #[test]
    fn data_inverting_matches_the_unit_by_unit_definition() {
        let mut next = crate::cell_wear::tests::xorshift(0x2545_f491_4f6c_dd1d);
        for unit in [2, 4, 8, 16, 32, 64] {
            let (mut s1, mut f1) = ([0u64; 8], [0u64; 4]);
            let (mut s2, mut f2) = (s1, f1);
            for step in 0..2000 {
                // Dense random lines, and sparse changes of the last one (few bits: most
                // units stay, some flip back), so every flag transition occurs.
                let mut new = decode(Encoding::Di { unit }, &s1, &f1);
                if step % 2 == 0 {
                    for w in new.iter_mut() {
                        *w = next();
                    }
                } else {
                    for w in new.iter_mut() {
                        *w ^= next() & next() & next();
                    }
                }
                let a = write(Encoding::Di { unit }, &mut s1, &mut f1, &new);
                let b = reference(unit, &mut s2, &mut f2, &new);
                assert_eq!((a, s1, f1), (b, s2, f2), "unit {unit}, step {step}");
                assert_eq!(decode(Encoding::Di { unit }, &s1, &f1), new);
            }
        }
    }
}
