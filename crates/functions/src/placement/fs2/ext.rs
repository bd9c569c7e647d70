//! Free space of an ext2/ext3/ext4 image, read from its block bitmaps (what FS2 knows at
//! start when the disk holds one; the thesis's FS2 asks the file system instead).
//!
//! Reads the superblock, the group descriptors and each group's block bitmap. A group
//! whose bitmap was never written (`BLOCK_UNINIT`, ext4) is computed the way the kernel's
//! `ext4_init_block_bitmap` does: the superblock backup and descriptor blocks it holds and
//! every group's bitmaps and inode table that lie inside it are in use, the rest is free.
//! Every read is bounded by the image's size; a malformed image is an error naming the
//! field and offset, never a panic.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

const MAGIC: u16 = 0xEF53;
const INCOMPAT_META_BG: u32 = 0x10;
const INCOMPAT_64BIT: u32 = 0x80;
const COMPAT_SPARSE_SUPER2: u32 = 0x200;
const RO_COMPAT_SPARSE_SUPER: u32 = 0x1;
const BG_BLOCK_UNINIT: u16 = 0x2;
/// Groups read at most: 2^24 groups of 32,768 blocks is far past any image wattio runs on.
const MAX_GROUPS: u64 = 1 << 24;

/// The file system's free space: extents `[start, end)` in bytes, in order.
#[derive(Clone, Debug, PartialEq)]
pub struct ExtFree {
    pub block_size: u64,
    pub blocks: u64,
    /// Free blocks counted from the bitmaps.
    pub free_blocks: u64,
    /// The superblock's own count (`s_free_blocks_count`), for comparison.
    pub sb_free_blocks: u64,
    pub extents: Vec<(u64, u64)>,
}

struct Image {
    f: File,
    len: u64,
    name: String,
}

impl Image {
    fn read(&mut self, at: u64, n: usize, what: &str) -> Result<Vec<u8>, String> {
        if at.checked_add(n as u64).is_none_or(|e| e > self.len) {
            return Err(format!(
                "{}: {what} at offset {at} ({n} bytes) lies past the end of the image ({} bytes)",
                self.name, self.len
            ));
        }
        let mut buf = vec![0u8; n];
        self.f
            .seek(SeekFrom::Start(at))
            .and_then(|_| self.f.read_exact(&mut buf))
            .map_err(|e| format!("{}: reading {what} at offset {at}: {e}", self.name))?;
        Ok(buf)
    }
}

fn u16_at(b: &[u8], o: usize) -> u16 {
    u16::from_le_bytes([b[o], b[o + 1]])
}
fn u32_at(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]])
}

/// Does group `g` hold a superblock backup?
fn has_super(g: u64, sparse: bool) -> bool {
    if g <= 1 || !sparse {
        return true;
    }
    [3u64, 5, 7].iter().any(|&p| {
        let mut x = g;
        while x.is_multiple_of(p) {
            x /= p;
        }
        x == 1
    })
}

/// Read the free space of the ext2/3/4 file system in the image at `path`.
pub fn free_space(path: &Path) -> Result<ExtFree, String> {
    let name = path.display().to_string();
    let f = File::open(path).map_err(|e| format!("{name}: {e}"))?;
    let len = f.metadata().map_err(|e| format!("{name}: {e}"))?.len();
    let mut img = Image { f, len, name };
    let sb = img.read(1024, 1024, "the superblock")?;
    let name = img.name.clone();
    let bad = |field: &str, off: usize, what: String| {
        format!("{name}: superblock {field} (offset {}): {what}", 1024 + off)
    };
    if u16_at(&sb, 56) != MAGIC {
        return Err(bad(
            "s_magic",
            56,
            format!(
                "expected 0xEF53 (an ext2/3/4 file system), got {:#06x}",
                u16_at(&sb, 56)
            ),
        ));
    }
    let log = u32_at(&sb, 24);
    if log > 6 {
        return Err(bad(
            "s_log_block_size",
            24,
            format!("expected 0–6, got {log}"),
        ));
    }
    let bs = 1024u64 << log;
    let compat = u32_at(&sb, 92);
    let incompat = u32_at(&sb, 96);
    let ro_compat = u32_at(&sb, 100);
    if incompat & INCOMPAT_META_BG != 0 || compat & COMPAT_SPARSE_SUPER2 != 0 {
        return Err(bad(
            "s_feature_incompat",
            96,
            "meta_bg and sparse_super2 layouts are not read (the descriptors move)".into(),
        ));
    }
    let is64 = incompat & INCOMPAT_64BIT != 0;
    let mut blocks = u32_at(&sb, 4) as u64;
    let mut sb_free = u32_at(&sb, 12) as u64;
    if is64 {
        blocks |= (u32_at(&sb, 0x150) as u64) << 32;
        sb_free |= (u32_at(&sb, 0x158) as u64) << 32;
    }
    let first = u32_at(&sb, 20) as u64;
    let bpg = u32_at(&sb, 32) as u64;
    if bpg == 0 || bpg > 8 * bs {
        return Err(bad(
            "s_blocks_per_group",
            32,
            format!("expected 1–{}, got {bpg}", 8 * bs),
        ));
    }
    if blocks <= first || blocks.checked_mul(bs).is_none_or(|b| b > len) {
        return Err(bad(
            "s_blocks_count",
            4,
            format!(
                "{blocks} blocks of {bs} B do not fit the image ({len} bytes) after block {first}"
            ),
        ));
    }
    let ipg = u32_at(&sb, 40) as u64;
    let inode_size = match u32_at(&sb, 76) {
        0 => 128,
        _ => u16_at(&sb, 88) as u64,
    };
    let desc = if is64 { u16_at(&sb, 0xFE) as u64 } else { 32 };
    if !(32..=1024).contains(&desc) || !desc.is_power_of_two() {
        return Err(bad(
            "s_desc_size",
            0xFE,
            format!("expected 32–1024, got {desc}"),
        ));
    }
    let groups = (blocks - first).div_ceil(bpg);
    if groups > MAX_GROUPS {
        return Err(bad("s_blocks_per_group", 32, format!("{groups} groups")));
    }
    let reserved_gdt = u16_at(&sb, 0xCE) as u64;
    let gdt_blocks = (groups * desc).div_ceil(bs);
    let gdt = img.read(
        (first + 1) * bs,
        (groups * desc) as usize,
        "the group descriptors",
    )?;
    let sparse = ro_compat & RO_COMPAT_SPARSE_SUPER != 0;
    let itable_blocks = (ipg * inode_size).div_ceil(bs);
    // Every group's metadata blocks, for BLOCK_UNINIT groups that host them (flex_bg).
    let mut meta: Vec<(u64, u64)> = Vec::with_capacity(groups as usize * 3);
    let mut descs = Vec::with_capacity(groups as usize);
    for g in 0..groups {
        let d = &gdt[(g * desc) as usize..((g + 1) * desc) as usize];
        let hi = |o: usize| {
            if desc >= 64 {
                (u32_at(d, o) as u64) << 32
            } else {
                0
            }
        };
        let bbm = u32_at(d, 0) as u64 | hi(0x20);
        let ibm = u32_at(d, 4) as u64 | hi(0x24);
        let itab = u32_at(d, 8) as u64 | hi(0x28);
        let flags = u16_at(d, 0x12);
        if bbm >= blocks || ibm >= blocks || itab >= blocks {
            return Err(format!(
                "{}: group descriptor {g} (offset {}): bitmap or inode table past block {blocks}",
                img.name,
                (first + 1) * bs + g * desc
            ));
        }
        meta.push((bbm, bbm + 1));
        meta.push((ibm, ibm + 1));
        meta.push((itab, (itab + itable_blocks).min(blocks)));
        descs.push((bbm, flags));
    }
    meta.sort_unstable();
    let mut used = vec![false; bpg as usize];
    let mut extents: Vec<(u64, u64)> = Vec::new();
    let mut free_blocks = 0u64;
    for (g, &(bbm, flags)) in descs.iter().enumerate() {
        let g = g as u64;
        let g0 = first + g * bpg;
        let n = bpg.min(blocks - g0) as usize;
        if flags & BG_BLOCK_UNINIT != 0 {
            used[..n].fill(false);
            if has_super(g, sparse) {
                let m = (1 + gdt_blocks + reserved_gdt).min(n as u64) as usize;
                used[..m].fill(true);
            }
            let lo = meta.partition_point(|&(_, e)| e <= g0);
            for &(s, e) in &meta[lo..] {
                if s >= g0 + n as u64 {
                    break;
                }
                for b in s.max(g0)..e.min(g0 + n as u64) {
                    used[(b - g0) as usize] = true;
                }
            }
        } else {
            let bm = img.read(bbm * bs, bs as usize, &format!("group {g}'s block bitmap"))?;
            for (i, u) in used[..n].iter_mut().enumerate() {
                *u = bm[i / 8] & (1 << (i % 8)) != 0;
            }
        }
        for (i, &u) in used[..n].iter().enumerate() {
            if u {
                continue;
            }
            free_blocks += 1;
            let b = (g0 + i as u64) * bs;
            match extents.last_mut() {
                Some(last) if last.1 == b => last.1 = b + bs,
                _ => extents.push((b, b + bs)),
            }
        }
    }
    Ok(ExtFree {
        block_size: bs,
        blocks,
        free_blocks,
        sb_free_blocks: sb_free,
        extents,
    })
}
