//! PARAID's analytical models: soft-state storage (Eq. 1) and energy savings (Eq. 2).

use crate::raid::stripe::Level;

/// Eq. 1: the share `S_i` of a lowest-gear disk that gear `i` uses, for gears of
/// `gears[i]` disks (increasing; the last is the whole array). For RAID-5 the paper's
/// system
///
/// ```text
/// Σ S_i = 1,   (Σ_{j≥i} S_j)·(G_i − G_{i−1}) = (G_{i−1} − 1)·S_{i−1}   (i = 2..M)
/// ```
///
/// telescopes to `Σ_{j≥i} S_j = (G_1 − 1)/(G_i − 1)` (a gear of G disks stores G − 1 disks'
/// worth of data); RAID-0's analogue (no parity disk) is `G_1/G_i`. `S_M` is the original
/// RAID's share, `S_1..S_{M−1}` the soft-state regions. `None` for gears that are not
/// increasing, or too small for the level (RAID-5: 3 ≤ G_1; RAID-0: 1 ≤ G_1).
pub fn shares(level: Level, gears: &[usize]) -> Option<Vec<f64>> {
    let min = if level == Level::Raid5 { 3 } else { 1 };
    if gears.is_empty() || gears[0] < min || gears.windows(2).any(|w| w[0] >= w[1]) {
        return None;
    }
    let capacity = |g: usize| match level {
        Level::Raid5 => (g - 1) as f64,
        Level::Raid0 => g as f64,
    };
    let tail = |i: usize| capacity(gears[0]) / capacity(gears[i]);
    Some(
        (0..gears.len())
            .map(|i| {
                tail(i)
                    - if i + 1 < gears.len() {
                        tail(i + 1)
                    } else {
                        0.0
                    }
            })
            .collect(),
    )
}

/// Eq. 2: the fraction of power saved by running `g1` of `d` disks with the rest in standby,
/// against all `d` on: `1 − [(D − G1)·P_standby + G1·P_on] / (D·P_on)`. `p_on` is the idle
/// or the active power (the paper quotes both bases).
pub fn savings(d: usize, g1: usize, p_standby: f64, p_on: f64) -> f64 {
    let (d, g1) = (d as f64, g1 as f64);
    1.0 - ((d - g1) * p_standby + g1 * p_on) / (d * p_on)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: &[f64], b: &[f64]) -> bool {
        a.len() == b.len() && a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-12)
    }

    #[test]
    fn eq1_gives_the_digests_worked_shares() {
        let r5 = |g: &[usize]| shares(Level::Raid5, g).unwrap();
        assert!(close(&r5(&[4, 5]), &[0.25, 0.75]));
        assert!(close(&r5(&[3, 5]), &[0.5, 0.5]));
        assert!(close(&r5(&[3, 4, 5]), &[1.0 / 3.0, 1.0 / 6.0, 0.5]));
        assert!(close(&shares(Level::Raid0, &[2, 5]).unwrap(), &[0.6, 0.4]));
        // The paper's recurrence holds for each.
        for g in [[3usize, 4, 5], [3, 6, 9]] {
            let s = r5(&g);
            for i in 1..3 {
                let tail: f64 = s[i..].iter().sum();
                let lhs = tail * (g[i] - g[i - 1]) as f64;
                assert!((lhs - (g[i - 1] - 1) as f64 * s[i - 1]).abs() < 1e-12);
            }
        }
        assert_eq!(
            shares(Level::Raid5, &[2, 5]),
            None,
            "RAID-5 needs 3 disks a gear"
        );
        assert_eq!(shares(Level::Raid5, &[4, 4]), None);
        assert_eq!(shares(Level::Raid0, &[]), None);
    }

    #[test]
    fn eq2_gives_the_papers_33_to_42_and_22_to_28_percent() {
        // Fujitsu MAP3367: standby 2.9 W, idle 6.5 W, active 9.6 W (the paper's Table II).
        let pct = |g1, p_on| (savings(5, g1, 2.9, p_on) * 1000.0).round() / 10.0;
        assert_eq!(pct(2, 6.5), 33.2);
        assert_eq!(pct(2, 9.6), 41.9);
        assert_eq!(pct(3, 6.5), 22.2);
        assert_eq!(pct(3, 9.6), 27.9);
        assert_eq!(
            savings(5, 5, 2.9, 6.5),
            0.0,
            "the highest gear saves nothing"
        );
    }
}
