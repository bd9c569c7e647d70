//! Geometry queries: where on the platters an offset lies, and what it costs to get there.
//!
//! Functions that place or pick copies by head position (FS2, thesis ch. 5) and the
//! geometry probe (ch. 6) need more than LBA distance. A device model with a mechanical
//! layout answers through [`Geometry`], handed to functions in [`DeviceInfo::geometry`]
//! at attach time; a model without one (parametric HDD, flash, SSD) has `None`, and a
//! function that needs geometry refuses to attach with [`DeviceInfo::require_geometry`]'s
//! message rather than silently working on LBA distance.
//!
//! [`DeviceInfo::geometry`]: crate::device::DeviceInfo::geometry
//! [`DeviceInfo::require_geometry`]: crate::device::DeviceInfo::require_geometry

use crate::time::Nanos;

/// Where an offset's first sector lies.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Location {
    /// Index of the recording zone (band of cylinders with the same sectors per track).
    pub zone: u32,
    pub cylinder: u32,
    /// Recording surface (head).
    pub surface: u32,
    /// Sector index on its track.
    pub sector: u32,
    pub sectors_per_track: u32,
    /// Where the sector starts, as a fraction of a revolution in [0, 1), in the same frame
    /// as [`Geometry::angle_at`].
    pub angle: f64,
}

/// A mechanical model's geometry, immutable and shared (queries never change the model's
/// state: they answer from its layout, seek curve and rotation, not its arm position).
pub trait Geometry: Send + Sync + std::fmt::Debug {
    /// `None` past the end of the device.
    fn locate(&self, offset: u64) -> Option<Location>;

    /// One revolution.
    fn rotation_period(&self) -> Nanos;

    /// The angle under the heads at time `t`, a fraction of a revolution in [0, 1).
    fn angle_at(&self, t: Nanos) -> f64;

    /// Positioning time from the sector holding `from` to the one holding `to` (seek curve,
    /// at least a head switch on a surface change, write settling for a write that moves);
    /// `None` if either lies past the end.
    fn seek_time(&self, from: u64, to: u64, write: bool) -> Option<Nanos>;

    /// Time from `t` until the sector holding `offset` passes under the heads.
    fn rotational_latency(&self, t: Nanos, offset: u64) -> Option<Nanos> {
        let a = self.locate(offset)?.angle;
        let mut d = a - self.angle_at(t);
        if d < 0.0 {
            d += 1.0;
        }
        Some((d * self.rotation_period() as f64).round() as Nanos)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One zone, 100 sectors of 512 B per track, 2 surfaces, 10 ms a revolution, 1 ms per
    /// cylinder of seek: enough to check the provided method by hand.
    #[derive(Debug)]
    struct Toy;
    impl Geometry for Toy {
        fn locate(&self, offset: u64) -> Option<Location> {
            let s = offset / 512;
            (s < 100 * 2 * 10).then(|| Location {
                zone: 0,
                cylinder: (s / 200) as u32,
                surface: ((s / 100) % 2) as u32,
                sector: (s % 100) as u32,
                sectors_per_track: 100,
                angle: (s % 100) as f64 / 100.0,
            })
        }
        fn rotation_period(&self) -> Nanos {
            10_000_000
        }
        fn angle_at(&self, t: Nanos) -> f64 {
            (t % 10_000_000) as f64 / 10_000_000.0
        }
        fn seek_time(&self, from: u64, to: u64, _write: bool) -> Option<Nanos> {
            let (a, b) = (self.locate(from)?, self.locate(to)?);
            Some(a.cylinder.abs_diff(b.cylinder) as Nanos * 1_000_000)
        }
    }

    #[test]
    fn rotational_latency_wraps_around_the_revolution() {
        // Sector 25 starts at a quarter turn; at t = 0 the head is at 0: 2.5 ms to wait.
        assert_eq!(Toy.rotational_latency(0, 25 * 512), Some(2_500_000));
        // At t = 3 ms (0.3 turn) the sector has just passed: 9.5 ms to wait.
        assert_eq!(Toy.rotational_latency(3_000_000, 25 * 512), Some(9_500_000));
        assert_eq!(Toy.rotational_latency(0, 1 << 40), None);
        assert_eq!(Toy.seek_time(0, 512 * 200 * 3, false), Some(3_000_000));
    }
}
