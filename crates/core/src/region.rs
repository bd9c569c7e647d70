//! Regions of devices that functions reserve for their own metadata.
//!
//! A function that persists state (a write-intent bitmap, a cache's map, a replica table)
//! reserves a byte range of a device ([`crate::Function::regions`]) and keeps it out of the
//! space it exports. The stack checks the reservations once, after `attach`; the executors
//! and the integrity checker learn of them when a run starts (see `docs/metadata.md`).

use crate::device::DeviceInfo;
use crate::io::DeviceId;

/// Regions start and end on this boundary: whole 4 KiB blocks, so metadata writes never
/// share a block (or a checker block) with user data, and live `O_DIRECT` I/O is aligned.
pub const REGION_ALIGN: u64 = 4096;

/// A byte range `[offset, offset + len)` of device `dev`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Region {
    pub dev: DeviceId,
    pub offset: u64,
    pub len: u64,
}

impl Region {
    /// The last `len` bytes of `device` (rounded down to [`REGION_ALIGN`]), where Linux md
    /// keeps a version-1.0 superblock and its bitmap: the space before it stays one
    /// contiguous range for the function's data.
    pub fn at_end(device: &DeviceInfo, len: u64) -> Result<Region, String> {
        let len = len.div_ceil(REGION_ALIGN) * REGION_ALIGN;
        let end = device.capacity / REGION_ALIGN * REGION_ALIGN;
        if len == 0 || len > end {
            return Err(format!(
                "a metadata region of {len} bytes does not fit on device `{}` ({} bytes)",
                device.name, device.capacity
            ));
        }
        Ok(Region {
            dev: device.id,
            offset: end - len,
            len,
        })
    }

    #[inline]
    pub fn end(&self) -> u64 {
        self.offset + self.len
    }

    /// Does `[offset, offset + len)` of device `dev` touch this region?
    #[inline]
    pub fn overlaps(&self, dev: DeviceId, offset: u64, len: u64) -> bool {
        dev == self.dev && offset < self.end() && offset.saturating_add(len) > self.offset
    }
}

/// Check the regions the layers of a stack reserve (`(layer name, region)`): aligned,
/// non-empty, on a device of the run, within it, and no two overlapping.
pub fn check(regions: &[(String, Region)], devices: &[DeviceInfo]) -> Result<(), String> {
    for (k, (who, r)) in regions.iter().enumerate() {
        let Some(d) = devices.get(r.dev as usize) else {
            return Err(format!(
                "function `{who}` reserves a metadata region on device {}, which does not exist",
                r.dev
            ));
        };
        if r.len == 0
            || !r.offset.is_multiple_of(REGION_ALIGN)
            || !r.len.is_multiple_of(REGION_ALIGN)
        {
            return Err(format!(
                "function `{who}`: metadata region bytes {}..{} of device `{}` must be whole {REGION_ALIGN}-byte blocks",
                r.offset,
                r.end(),
                d.name
            ));
        }
        if r.end() > d.capacity {
            return Err(format!(
                "function `{who}`: metadata region bytes {}..{} lies past the end of device `{}` ({} bytes)",
                r.offset,
                r.end(),
                d.name,
                d.capacity
            ));
        }
        if let Some((other, o)) = regions[..k]
            .iter()
            .find(|(_, o)| o.overlaps(r.dev, r.offset, r.len))
        {
            return Err(format!(
                "function `{who}`: metadata region bytes {}..{} of device `{}` overlaps the one of `{other}` (bytes {}..{})",
                r.offset,
                r.end(),
                d.name,
                o.offset,
                o.end()
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::disk;

    #[test]
    fn at_end_takes_the_last_whole_blocks() {
        let d = disk(3, "d");
        // 1,000,000,000 bytes: the last whole block ends at 999,997,440.
        let r = Region::at_end(&d, 5000).unwrap();
        assert_eq!((r.dev, r.offset, r.len), (3, 999_997_440 - 8192, 8192));
        assert!(Region::at_end(&d, 2_000_000_000).is_err());
    }

    #[test]
    fn reservations_are_checked() {
        let devs = vec![disk(0, "a"), disk(1, "b")];
        let r = |dev, offset, len| Region { dev, offset, len };
        let ok = vec![
            ("x".to_string(), r(0, 0, 4096)),
            ("y".to_string(), r(0, 4096, 8192)),
            ("z".to_string(), r(1, 0, 4096)),
        ];
        assert_eq!(check(&ok, &devs), Ok(()));
        let mut bad = ok.clone();
        bad.push(("w".into(), r(0, 8192, 4096)));
        assert_eq!(
            check(&bad, &devs).unwrap_err(),
            "function `w`: metadata region bytes 8192..12288 of device `a` overlaps the one of `y` (bytes 4096..12288)"
        );
        let e = check(&[("v".into(), r(0, 100, 4096))], &devs).unwrap_err();
        assert!(e.contains("whole 4096-byte blocks"), "{e}");
        let e = check(&[("v".into(), r(2, 0, 4096))], &devs).unwrap_err();
        assert!(e.contains("device 2, which does not exist"), "{e}");
        let e = check(&[("v".into(), r(1, 999_997_440, 4096))], &devs).unwrap_err();
        assert!(e.contains("past the end of device `b`"), "{e}");
    }
}
