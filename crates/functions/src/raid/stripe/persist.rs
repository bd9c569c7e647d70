//! RAID-5's persisted bad-page list (Linux md's bad-block log): a metadata log
//! ([`wattio_core::journal::Journal`]) in the last blocks of member 0.
//!
//! **Why it must survive a crash.** A page marked bad is never read or written again; its
//! content lives in the row's parity. A page whose *write* failed may still *read* without
//! error (a cache below the array holding the old bytes, a drive remapping the sector on
//! the next write only): forgotten at a restart, such a page would be read directly and
//! return the bytes from before the failed write. So a write whose row marked a page bad is
//! acknowledged only once the record saying so is durable, and the list is read back before
//! the array serves its first request.
//!
//! **On the log.** A record is 10 bytes: a tag and member (u16) and a number (u64), little-
//! endian. The tag is the member field's top two bits:
//!
//! | tag | record | number |
//! |---|---|---|
//! | `00` | member's page is bad | the member page |
//! | `00` | member is **faulty** (md's `Faulty`): no I/O goes to it | `u64::MAX` |
//! | `10` | member's page is good again (rebuilt onto the spare) | the member page |
//! | `01` | member is being replaced by the spare | stripes moved onto the spare so far |
//! | `11` | write-intent bitmap (member field 0) | see below |
//! | `11` | member field 1: the members whose copies of the log are made (`log_members = "all"`) | a bit a member |
//!
//! **The write-intent bitmap** (`write_intent`, Linux md's internal bitmap): the array's
//! stripes in *regions* of `region_stripes` stripes (md's bitmap chunk), each *clean* (every
//! row's parity matches its data on the media) or *dirty* (a write may be torn by a crash).
//! A `11` record's number carries its kind in its top two bits: `00` region *n* dirty, `01`
//! region *n* clean, `10` the geometry — regions of *n* stripes, every one dirty (*n* = 0:
//! no bitmap: writes went unrecorded) — and `11` the same geometry, every region clean
//! (`assume_clean` on a new array).
//!
//! A checkpoint (when the journal is full) is the count (u32) then one 10-byte entry per bad
//! page, sorted, the faulty member's entry (if one is faulty and not wholly replaced), the
//! replacement's entry (if one has started), and the copies' entry last (if one was
//! logged); then, with a bitmap,
//! its region size in stripes (u64), its region count (u32) and one bit per region, set if
//! clean (least significant bit first). The list is bounded
//! (`max_bad_pages`, md keeps 512 ranges a device): past it the member is failed (a `faulty`
//! record, as md fails the device when its list is full) or, when another member is faulty
//! already, the page is bad in memory only and every write to its row fails with EIO, so no
//! acknowledged write depends on an unrecorded page. At most one member is faulty and not
//! wholly replaced by the spare at a time (a second would leave rows with two members
//! missing): a log saying otherwise is refused. Logs written before the replacement
//! records existed hold only `00` records and read back unchanged.

use wattio_core::fxhash::FxHashSet;
use wattio_core::journal::LABEL_BYTES;

/// The owner name in the log's header.
pub const OWNER: &str = "raid5-bad-pages";
/// The journal's record area (each log write is at least one 4 KiB block: 64 group
/// commits, more records when they come together, before a checkpoint).
pub const JOURNAL_BYTES: u64 = 256 << 10;
/// A record's bytes.
pub const RECORD_BYTES: usize = 10;
/// A `00` record's number naming the whole member faulty.
const FAULTY: u64 = u64::MAX;
/// The copy of the log a device holds, by its role in the array (md's `dev_number`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Member(usize),
    Spare,
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Role::Member(m) => write!(f, "member {m}'s"),
            Role::Spare => write!(f, "the spare's"),
        }
    }
}

/// A copy's label in its log's header (`Journal::set_label`), as md's superblock carries
/// the array's UUID and the device's role: 16 bytes, the array's id (u64, never 0), the
/// role (u32: the member's index, `u32::MAX` the spare), flags (u8: bit 0, the array keeps
/// a copy on every member), then `R5` and a zero byte. All zeros: no label (a log written
/// before labels, or a new one).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Label {
    pub array: u64,
    pub role: Role,
    pub all: bool,
}

const LABEL_MARK: &[u8; 3] = b"R5\0";
const SPARE_ROLE: u32 = u32::MAX;

impl Label {
    pub fn encode(&self) -> [u8; LABEL_BYTES] {
        let mut b = [0; LABEL_BYTES];
        b[..8].copy_from_slice(&self.array.to_le_bytes());
        let role = match self.role {
            Role::Member(m) => m as u32,
            Role::Spare => SPARE_ROLE,
        };
        b[8..12].copy_from_slice(&role.to_le_bytes());
        b[12] = u8::from(self.all);
        b[13..].copy_from_slice(LABEL_MARK);
        b
    }

    /// `Ok(None)`: no label; an error: bytes that are no RAID-5 copy's label.
    pub fn decode(b: &[u8; LABEL_BYTES]) -> Result<Option<Label>, String> {
        if b.iter().all(|&x| x == 0) {
            return Ok(None);
        }
        let array = u64::from_le_bytes(b[..8].try_into().expect("8 bytes"));
        if &b[13..] != LABEL_MARK || array == 0 || b[12] > 1 {
            return Err(format!(
                "a header label that is no RAID-5 array's ({b:02x?})"
            ));
        }
        let role = match u32::from_le_bytes(b[8..12].try_into().expect("4 bytes")) {
            SPARE_ROLE => Role::Spare,
            m => Role::Member(m as usize),
        };
        Ok(Some(Label {
            array,
            role,
            all: b[12] == 1,
        }))
    }
}

/// A new array's id, from the build's nonce (`BuildContext::nonce`: the seed's in a
/// simulation, fresh live); never 0 (zeros are no label).
pub fn array_id(nonce: u64) -> u64 {
    wattio_core::journal::new_id(nonce)
}

/// The default bound on the list.
pub const DEFAULT_MAX_BAD_PAGES: u64 = 4096;
/// The largest bound a config may set (a checkpoint of 10 MiB).
pub const MAX_MAX_BAD_PAGES: u64 = 1 << 20;

/// The tag of a record naming a page good again (see the module docs).
const CLEARED: u16 = 0x8000;
/// The tag of a replacement's record.
const REPLACED: u16 = 0x4000;
const TAGS: u16 = CLEARED | REPLACED;
/// The tag of a write-intent record.
const INTENT: u16 = TAGS;
/// A write-intent record's kind, in its number's top two bits.
const KIND_SHIFT: u32 = 62;
const NUMBER: u64 = (1 << KIND_SHIFT) - 1;
const DIRTY: u64 = 0;
const CLEAN: u64 = 1;
const GEOMETRY_DIRTY: u64 = 2;
const GEOMETRY_CLEAN: u64 = 3;
/// The member field of the copies record (a `11` tag; the bitmap's records name 0).
const COPIES_MEMBER: usize = 1;
/// A checkpoint's bitmap header: region size (u64) and region count (u32).
const BITMAP_HEADER: u64 = 12;

fn tagged(tag: u16, disk: usize, n: u64) -> [u8; RECORD_BYTES] {
    let mut b = [0; RECORD_BYTES];
    b[..2].copy_from_slice(&(tag | disk as u16).to_le_bytes());
    b[2..].copy_from_slice(&n.to_le_bytes());
    b
}

/// A bad page: member `disk`'s page `page` (member bytes `page · 4096 ..`).
pub fn record(disk: usize, page: u64) -> [u8; RECORD_BYTES] {
    tagged(0, disk, page)
}

/// Member `disk` is faulty: no I/O goes to it; its pages live in the parity (md's `Faulty`).
pub fn faulty(disk: usize) -> [u8; RECORD_BYTES] {
    tagged(0, disk, FAULTY)
}

/// Member `disk`'s page `page` is good again: rebuilt onto the spare that now holds it.
pub fn cleared(disk: usize, page: u64) -> [u8; RECORD_BYTES] {
    tagged(CLEARED, disk, page)
}

/// Member `disk` is being replaced by the spare, whose copy holds its stripes
/// `0..through`.
pub fn replaced(disk: usize, through: u64) -> [u8; RECORD_BYTES] {
    tagged(REPLACED, disk, through)
}

/// The members whose copies of the log are made (`log_members = "all"`), a bit each:
/// logged once every copy written this run has its header on its device, so a copy the
/// log names made and a start finds blank was wiped — its device swapped for a blank one.
pub fn copies(made: u64) -> [u8; RECORD_BYTES] {
    tagged(INTENT, COPIES_MEMBER, made)
}

/// Region `r` may hold torn rows: a write to it is about to go out.
pub fn intent_dirty(r: u64) -> [u8; RECORD_BYTES] {
    tagged(INTENT, 0, DIRTY << KIND_SHIFT | r)
}

/// Region `r`'s rows all hold matching parity on the media.
pub fn intent_clean(r: u64) -> [u8; RECORD_BYTES] {
    tagged(INTENT, 0, CLEAN << KIND_SHIFT | r)
}

/// The bitmap's regions are `region_stripes` stripes each (0: no bitmap), every one clean
/// or every one dirty.
pub fn intent_geometry(region_stripes: u64, all_clean: bool) -> [u8; RECORD_BYTES] {
    let kind = if all_clean {
        GEOMETRY_CLEAN
    } else {
        GEOMETRY_DIRTY
    };
    tagged(INTENT, 0, kind << KIND_SHIFT | region_stripes)
}

/// A write-intent bitmap as a log holds it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Bitmap {
    /// Stripes a region covers (0: no bitmap).
    pub region_stripes: u64,
    /// Regions (the array's stripes in regions of `region_stripes`).
    pub regions: u64,
    /// A bit per region, set if clean, in words of 64 (least significant bit first).
    pub clean: Vec<u64>,
}

impl Bitmap {
    /// Regions of `region_stripes` over `stripes`, every one `clean` or not.
    pub fn new(region_stripes: u64, stripes: u64, clean: bool) -> Bitmap {
        let regions = if region_stripes == 0 {
            0
        } else {
            stripes.div_ceil(region_stripes)
        };
        let mut clean_bits = vec![if clean { u64::MAX } else { 0 }; regions.div_ceil(64) as usize];
        if let Some(last) = clean_bits.last_mut().filter(|_| regions % 64 != 0) {
            *last &= (1 << (regions % 64)) - 1;
        }
        Bitmap {
            region_stripes,
            regions,
            clean: clean_bits,
        }
    }

    pub fn is_clean(&self, r: u64) -> bool {
        self.clean
            .get((r / 64) as usize)
            .is_some_and(|w| w >> (r % 64) & 1 == 1)
    }

    pub fn set(&mut self, r: u64, clean: bool) {
        let w = &mut self.clean[(r / 64) as usize];
        if clean {
            *w |= 1 << (r % 64);
        } else {
            *w &= !(1 << (r % 64));
        }
    }

    /// Clean regions.
    pub fn count(&self) -> u64 {
        self.clean.iter().map(|w| u64::from(w.count_ones())).sum()
    }
}

/// What a log holds: the bad pages, the faulty member (a bit; not one the spare has wholly
/// replaced), the replacement
/// (member, stripes moved), if any, and the write-intent bitmap (`region_stripes` 0: none).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Recovered {
    pub bad: FxHashSet<(usize, u64)>,
    pub faulty: u64,
    pub replaced: Option<(usize, u64)>,
    pub bitmap: Bitmap,
    /// The members whose copies of the log are made, a bit each (0: none logged).
    pub copies: u64,
}

impl Recovered {
    /// The faulty member, if one is.
    pub fn faulty_member(&self) -> Option<usize> {
        (self.faulty != 0).then(|| self.faulty.trailing_zeros() as usize)
    }
}

/// What the log can name: `disks` members of `pages` pages each, at most `max` bad pages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    pub disks: usize,
    pub pages: u64,
    pub max: u64,
    /// The array's stripes (a replacement moves at most these).
    pub stripes: u64,
    /// A spare is configured: the log may hold a replacement.
    pub spare: bool,
    /// Write-intent regions a checkpoint has room for (0: no bitmap).
    pub regions: u64,
    /// A copy on every member (`log_members = "all"`): a checkpoint names the copies made.
    pub copies: bool,
}

/// One decoded record or checkpoint entry.
enum Entry {
    Bad(usize, u64),
    Faulty(usize),
    Cleared(usize, u64),
    Replaced(usize, u64),
    /// A region of the bitmap clean (`true`) or dirty.
    Region(u64, bool),
    /// The bitmap's region size, every region clean or not.
    Geometry(u64, bool),
    /// The members whose copies are made.
    Copies(u64),
}

impl Shape {
    /// A checkpoint's entries at most: the bad pages, one faulty member, and the
    /// replacement (only with a spare).
    fn most_entries(&self) -> u64 {
        self.max + 1 + u64::from(self.spare) + u64::from(self.copies)
    }

    /// A checkpoint's size at most, bytes.
    pub fn snapshot_bytes(&self) -> u64 {
        let bitmap = if self.regions > 0 {
            BITMAP_HEADER + self.regions.div_ceil(8)
        } else {
            0
        };
        4 + self.most_entries() * RECORD_BYTES as u64 + bitmap
    }

    /// A checkpoint of the recorded bad pages (in a fixed order: the same set, the same
    /// bytes), the faulty member, if one is, the replacement, if one has started, and the
    /// bitmap, if there is one.
    pub fn snapshot<'a>(
        &self,
        bad: impl Iterator<Item = &'a (usize, u64)>,
        failed: Option<usize>,
        replacement: Option<(usize, u64)>,
        copies_made: u64,
        bitmap: &Bitmap,
    ) -> Vec<u8> {
        let mut v: Vec<(usize, u64)> = bad.copied().collect();
        v.sort_unstable();
        let made = self.copies && copies_made != 0;
        let n = v.len()
            + usize::from(failed.is_some())
            + usize::from(replacement.is_some())
            + usize::from(made);
        let mut b = Vec::with_capacity(4 + n * RECORD_BYTES);
        b.extend_from_slice(&(n as u32).to_le_bytes());
        for (d, p) in v {
            b.extend_from_slice(&record(d, p));
        }
        if let Some(m) = failed {
            b.extend_from_slice(&faulty(m));
        }
        if let Some((m, through)) = replacement {
            b.extend_from_slice(&replaced(m, through));
        }
        if made {
            b.extend_from_slice(&copies(copies_made));
        }
        if bitmap.region_stripes > 0 {
            b.extend_from_slice(&bitmap.region_stripes.to_le_bytes());
            b.extend_from_slice(&(bitmap.regions as u32).to_le_bytes());
            let bytes = bitmap.clean.iter().flat_map(|w| w.to_le_bytes());
            b.extend(bytes.take(bitmap.regions.div_ceil(8) as usize));
        }
        b
    }

    /// The regions of `region_stripes` stripes over this array (`Err`: more than a
    /// checkpoint has room for).
    fn regions_of(&self, region_stripes: u64, at: &dyn Fn() -> String) -> Result<u64, String> {
        let regions = self.stripes.div_ceil(region_stripes.max(1));
        if region_stripes > 0 && regions > self.regions {
            return Err(format!(
                "{}: {regions} write-intent regions of {region_stripes} stripes, the log has room for {}",
                at(),
                self.regions
            ));
        }
        Ok(regions)
    }

    fn entry(&self, r: &[u8], at: &dyn Fn() -> String) -> Result<Entry, String> {
        let field = u16::from_le_bytes([r[0], r[1]]);
        let (tag, disk) = (field & TAGS, (field & !TAGS) as usize);
        let n = u64::from_le_bytes(r[2..RECORD_BYTES].try_into().expect("10 bytes"));
        if disk >= self.disks {
            return Err(format!(
                "{}: member {disk} is outside the {} members",
                at(),
                self.disks
            ));
        }
        match tag {
            INTENT if disk == COPIES_MEMBER && n >> self.disks != 0 => Err(format!(
                "{}: copies of the log made on members {n:#x}, the array has {}",
                at(),
                self.disks
            )),
            INTENT if disk == COPIES_MEMBER => Ok(Entry::Copies(n)),
            INTENT if disk != 0 => Err(format!(
                "{}: a write-intent record names member {disk} (expected 0)",
                at()
            )),
            INTENT => match n >> KIND_SHIFT {
                DIRTY => Ok(Entry::Region(n & NUMBER, false)),
                CLEAN => Ok(Entry::Region(n & NUMBER, true)),
                kind => Ok(Entry::Geometry(n & NUMBER, kind == GEOMETRY_CLEAN)),
            },
            REPLACED if !self.spare => Err(format!(
                "{}: member {disk} is being replaced by a spare, but the array names no `spare`",
                at()
            )),
            REPLACED if n > self.stripes => Err(format!(
                "{}: {n} stripes of member {disk} moved onto the spare, the array has {}",
                at(),
                self.stripes
            )),
            REPLACED => Ok(Entry::Replaced(disk, n)),
            0 if n == FAULTY => Ok(Entry::Faulty(disk)),
            _ if n >= self.pages => Err(format!(
                "{}: page {n} of member {disk} is outside {} members × {} pages",
                at(),
                self.disks,
                self.pages
            )),
            CLEARED => Ok(Entry::Cleared(disk, n)),
            _ => Ok(Entry::Bad(disk, n)),
        }
    }

    /// Replay a recovered log: its checkpoint (empty: none yet), then its records in order.
    pub fn replay(&self, snapshot: &[u8], records: &[Vec<u8>]) -> Result<Recovered, String> {
        let mut got = Recovered::default();
        let apply = |got: &mut Recovered, e: Entry, at: &dyn Fn() -> String| {
            match e {
                Entry::Bad(d, p) => {
                    got.bad.insert((d, p));
                }
                Entry::Cleared(d, p) => {
                    got.bad.remove(&(d, p));
                }
                Entry::Faulty(d) => got.faulty |= 1 << d,
                // Kept only by an array with a copy on every member: one back on member 0
                // alone (`log_members` turned to "first") drops it (and logs it anew when
                // turned back).
                Entry::Copies(made) if self.copies => got.copies = made,
                Entry::Copies(_) => {}
                Entry::Replaced(d, through) => match got.replaced {
                    Some((m, _)) if m != d => {
                        return Err(format!(
                        "{}: member {d} is being replaced, but member {m} already was (one spare)",
                        at()
                    ))
                    }
                    _ => got.replaced = Some((d, through)),
                },
                Entry::Geometry(rs, clean) => {
                    self.regions_of(rs, at)?;
                    got.bitmap = Bitmap::new(rs, self.stripes, clean);
                }
                Entry::Region(r, clean) => {
                    let b = &mut got.bitmap;
                    if b.region_stripes == 0 {
                        return Err(format!(
                            "{}: write-intent region {r}, but no bitmap geometry precedes it",
                            at()
                        ));
                    }
                    if r >= b.regions {
                        return Err(format!(
                            "{}: write-intent region {r} is outside the {} regions of {} stripes",
                            at(),
                            b.regions,
                            b.region_stripes
                        ));
                    }
                    b.set(r, clean);
                }
            }
            Ok(())
        };
        if !snapshot.is_empty() {
            let n = snapshot
                .get(..4)
                .map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")) as usize)
                .ok_or_else(|| {
                    format!(
                        "checkpoint: {} bytes, too short for its count",
                        snapshot.len()
                    )
                })?;
            let most = self.most_entries();
            let entries = 4 + n * RECORD_BYTES;
            if n as u64 > most || snapshot.len() < entries {
                return Err(format!(
                    "checkpoint: {} bytes for {n} entries (at most {most}, {RECORD_BYTES} bytes each)",
                    snapshot.len(),
                ));
            }
            for (i, r) in snapshot[4..entries].chunks(RECORD_BYTES).enumerate() {
                let at = || format!("checkpoint entry {}", i + 1);
                let e = self.entry(r, &at)?;
                if !matches!(
                    e,
                    Entry::Bad(..) | Entry::Faulty(..) | Entry::Replaced(..) | Entry::Copies(..)
                ) {
                    return Err(format!(
                        "{}: a checkpoint lists bad pages, the faulty member, the replacement and the copies made only",
                        at()
                    ));
                }
                apply(&mut got, e, &at)?;
            }
            if snapshot.len() > entries {
                got.bitmap = self.bitmap(&snapshot[entries..])?;
            }
        }
        for (n, r) in records.iter().enumerate() {
            let at = || format!("record {} of the log", n + 1);
            if r.len() != RECORD_BYTES {
                return Err(format!(
                    "{}: {} bytes, expected {RECORD_BYTES}",
                    at(),
                    r.len()
                ));
            }
            let e = self.entry(r, &at)?;
            apply(&mut got, e, &at)?;
        }
        if got.bad.len() as u64 > self.max {
            return Err(format!(
                "{} bad pages, the list holds at most {}",
                got.bad.len(),
                self.max
            ));
        }
        // A member wholly on the spare is whole again.
        got.faulty &= !self.wholly_replaced(got.replaced);
        if got.faulty.count_ones() > 1 {
            let a = got.faulty.trailing_zeros();
            let b = 63 - got.faulty.leading_zeros();
            return Err(format!(
                "members {a} and {b} are both faulty (rows without two members cannot be served)"
            ));
        }
        Ok(got)
    }

    /// The member a replacement has wholly moved onto the spare, as a bit (0: none).
    pub fn wholly_replaced(&self, replaced: Option<(usize, u64)>) -> u64 {
        match replaced {
            Some((m, through)) if through >= self.stripes => 1 << m,
            _ => 0,
        }
    }

    /// A checkpoint's bitmap: region size, count, bits.
    fn bitmap(&self, b: &[u8]) -> Result<Bitmap, String> {
        let at = || "checkpoint bitmap".to_string();
        if (b.len() as u64) < BITMAP_HEADER {
            return Err(format!(
                "{}: {} bytes, too short for its region size and count",
                at(),
                b.len()
            ));
        }
        let rs = u64::from_le_bytes(b[..8].try_into().expect("8 bytes"));
        let n = u64::from(u32::from_le_bytes(b[8..12].try_into().expect("4 bytes")));
        if rs == 0 || rs > NUMBER {
            return Err(format!("{}: regions of {rs} stripes", at()));
        }
        let regions = self.regions_of(rs, &at)?;
        if n != regions || b.len() as u64 != BITMAP_HEADER + n.div_ceil(8) {
            return Err(format!(
                "{}: {} bytes for {n} regions of {rs} stripes (the array's {} stripes make {regions})",
                at(),
                b.len(),
                self.stripes
            ));
        }
        let mut got = Bitmap::new(rs, self.stripes, false);
        for (i, &byte) in b[BITMAP_HEADER as usize..].iter().enumerate() {
            for bit in 0..8 {
                let r = i as u64 * 8 + bit;
                if byte >> bit & 1 == 1 {
                    if r >= regions {
                        return Err(format!("{}: bit {r} set past the {regions} regions", at()));
                    }
                    got.set(r, true);
                }
            }
        }
        Ok(got)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHAPE: Shape = Shape {
        disks: 3,
        pages: 100,
        max: 4,
        stripes: 25,
        spare: false,
        regions: 0,
        copies: false,
    };
    const SPARE: Shape = Shape {
        spare: true,
        ..SHAPE
    };

    fn bad(pages: &[(usize, u64)]) -> FxHashSet<(usize, u64)> {
        pages.iter().copied().collect()
    }

    #[test]
    fn a_record_is_the_tagged_member_then_the_number_little_endian() {
        assert_eq!(record(2, 0x0102), [2, 0, 0x02, 0x01, 0, 0, 0, 0, 0, 0]);
        assert_eq!(cleared(2, 7), [2, 0x80, 7, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(replaced(1, 0x0300), [1, 0x40, 0, 3, 0, 0, 0, 0, 0, 0]);
        // 4 + (4 + 1) × 10 bytes (the pages and a faulty member); with a spare, room for the
        // replacement's entry.
        assert_eq!(SHAPE.snapshot_bytes(), 54);
        assert_eq!(SPARE.snapshot_bytes(), 64);
    }

    #[test]
    fn checkpoint_then_records_replay_to_the_union() {
        let snap = SHAPE.snapshot([(1, 7), (0, 3)].iter(), None, None, 0, &Bitmap::default());
        assert_eq!(snap.len(), 24);
        assert_eq!(&snap[..4], &[2, 0, 0, 0]);
        // Sorted: (0, 3) first.
        assert_eq!(&snap[4..14], &record(0, 3));
        let recs = vec![record(2, 99).to_vec(), record(1, 7).to_vec()];
        let got = SHAPE.replay(&snap, &recs).unwrap();
        assert_eq!(got.bad, bad(&[(0, 3), (1, 7), (2, 99)]));
        assert_eq!(got.replaced, None);
        assert_eq!(SHAPE.replay(&[], &[]).unwrap(), Recovered::default());
    }

    #[test]
    fn a_replacement_and_its_cleared_pages_replay_in_order() {
        // Member 1's pages 3 and 9 bad; its replacement has moved 2 stripes (pages 0..8),
        // page 3 rebuilt onto the spare and cleared; then page 5 fails on the spare.
        let snap = SPARE.snapshot(
            [(1, 9), (1, 3)].iter(),
            None,
            Some((1, 1)),
            0,
            &Bitmap::default(),
        );
        assert_eq!(snap.len(), 4 + 3 * 10);
        assert_eq!(&snap[..4], &[3, 0, 0, 0]);
        assert_eq!(&snap[24..34], &replaced(1, 1));
        let recs = [replaced(1, 2), cleared(1, 3), record(1, 5)].map(|r| r.to_vec());
        let got = SPARE.replay(&snap, &recs).unwrap();
        assert_eq!(got.bad, bad(&[(1, 5), (1, 9)]));
        assert_eq!(got.replaced, Some((1, 2)));
        // The checkpoint of that state reads back the same.
        let again = SPARE.snapshot(got.bad.iter(), None, got.replaced, 0, &got.bitmap);
        assert_eq!(SPARE.replay(&again, &[]).unwrap(), got);
        // Cleared pages are records only: a checkpoint lists what is bad.
        let mut odd = SPARE.snapshot([].iter(), None, None, 0, &Bitmap::default());
        odd[..4].copy_from_slice(&1u32.to_le_bytes());
        odd.extend_from_slice(&cleared(0, 1));
        assert_eq!(
            SPARE.replay(&odd, &[]).unwrap_err(),
            "checkpoint entry 1: a checkpoint lists bad pages, the faulty member, the replacement and the copies made only"
        );
    }

    #[test]
    fn a_replacement_the_config_cannot_hold_is_refused_naming_where() {
        let e = SHAPE.replay(&[], &[replaced(0, 1).to_vec()]).unwrap_err();
        assert_eq!(
            e,
            "record 1 of the log: member 0 is being replaced by a spare, but the array names no `spare`"
        );
        let e = SPARE.replay(&[], &[replaced(0, 26).to_vec()]).unwrap_err();
        assert_eq!(
            e,
            "record 1 of the log: 26 stripes of member 0 moved onto the spare, the array has 25"
        );
        let two = [replaced(0, 1), replaced(2, 0)].map(|r| r.to_vec());
        assert_eq!(
            SPARE.replay(&[], &two).unwrap_err(),
            "record 2 of the log: member 2 is being replaced, but member 0 already was (one spare)"
        );
    }

    /// Room for regions of one stripe.
    const BITMAP: Shape = Shape {
        regions: 25,
        ..SHAPE
    };

    #[test]
    fn a_copys_label_and_the_copies_made_round_trip_and_bad_ones_are_named() {
        let member = Label {
            array: 0x0123_4567_89ab_cdef,
            role: Role::Member(2),
            all: true,
        };
        let b = member.encode();
        assert_eq!(
            b,
            [0xef, 0xcd, 0xab, 0x89, 0x67, 0x45, 0x23, 0x01, 2, 0, 0, 0, 1, b'R', b'5', 0]
        );
        assert_eq!(Label::decode(&b), Ok(Some(member)));
        let spare = Label {
            role: Role::Spare,
            all: false,
            ..member
        };
        assert_eq!(&spare.encode()[8..13], &[0xff, 0xff, 0xff, 0xff, 0]);
        assert_eq!(Label::decode(&spare.encode()), Ok(Some(spare)));
        assert_eq!(Label::decode(&[0; LABEL_BYTES]), Ok(None));
        let mut odd = b;
        odd[13] = b'X';
        assert!(Label::decode(&odd)
            .unwrap_err()
            .starts_with("a header label that is no RAID-5 array's"));
        assert_ne!(array_id(0), array_id(1));
        assert_ne!(array_id(0), 0);
        // The copies made: the last record wins and a checkpoint keeps it, with a copy on
        // every member; on member 0 alone it is read and dropped; a member past the
        // array's is named.
        let all = Shape {
            copies: true,
            ..SHAPE
        };
        let recs = [copies(0b001), record(1, 7), copies(0b111)].map(|r| r.to_vec());
        let got = all.replay(&[], &recs).unwrap();
        assert_eq!(got.copies, 0b111);
        let snap = all.snapshot(got.bad.iter(), None, None, got.copies, &got.bitmap);
        assert_eq!(snap.len(), 4 + 2 * RECORD_BYTES);
        assert_eq!(all.replay(&snap, &[]).unwrap(), got);
        assert_eq!(SHAPE.replay(&[], &recs).unwrap().copies, 0);
        assert_eq!(
            all.replay(&[], &[copies(0b1000).to_vec()]).unwrap_err(),
            "record 1 of the log: copies of the log made on members 0x8, the array has 3"
        );
    }

    #[test]
    fn write_intent_records_carry_their_kind_in_the_numbers_top_bits() {
        assert_eq!(intent_dirty(5), [0, 0xc0, 5, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(intent_clean(5), [0, 0xc0, 5, 0, 0, 0, 0, 0, 0, 0x40]);
        assert_eq!(
            intent_geometry(4, false),
            [0, 0xc0, 4, 0, 0, 0, 0, 0, 0, 0x80]
        );
        assert_eq!(
            intent_geometry(4, true),
            [0, 0xc0, 4, 0, 0, 0, 0, 0, 0, 0xc0]
        );
        // 54 bytes of entries, then 12 of header and 4 bytes for 25 regions.
        assert_eq!(BITMAP.snapshot_bytes(), 54 + 12 + 4);
    }

    #[test]
    fn a_bitmap_replays_from_its_geometry_and_checkpoints_to_the_same_bits() {
        // Regions of 4 stripes over 25 stripes: 7 regions, every one clean at creation;
        // then region 2 written, region 6 written and cleaned again.
        let recs = [
            record(1, 3),
            intent_geometry(4, true),
            intent_dirty(2),
            intent_dirty(6),
            intent_clean(6),
        ]
        .map(|r| r.to_vec());
        let got = BITMAP.replay(&[], &recs).unwrap();
        let b = &got.bitmap;
        assert_eq!((b.region_stripes, b.regions), (4, 7));
        assert_eq!(b.clean, vec![0b111_1011]);
        assert_eq!(b.count(), 6);
        let snap = BITMAP.snapshot(got.bad.iter(), None, None, 0, b);
        // One bad page, then 4 (u64), 7 (u32) and one byte of bits.
        assert_eq!(snap.len(), 4 + 10 + 12 + 1);
        assert_eq!(&snap[14..26], &[4, 0, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0]);
        assert_eq!(snap[26], 0b111_1011);
        assert_eq!(BITMAP.replay(&snap, &[]).unwrap(), got);
        // A later geometry starts over: every region dirty; 0 is no bitmap.
        let more = [intent_geometry(8, false).to_vec()];
        let again = BITMAP.replay(&snap, &more).unwrap();
        assert_eq!(again.bitmap, Bitmap::new(8, 25, false));
        assert_eq!(again.bitmap.regions, 4);
        let off = BITMAP.replay(&snap, &[intent_geometry(0, false).to_vec()]);
        assert_eq!(off.unwrap().bitmap, Bitmap::new(0, 25, false));
    }

    #[test]
    fn a_bitmap_the_array_cannot_hold_is_refused_naming_where() {
        let e = BITMAP.replay(&[], &[intent_dirty(0).to_vec()]).unwrap_err();
        assert_eq!(
            e,
            "record 1 of the log: write-intent region 0, but no bitmap geometry precedes it"
        );
        let recs = [intent_geometry(4, false), intent_clean(7)].map(|r| r.to_vec());
        assert_eq!(
            BITMAP.replay(&[], &recs).unwrap_err(),
            "record 2 of the log: write-intent region 7 is outside the 7 regions of 4 stripes"
        );
        let e = SHAPE
            .replay(&[], &[intent_geometry(4, false).to_vec()])
            .unwrap_err();
        assert_eq!(
            e,
            "record 1 of the log: 7 write-intent regions of 4 stripes, the log has room for 0"
        );
        let e = BITMAP
            .replay(&[], &[tagged(INTENT | 2, 0, 0).to_vec()])
            .unwrap_err();
        assert_eq!(
            e,
            "record 1 of the log: a write-intent record names member 2 (expected 0)"
        );
        // A checkpoint's bitmap: its count must be the array's, no bit past it.
        let mut snap = BITMAP.snapshot([].iter(), None, None, 0, &Bitmap::new(4, 25, true));
        assert_eq!(snap.len(), 4 + 12 + 1);
        snap[16] = 0x80;
        assert_eq!(
            BITMAP.replay(&snap, &[]).unwrap_err(),
            "checkpoint bitmap: bit 7 set past the 7 regions"
        );
        snap[12] = 8;
        assert_eq!(
            BITMAP.replay(&snap, &[]).unwrap_err(),
            "checkpoint bitmap: 13 bytes for 8 regions of 4 stripes (the array's 25 stripes make 7)"
        );
        assert_eq!(
            BITMAP.replay(&snap[..10], &[]).unwrap_err(),
            "checkpoint bitmap: 6 bytes, too short for its region size and count"
        );
    }

    #[test]
    fn a_log_of_another_geometry_is_refused_naming_where() {
        let e = SHAPE.replay(&[], &[record(3, 0).to_vec()]).unwrap_err();
        assert_eq!(e, "record 1 of the log: member 3 is outside the 3 members");
        let e = SHAPE.replay(&[], &[record(0, 100).to_vec()]).unwrap_err();
        assert_eq!(
            e,
            "record 1 of the log: page 100 of member 0 is outside 3 members × 100 pages"
        );
        let e = SHAPE.replay(&[], &[vec![0; 9]]).unwrap_err();
        assert_eq!(e, "record 1 of the log: 9 bytes, expected 10");
        let e = SHAPE.replay(&[6, 0, 0, 0], &[]).unwrap_err();
        assert_eq!(
            e,
            "checkpoint: 4 bytes for 6 entries (at most 5, 10 bytes each)"
        );
        let e = SHAPE.replay(&[1, 0], &[]).unwrap_err();
        assert_eq!(e, "checkpoint: 2 bytes, too short for its count");
        let five: Vec<Vec<u8>> = (0..5).map(|p| record(0, p).to_vec()).collect();
        assert_eq!(
            SHAPE.replay(&[], &five).unwrap_err(),
            "5 bad pages, the list holds at most 4"
        );
    }

    #[test]
    fn a_faulty_member_is_one_record_and_one_checkpoint_entry() {
        assert_eq!(
            faulty(2),
            [2, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]
        );
        // Member 1 fails after two of its pages went bad; the replacement onto the spare
        // has moved 3 of the 25 stripes.
        let recs = [record(1, 3), record(0, 9), faulty(1), replaced(1, 3)].map(|r| r.to_vec());
        let got = SPARE.replay(&[], &recs).unwrap();
        assert_eq!(got.faulty, 0b10);
        assert_eq!(got.bad, bad(&[(0, 9), (1, 3)]));
        assert_eq!(got.replaced, Some((1, 3)));
        let snap = SPARE.snapshot(got.bad.iter(), Some(1), got.replaced, 0, &got.bitmap);
        assert_eq!(snap.len(), 4 + 4 * 10);
        assert_eq!(&snap[24..34], &faulty(1));
        assert_eq!(SPARE.replay(&snap, &[]).unwrap(), got);
        // Wholly replaced, member 1 no longer counts: member 2 may fail after it.
        let more = [replaced(1, 25), faulty(2)].map(|r| r.to_vec());
        let got = SPARE.replay(&snap, &more).unwrap();
        assert_eq!(
            (got.faulty_member(), got.replaced),
            (Some(2), Some((1, 25)))
        );
        let snap = SPARE.snapshot(got.bad.iter(), Some(2), got.replaced, 0, &got.bitmap);
        assert_eq!(SPARE.replay(&snap, &[]).unwrap(), got);
        // Two members missing at once is an array that cannot serve: refused.
        let two = [faulty(0), faulty(2)].map(|r| r.to_vec());
        assert_eq!(
            SHAPE.replay(&[], &two).unwrap_err(),
            "members 0 and 2 are both faulty (rows without two members cannot be served)"
        );
        let e = SHAPE.replay(&[], &[faulty(3).to_vec()]).unwrap_err();
        assert_eq!(e, "record 1 of the log: member 3 is outside the 3 members");
        // Only a `00` record names a member faulty: `u64::MAX` under another tag is a page.
        let e = SHAPE
            .replay(&[], &[cleared(0, FAULTY).to_vec()])
            .unwrap_err();
        assert_eq!(
            e,
            "record 1 of the log: page 18446744073709551615 of member 0 is outside 3 members × 100 pages"
        );
    }
}
