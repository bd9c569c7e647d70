//! Where a volume byte lives in a striped array: RAID-0 and RAID-5 address mapping.
//!
//! The volume is cut into chunks of `chunk` bytes; a *stripe* is one chunk on each member
//! (at member offset `stripe · chunk`). RAID-0 puts data chunk k of stripe s on member k.
//! RAID-5 gives each stripe one parity chunk, rotating from the last member to the first
//! (parity on member `D − 1 − s mod D`: the "left" layouts), and places the D − 1 data
//! chunks either
//!
//! * **left-symmetric** (Linux md's default): starting on the member after the parity one
//!   and wrapping around, so consecutive data chunks visit every member in turn;
//! * **left-asymmetric** (the paper's Table I): in member order, skipping the parity one.

/// RAID level.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    Raid0,
    Raid5,
}

/// Where RAID-5 puts data around the rotating parity.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Parity {
    LeftSymmetric,
    LeftAsymmetric,
}

/// Where a volume byte lives: data chunk `k` of stripe `stripe`, `in_chunk` bytes into it,
/// on member `disk`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Place {
    pub stripe: u64,
    pub k: usize,
    pub disk: usize,
    pub in_chunk: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    pub level: Level,
    pub parity: Parity,
    /// Members.
    pub disks: usize,
    /// Chunk size in bytes.
    pub chunk: u64,
    /// Stripes (chunks per member).
    pub stripes: u64,
}

impl Layout {
    /// Data chunks per stripe.
    #[inline]
    pub fn data_disks(&self) -> usize {
        match self.level {
            Level::Raid0 => self.disks,
            Level::Raid5 => self.disks - 1,
        }
    }

    /// Volume bytes.
    pub fn capacity(&self) -> u64 {
        self.stripes * self.chunk * self.data_disks() as u64
    }

    /// The member holding stripe `s`'s parity (RAID-5).
    #[inline]
    pub fn parity_disk(&self, s: u64) -> Option<usize> {
        match self.level {
            Level::Raid0 => None,
            Level::Raid5 => Some(self.disks - 1 - (s % self.disks as u64) as usize),
        }
    }

    /// The member holding data chunk `k` of stripe `s`.
    #[inline]
    pub fn data_disk(&self, s: u64, k: usize) -> usize {
        match (self.parity_disk(s), self.parity) {
            (None, _) => k,
            (Some(p), Parity::LeftSymmetric) => (p + 1 + k) % self.disks,
            (Some(p), Parity::LeftAsymmetric) => k + usize::from(k >= p),
        }
    }

    /// Where volume byte `offset` lives.
    #[inline]
    pub fn locate(&self, offset: u64) -> Place {
        let chunk = offset / self.chunk;
        let n = self.data_disks() as u64;
        let stripe = chunk / n;
        let k = (chunk % n) as usize;
        Place {
            stripe,
            k,
            disk: self.data_disk(stripe, k),
            in_chunk: offset % self.chunk,
        }
    }

    /// The member offset of byte `in_chunk` of stripe `s`'s chunks (before the region base).
    #[inline]
    pub fn member_offset(&self, s: u64, in_chunk: u64) -> u64 {
        s * self.chunk + in_chunk
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raid5(disks: usize, parity: Parity) -> Layout {
        Layout {
            level: Level::Raid5,
            parity,
            disks,
            chunk: 1,
            stripes: 100,
        }
    }

    /// Chunk c (0-based) → (member, stripe), with members numbered from 1 as in the paper.
    fn table(l: &Layout, chunks: u64) -> Vec<(usize, u64)> {
        (0..chunks)
            .map(|c| {
                let p = l.locate(c * l.chunk);
                (p.disk + 1, p.stripe + 1)
            })
            .collect()
    }

    #[test]
    fn the_papers_table_i_five_disk_gear_is_left_asymmetric() {
        // Table I, gear 2 (five disks): blocks 1–20 and parity per row.
        let l = raid5(5, Parity::LeftAsymmetric);
        let want = [
            (1, 1),
            (2, 1),
            (3, 1),
            (4, 1), // row 1: 1 2 3 4 (1-4)
            (1, 2),
            (2, 2),
            (3, 2),
            (5, 2), // row 2: 5 6 7 (5-8) 8
            (1, 3),
            (2, 3),
            (4, 3),
            (5, 3), // row 3: 9 10 (9-12) 11 12
            (1, 4),
            (3, 4),
            (4, 4),
            (5, 4), // row 4: 13 (13-16) 14 15 16
            (2, 5),
            (3, 5),
            (4, 5),
            (5, 5), // row 5: (17-20) 17 18 19 20
        ];
        assert_eq!(table(&l, 20), want);
        let parity: Vec<usize> = (0..5).map(|s| l.parity_disk(s).unwrap() + 1).collect();
        assert_eq!(parity, vec![5, 4, 3, 2, 1]);
    }

    #[test]
    fn the_papers_table_i_four_disk_gear_holds_disk_5_in_order() {
        // Disk 5 of the five-disk gear holds, row by row: P(1-4), 8, 12, 16, 20. Gear 1 is
        // a four-disk RAID-5 of the same layout whose data are those chunks in order:
        // row 1: (1-4) 8 12 P; row 2: 16 20 P -.
        let five = raid5(5, Parity::LeftAsymmetric);
        let disk5: Vec<String> = (0..5)
            .map(|s| {
                if five.parity_disk(s) == Some(4) {
                    format!("P{s}")
                } else {
                    let k = (0..4).find(|&k| five.data_disk(s, k) == 4).unwrap();
                    format!("{}", s * 4 + k as u64 + 1)
                }
            })
            .collect();
        assert_eq!(disk5, vec!["P0", "8", "12", "16", "20"]);
        let four = raid5(4, Parity::LeftAsymmetric);
        assert_eq!(
            table(&four, 5),
            vec![(1, 1), (2, 1), (3, 1), (1, 2), (2, 2)]
        );
        assert_eq!(four.parity_disk(0), Some(3));
        assert_eq!(four.parity_disk(1), Some(2));
    }

    #[test]
    fn left_symmetric_is_linux_mds_default_rotation() {
        // md's raid5 left-symmetric, 4 disks (drivers/md/raid5.c, ALGORITHM_LEFT_SYMMETRIC):
        //   0  1  2  P
        //   4  5  P  3
        //   8  P  6  7
        //   P  9 10 11
        let l = raid5(4, Parity::LeftSymmetric);
        let mut rows = vec![vec![String::new(); 4]; 4];
        for c in 0..12u64 {
            let p = l.locate(c);
            rows[p.stripe as usize][p.disk] = c.to_string();
        }
        for s in 0..4u64 {
            rows[s as usize][l.parity_disk(s).unwrap()] = "P".into();
        }
        let want = [
            ["0", "1", "2", "P"],
            ["4", "5", "P", "3"],
            ["8", "P", "6", "7"],
            ["P", "9", "10", "11"],
        ];
        for (r, w) in rows.iter().zip(want) {
            assert_eq!(r, &w.map(String::from).to_vec());
        }
    }

    #[test]
    fn raid0_stripes_chunks_round_robin() {
        let l = Layout {
            level: Level::Raid0,
            parity: Parity::LeftSymmetric,
            disks: 3,
            chunk: 65536,
            stripes: 10,
        };
        assert_eq!(l.capacity(), 3 * 10 * 65536);
        // Byte 200,000: chunk 3 (196,608..262,144) → stripe 1, member 0, 3,392 bytes in.
        let p = l.locate(200_000);
        assert_eq!((p.stripe, p.k, p.disk, p.in_chunk), (1, 0, 0, 3392));
        assert_eq!(l.member_offset(p.stripe, p.in_chunk), 65536 + 3392);
        assert_eq!(l.parity_disk(1), None);
    }
}
