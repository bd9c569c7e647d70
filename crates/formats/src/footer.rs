//! A structural check of a Parquet footer before the Parquet crate decodes it.
//!
//! parquet 57's Thrift decoder sized vectors from the list lengths the file declares
//! (`Vec::with_capacity(n)`), so a few corrupt bytes could ask for tens of GB and abort the
//! process (found by fuzzing). parquet 60, which wattio now uses, bounds every list by the
//! bytes left itself; this walk stays as a second line (it follows the declared types, and
//! the crate reads a field by its id whatever type it declares, so it alone did not cover
//! a list field carrying another type's header: `fuzz/corpus/columnar/seed_oom_kv_…`). It walks the footer's Thrift
//! compact encoding without building anything and refuses a list, set or map that declares
//! more elements than there are bytes left to hold them, nesting deeper than any Parquet
//! footer does, or an unknown type.

/// The Thrift-encoded `FileMetaData` of a Parquet file whose last 8 bytes are `data_tail`
/// (footer length, `PAR1`): where it starts, counted back from the end, and its length.
/// `None` if the tail is not a plain Parquet tail (the Parquet crate will say why).
pub fn footer_len(tail: &[u8]) -> Option<u64> {
    match tail {
        [a, b, c, d, b'P', b'A', b'R', b'1'] => {
            Some(u64::from(u32::from_le_bytes([*a, *b, *c, *d])))
        }
        _ => None,
    }
}

pub(crate) const MAX_DEPTH: u32 = 32;

/// Checks the Thrift compact encoding of a footer (one struct). `Err` says what is wrong.
pub fn check(footer: &[u8]) -> Result<(), String> {
    Walker::new(footer, "footer").structure(0)
}

/// A cursor over Thrift compact bytes (a footer here, a page header in `pages.rs`). `short`
/// records that an error came from running out of bytes, so a caller reading a window of a
/// longer stream knows a larger window might hold the whole value.
pub(crate) struct Walker<'a> {
    pub b: &'a [u8],
    pub pos: usize,
    pub short: bool,
    /// What the bytes are, for messages ("footer", "page header").
    pub what: &'static str,
}

impl<'a> Walker<'a> {
    pub fn new(b: &'a [u8], what: &'static str) -> Self {
        Walker {
            b,
            pos: 0,
            short: false,
            what,
        }
    }

    fn remaining(&self) -> usize {
        self.b.len().saturating_sub(self.pos)
    }

    pub fn byte(&mut self) -> Result<u8, String> {
        let Some(&v) = self.b.get(self.pos) else {
            self.short = true;
            return Err(format!(
                "{} ends inside a value at byte {}",
                self.what, self.pos
            ));
        };
        self.pos += 1;
        Ok(v)
    }

    fn skip(&mut self, n: usize) -> Result<(), String> {
        if n > self.remaining() {
            self.short = true;
            return Err(format!(
                "{} declares {n} bytes at byte {} but only {} remain",
                self.what,
                self.pos,
                self.remaining()
            ));
        }
        self.pos += n;
        Ok(())
    }

    pub fn varint(&mut self) -> Result<u64, String> {
        let mut v = 0u64;
        for shift in (0..70).step_by(7) {
            let b = self.byte()?;
            v |= u64::from(b & 0x7f).checked_shl(shift).unwrap_or(0);
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(format!("varint longer than 10 bytes at byte {}", self.pos))
    }

    /// A container of `n` elements, each at least `min_bytes` long, must fit in what is left.
    fn fits(&mut self, n: u64, min_bytes: u64, what: &str) -> Result<usize, String> {
        let need = n.saturating_mul(min_bytes);
        if need > self.remaining() as u64 {
            self.short = true;
            return Err(format!(
                "{} {what} at byte {} declares {n} elements but only {} bytes remain",
                self.what,
                self.pos,
                self.remaining()
            ));
        }
        usize::try_from(n).map_err(|_| format!("{what} too long"))
    }

    pub fn structure(&mut self, depth: u32) -> Result<(), String> {
        if depth > MAX_DEPTH {
            return Err(format!(
                "{} nests structures deeper than any Parquet file does",
                self.what
            ));
        }
        loop {
            let h = self.byte()?;
            if h == 0 {
                return Ok(());
            }
            if h >> 4 == 0 {
                self.varint()?; // long-form field id
            }
            match h & 0x0f {
                // Booleans live in the field header.
                1 | 2 => {}
                t => self.value(t, depth)?,
            }
        }
    }

    /// Skips one value of Thrift compact type `t`.
    pub fn value(&mut self, t: u8, depth: u32) -> Result<(), String> {
        match t {
            // Booleans inside a list take a byte each, like i8.
            1..=3 => self.skip(1),
            4..=6 => self.varint().map(drop),
            7 => self.skip(8),
            8 => {
                let n = self.varint()?;
                let n = usize::try_from(n).map_err(|_| "binary too long".to_string())?;
                self.skip(n)
            }
            9 | 10 => {
                let h = self.byte()?;
                let n = match h >> 4 {
                    15 => self.varint()?,
                    n => u64::from(n),
                };
                let n = self.fits(n, 1, "list")?;
                let et = h & 0x0f;
                for _ in 0..n {
                    self.value(et, depth + 1)?;
                }
                Ok(())
            }
            11 => {
                let n = self.varint()?;
                if n == 0 {
                    return Ok(());
                }
                let kv = self.byte()?;
                let n = self.fits(n, 2, "map")?;
                for _ in 0..n {
                    self.value(kv >> 4, depth + 1)?;
                    self.value(kv & 0x0f, depth + 1)?;
                }
                Ok(())
            }
            12 => self.structure(depth + 1),
            13 => self.skip(16),
            _ => Err(format!(
                "unknown Thrift type {t} in the {} at byte {}",
                self.what, self.pos
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn walks_structs_lists_and_refuses_oversized_lists() {
        // struct { 1: i32 = 3 (zigzag 6), 2: list<i32> [1, 2], 3: binary "ab", 4: bool true }
        let ok = [
            0x15, 0x06, 0x19, 0x25, 0x02, 0x04, 0x18, 0x02, b'a', b'b', 0x11, 0x00,
        ];
        assert_eq!(check(&ok), Ok(()));
        // The same list declaring 1000 elements (varint size 0xe8 0x07) in 12 bytes.
        let big = [0x15, 0x06, 0x19, 0xf5, 0xe8, 0x07, 0x02, 0x04, 0x00];
        let e = check(&big).unwrap_err();
        assert!(e.contains("declares 1000 elements"), "{e}");
        // Truncated, and a binary longer than the footer.
        assert!(check(&ok[..2]).unwrap_err().contains("ends inside"));
        assert!(check(&ok[..5]).unwrap_err().contains("declares 2 elements"));
        assert!(check(&[0x18, 0x7f, 0x00])
            .unwrap_err()
            .contains("declares 127 bytes"));
        // Nesting deeper than MAX_DEPTH.
        let deep = vec![0x1c_u8; 40];
        assert!(check(&deep).unwrap_err().contains("deeper"));
        assert_eq!(footer_len(b"\x10\0\0\0PAR1"), Some(16));
        assert_eq!(footer_len(b"\x10\0\0\0PARE"), None);
    }
}
