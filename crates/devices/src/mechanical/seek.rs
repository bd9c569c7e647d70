//! Seek-time curves of DiskSim's `dm_mech_g1`: the extracted table (linear interpolation
//! between measured distances, linear extrapolation past the last one) and the
//! Ruemmler–Wilkes `hpl` equation, optionally with the first ten distances given
//! explicitly (`hplplus10`).

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum SeekDef {
    /// `table` rows: (distance in cylinders, time in ms), increasing distances.
    Extracted { table: Vec<(u32, f64)> },
    /// `hpl`: [boundary, sqrt-part constant, sqrt-part multiplier, linear constant,
    /// linear multiplier, single-cylinder time (−1: use the equation)], ms.
    Hpl {
        hpl: [f64; 6],
        #[serde(default)]
        single_cylinder_ms: f64,
    },
    Hplplus10 {
        hpl: [f64; 6],
        first_ten_ms: [f64; 10],
    },
}

#[derive(Clone, Debug)]
pub struct Seek {
    def: SeekDef,
    /// `time_ms` for every distance below its length, computed once: a lookup instead
    /// of a binary search and a division per seek.
    dense: Vec<f64>,
}

impl Seek {
    pub fn new(def: SeekDef) -> Result<Seek, String> {
        match &def {
            SeekDef::Extracted { table } => {
                if table.len() < 2 {
                    return Err("timing.seek.table: expected at least two rows".into());
                }
                for w in table.windows(2) {
                    if w[1].0 <= w[0].0 {
                        return Err(format!(
                            "timing.seek.table: distances must increase ({} then {})",
                            w[0].0, w[1].0
                        ));
                    }
                }
                if table.iter().any(|r| !r.1.is_finite() || r.0 == 0) {
                    return Err("timing.seek.table: expected distances ≥ 1 and finite times".into());
                }
            }
            SeekDef::Hpl { hpl, .. } | SeekDef::Hplplus10 { hpl, .. } => {
                if hpl.iter().any(|v| !v.is_finite()) {
                    return Err("timing.seek.hpl: expected six finite numbers".into());
                }
            }
        }
        if let SeekDef::Hplplus10 { first_ten_ms, .. } = &def {
            if first_ten_ms.iter().any(|v| !v.is_finite() || *v < 0.0) {
                return Err("timing.seek.first_ten_ms: expected ten times ≥ 0".into());
            }
        }
        Ok(Seek { def, dense: vec![] })
    }

    /// Tabulate the curve for distances below `cylinders` (at most 2^20 of them; farther
    /// seeks, which a drive that size cannot make, are computed).
    pub fn tabulate(&mut self, cylinders: u32) {
        let n = cylinders.min(1 << 20);
        self.dense = (0..n).map(|d| self.compute_ms(d)).collect();
    }

    /// Seek time in ms for a move of `dist` cylinders (0 for no move).
    pub fn time_ms(&self, dist: u32) -> f64 {
        match self.dense.get(dist as usize) {
            Some(&t) => t,
            None => self.compute_ms(dist),
        }
    }

    fn compute_ms(&self, dist: u32) -> f64 {
        if dist == 0 {
            return 0.0;
        }
        let d = dist as f64;
        match &self.def {
            SeekDef::Extracted { table } => {
                // Rows d_i ≤ d < d_{i+1}; past the end, extrapolate from the last two.
                let i = table.partition_point(|r| r.0 < dist);
                if let Some(r) = table.get(i) {
                    if r.0 == dist {
                        return r.1;
                    }
                }
                let i = i.clamp(1, table.len() - 1);
                let (d1, t1) = table[i - 1];
                let (d2, t2) = table[i];
                t1 + (d - d1 as f64) * (t2 - t1) / (d2 as f64 - d1 as f64)
            }
            SeekDef::Hpl {
                hpl,
                single_cylinder_ms,
            } => {
                if dist == 1 && hpl[5] != -1.0 {
                    *single_cylinder_ms
                } else {
                    hpl_eq(hpl, d)
                }
            }
            SeekDef::Hplplus10 { hpl, first_ten_ms } => match first_ten_ms.get(dist as usize - 1) {
                Some(t) => *t,
                None => hpl_eq(hpl, d),
            },
        }
    }
}

fn hpl_eq(hpl: &[f64; 6], d: f64) -> f64 {
    if d < hpl[0] {
        hpl[1] + hpl[2] * d.sqrt()
    } else {
        hpl[3] + hpl[4] * d
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extracted_interpolates_and_extrapolates() {
        let s = Seek::new(SeekDef::Extracted {
            table: vec![(1, 1.0), (3, 2.0), (10, 5.5)],
        })
        .unwrap();
        assert_eq!(s.time_ms(0), 0.0);
        assert_eq!(s.time_ms(1), 1.0);
        assert!((s.time_ms(2) - 1.5).abs() < 1e-12);
        assert_eq!(s.time_ms(3), 2.0);
        assert!((s.time_ms(5) - 3.0).abs() < 1e-12);
        // past the table: slope of the last segment (0.5 ms per cylinder)
        assert!((s.time_ms(12) - 6.5).abs() < 1e-12);
    }

    #[test]
    fn hplplus10_uses_table_then_equation() {
        // HP C2247 values (DiskSim hp_c2247a_validate.model).
        let s = Seek::new(SeekDef::Hplplus10 {
            hpl: [300.0, 3.81, 0.33, 7.75, 0.0059, -1.0],
            first_ten_ms: [2.89, 3.68, 3.81, 3.98, 4.27, 4.65, 4.97, 5.2, 5.4, 5.6],
        })
        .unwrap();
        assert_eq!(s.time_ms(1), 2.89);
        assert_eq!(s.time_ms(10), 5.6);
        assert!((s.time_ms(100) - (3.81 + 0.33 * 10.0)).abs() < 1e-12);
        assert!((s.time_ms(1000) - (7.75 + 5.9)).abs() < 1e-12);
    }
}

#[cfg(test)]
mod table_tests {
    use super::*;

    #[test]
    fn tabulated_curve_is_the_computed_one() {
        let def = SeekDef::Extracted {
            table: vec![(1, 1.0), (4, 1.6), (10, 2.8)],
        };
        let plain = Seek::new(def.clone()).unwrap();
        let mut dense = Seek::new(def).unwrap();
        dense.tabulate(8);
        // Inside the table (0–7) and past it (computed, extrapolated past row 10).
        for d in 0..20 {
            assert_eq!(dense.time_ms(d), plain.time_ms(d), "distance {d}");
        }
        // Hand-computed: 2 cylinders interpolate 1.0 → 1.6 over 3: 1.2 ms; 12 extrapolate
        // the last segment (0.2 ms per cylinder): 3.2 ms.
        assert!((dense.time_ms(2) - 1.2).abs() < 1e-12);
        assert!((dense.time_ms(12) - 3.2).abs() < 1e-12);
        assert_eq!(dense.time_ms(0), 0.0);
    }
}
