//! A check of every column chunk's page headers before the Parquet crate decodes a page.
//!
//! The crate sizes buffers from what a page header declares: a compressed page's output
//! from `uncompressed_page_size` (up to 2 GiB), a dictionary from its entry count
//! (`DictDecoder::set_dict` resizes to it whatever the page holds: 2^31 INT64 entries are
//! 16 GiB, written in 5 bytes of a corrupt header). A CI fuzz run found a columnar trace that
//! asked for more than 2 GB this way. So the readers walk each chunk's page headers first
//! (Thrift compact, read in small windows, nothing but the headers is read) and refuse:
//! a page larger than [`MAX_PAGE_BYTES`] uncompressed; a dictionary of more than
//! [`MAX_DICTIONARY_ENTRIES`] entries or of more entries than its bytes can hold (a
//! dictionary page is PLAIN-encoded, so each entry takes at least its type's width: 4 bytes
//! for INT32 and BYTE_ARRAY lengths, 8 for INT64, one bit for BOOLEAN); a page running past
//! its chunk; a flat column whose pages do not hold exactly the row group's rows.
//!
//! The limits are far above what writers produce (Arrow, pyarrow, parquet-mr and wattio write
//! 1 MiB pages and dictionaries of at most 1 MiB) and bound what a file can make a reader hold:
//! a page buffer of 256 MiB and a dictionary of 16 Mi entries (512 MiB for BYTE_ARRAY).

use crate::footer::{Walker, MAX_DEPTH};

/// The largest page (uncompressed bytes) a reader accepts.
pub const MAX_PAGE_BYTES: i64 = 256 << 20;
/// The most entries a dictionary page may declare.
pub const MAX_DICTIONARY_ENTRIES: i64 = 16 << 20;
/// A page header longer than this is refused (headers carry statistics, a few hundred bytes).
pub const MAX_HEADER_BYTES: u64 = 16 << 20;

/// Parquet's `PageType`.
pub const DATA_PAGE: i32 = 0;
pub const DICTIONARY_PAGE: i32 = 2;
pub const DATA_PAGE_V2: i32 = 3;

/// What a page header declares that sizes a reader's buffers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageHeader {
    /// `PageType` (0 data, 1 index, 2 dictionary, 3 data v2).
    pub kind: i32,
    pub uncompressed: i64,
    pub compressed: i64,
    /// `num_values` of a dictionary page header.
    pub dictionary_entries: Option<i64>,
    /// Rows of a data page: `num_values` of a v1 header (levels, one a row in a flat
    /// column), `num_rows` of a v2 header.
    pub rows: Option<i64>,
    /// The values' encoding, from the nested header.
    pub encoding: Option<i32>,
    /// Bytes the header itself takes.
    pub len: usize,
}

/// Why a page header could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeaderError {
    /// The bytes ended inside the header: a longer window may hold it.
    Short(String),
    /// The header is malformed.
    Bad(String),
}

/// Thrift compact type codes used below.
const I32: u8 = 5;
const STRUCT: u8 = 12;

/// Decodes the Thrift compact `PageHeader` at the start of `b`.
pub fn page_header(b: &[u8]) -> Result<PageHeader, HeaderError> {
    let mut w = Walker::new(b, "page header");
    let r = read(&mut w);
    r.map_err(|e| {
        if w.short {
            HeaderError::Short(e)
        } else {
            HeaderError::Bad(e)
        }
    })
}

fn read(w: &mut Walker) -> Result<PageHeader, String> {
    let mut h = PageHeader {
        kind: -1,
        uncompressed: -1,
        compressed: -1,
        dictionary_entries: None,
        rows: None,
        encoding: None,
        len: 0,
    };
    let (mut kind, mut unc, mut comp) = (None, None, None);
    fields(w, 0, |w, id, t| {
        match (id, t) {
            (1, I32) => kind = Some(i32_value(w)?),
            (2, I32) => unc = Some(i64::from(i32_value(w)?)),
            (3, I32) => comp = Some(i64::from(i32_value(w)?)),
            // DataPageHeader { 1: num_values, 2: encoding }
            (5, STRUCT) => (h.rows, h.encoding) = sub_fields(w, 1, 2)?,
            // DictionaryPageHeader { 1: num_values, 2: encoding }
            (7, STRUCT) => (h.dictionary_entries, h.encoding) = sub_fields(w, 1, 2)?,
            // DataPageHeaderV2 { 3: num_rows, 4: encoding }
            (8, STRUCT) => (h.rows, h.encoding) = sub_fields(w, 3, 4)?,
            (1..=3, _) | (5 | 7 | 8, _) => {
                return Err(format!(
                    "page header field {id} has Thrift type {t}, expected {}",
                    if id <= 3 { "i32" } else { "a struct" }
                ))
            }
            _ => w.value(t, 1)?,
        }
        Ok(())
    })?;
    let need = |v: Option<i64>, name: &str| {
        v.ok_or_else(|| format!("page header without its required `{name}`"))
    };
    h.kind = i32::try_from(need(kind.map(i64::from), "type")?).unwrap_or(-1);
    h.uncompressed = need(unc, "uncompressed_page_size")?;
    h.compressed = need(comp, "compressed_page_size")?;
    h.len = w.pos;
    Ok(h)
}

/// Walks a struct's fields, handing each (id, type) to `f`, which must consume the value.
fn fields(
    w: &mut Walker,
    depth: u32,
    mut f: impl FnMut(&mut Walker, i64, u8) -> Result<(), String>,
) -> Result<(), String> {
    if depth > MAX_DEPTH {
        return Err("page header nests structures deeper than any Parquet file does".into());
    }
    let mut last = 0i64;
    loop {
        let h = w.byte()?;
        if h == 0 {
            return Ok(());
        }
        let id = match h >> 4 {
            0 => zigzag(w.varint()?),
            delta => last + i64::from(delta),
        };
        last = id;
        match h & 0x0f {
            // Booleans live in the field header.
            1 | 2 => {}
            t => f(w, id, t)?,
        }
    }
}

/// Fields `count` and `encoding` (i32s) of the struct at the cursor; others are skipped.
fn sub_fields(
    w: &mut Walker,
    count: i64,
    encoding: i64,
) -> Result<(Option<i64>, Option<i32>), String> {
    let (mut n, mut e) = (None, None);
    fields(w, 1, |w, id, t| {
        match (id == count || id == encoding, t) {
            (true, I32) if id == count => n = Some(i64::from(i32_value(w)?)),
            (true, I32) => e = Some(i32_value(w)?),
            (true, _) => {
                return Err(format!(
                    "page header field {id} of a nested header has Thrift type {t}, expected i32"
                ))
            }
            _ => w.value(t, 2)?,
        }
        Ok(())
    })?;
    Ok((n, e))
}

fn zigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

fn i32_value(w: &mut Walker) -> Result<i32, String> {
    let v = zigzag(w.varint()?);
    i32::try_from(v).map_err(|_| format!("page header i32 out of range: {v}"))
}

/// Parquet's `DELTA_LENGTH_BYTE_ARRAY` and `DELTA_BYTE_ARRAY` encodings.
pub const DELTA_LENGTH_BYTE_ARRAY: i32 = 6;
pub const DELTA_BYTE_ARRAY: i32 = 7;

/// Checks one page header against its chunk: `left` bytes of the chunk remain from the
/// header's start, and an entry of the column's physical type takes at least `entry_bits`
/// (32 for BYTE_ARRAY: a length).
pub fn check(h: &PageHeader, left: u64, entry_bits: u64, byte_array: bool) -> Result<(), String> {
    if h.compressed < 0 || h.uncompressed < 0 {
        return Err(format!(
            "page declares a negative size ({} bytes compressed, {} uncompressed)",
            h.compressed, h.uncompressed
        ));
    }
    let end = h.len as u64 + h.compressed as u64;
    if end > left {
        return Err(format!(
            "page of {} bytes (header {}) runs past its column chunk, which has {left} bytes left",
            h.compressed, h.len
        ));
    }
    if h.uncompressed > MAX_PAGE_BYTES {
        return Err(format!(
            "page declares {} bytes uncompressed, more than the {} MiB a reader accepts",
            h.uncompressed,
            MAX_PAGE_BYTES >> 20
        ));
    }
    match h.kind {
        DICTIONARY_PAGE => {
            let n = h
                .dictionary_entries
                .ok_or("dictionary page without a dictionary page header")?;
            if !(0..=MAX_DICTIONARY_ENTRIES).contains(&n) {
                return Err(format!(
                    "dictionary page declares {n} entries (at most {} accepted)",
                    MAX_DICTIONARY_ENTRIES
                ));
            }
            if (n as u64).saturating_mul(entry_bits) > (h.uncompressed as u64) * 8 {
                return Err(format!(
                    "dictionary page declares {n} entries in {} bytes; an entry takes at least {entry_bits} bits",
                    h.uncompressed
                ));
            }
        }
        DATA_PAGE | DATA_PAGE_V2 => {
            match h.rows {
                Some(r) if r >= 0 => {}
                Some(r) => return Err(format!("data page declares {r} values")),
                None => return Err("data page without its data page header".into()),
            }
            // The crate sizes these decoders' length arrays from a count inside the page's
            // data, which no header bounds; no wattio writer, nor pyarrow's or parquet-mr's
            // defaults, use them (PLAIN and dictionary).
            if byte_array && matches!(h.encoding, Some(DELTA_LENGTH_BYTE_ARRAY | DELTA_BYTE_ARRAY))
            {
                return Err(format!(
                    "byte-array page in delta encoding {} (a reader sizes it from a count inside the page; write PLAIN or dictionary pages)",
                    h.encoding.unwrap_or_default()
                ));
            }
        }
        _ => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A page header as Thrift compact bytes: type, sizes, then a nested header (field id,
    /// its `num_values`-like field id and value).
    fn header(kind: i32, unc: i32, comp: i32, nested: Option<(u8, u8, i32)>) -> Vec<u8> {
        fn varint(out: &mut Vec<u8>, mut v: u64) {
            while v >= 0x80 {
                out.push((v as u8) | 0x80);
                v >>= 7;
            }
            out.push(v as u8);
        }
        let zz = |v: i32| ((v << 1) ^ (v >> 31)) as u32 as u64;
        let mut b = vec![0x15];
        varint(&mut b, zz(kind));
        b.push(0x15);
        varint(&mut b, zz(unc));
        b.push(0x15);
        varint(&mut b, zz(comp));
        // field 4 (crc), skipped by the reader
        b.push(0x15);
        varint(&mut b, zz(-7));
        if let Some((id, sub, v)) = nested {
            b.push(((id - 4) << 4) | STRUCT);
            b.push((sub << 4) | I32);
            varint(&mut b, zz(v));
            // encoding (i32) and a bool after it, skipped
            b.push(0x15);
            b.push(0x00);
            b.push(0x11);
            b.push(0x00);
        }
        b.push(0x00);
        b
    }

    #[test]
    fn decodes_the_three_page_kinds() {
        let b = header(DICTIONARY_PAGE, 400, 400, Some((7, 1, 50)));
        let h = page_header(&b).unwrap();
        assert_eq!(
            h,
            PageHeader {
                kind: 2,
                uncompressed: 400,
                compressed: 400,
                dictionary_entries: Some(50),
                rows: None,
                encoding: Some(0),
                len: b.len()
            }
        );
        let h = page_header(&header(DATA_PAGE, 9000, 300, Some((5, 1, 4096)))).unwrap();
        assert_eq!((h.kind, h.rows, h.compressed), (0, Some(4096), 300));
        // v2: num_rows is field 3 of the nested header.
        let h = page_header(&header(DATA_PAGE_V2, 10, 10, Some((8, 3, 77)))).unwrap();
        assert_eq!(h.rows, Some(77));
        // Cut anywhere, the header is short (a longer window may hold it).
        let b = header(DATA_PAGE, 9000, 300, Some((5, 1, 4096)));
        for cut in 0..b.len() {
            assert!(
                matches!(page_header(&b[..cut]), Err(HeaderError::Short(_))),
                "cut at {cut}"
            );
        }
        // A required field missing, and a size field of the wrong type.
        let e = page_header(&[0x15, 0x04, 0x00]).unwrap_err();
        assert!(matches!(&e, HeaderError::Bad(m) if m.contains("uncompressed_page_size")));
        let e = page_header(&[0x15, 0x04, 0x18, 0x00, 0x00]).unwrap_err();
        assert!(matches!(&e, HeaderError::Bad(m) if m.contains("field 2 has Thrift type 8")));
    }

    #[test]
    fn refuses_what_would_size_a_buffer_beyond_the_file() {
        let ok = page_header(&header(DICTIONARY_PAGE, 400, 400, Some((7, 1, 50)))).unwrap();
        assert_eq!(check(&ok, 1000, 64, false), Ok(()));
        // 50 INT64 entries need 400 bytes: 51 do not fit.
        let h = page_header(&header(DICTIONARY_PAGE, 400, 400, Some((7, 1, 51)))).unwrap();
        let e = check(&h, 1000, 64, false).unwrap_err();
        assert!(e.contains("declares 51 entries in 400 bytes"), "{e}");
        // 2^31 - 1 entries, the allocation the fuzzer found, in a header of a few bytes.
        let h = page_header(&header(DICTIONARY_PAGE, 400, 400, Some((7, 1, i32::MAX)))).unwrap();
        assert!(check(&h, 1000, 32, false).unwrap_err().contains("at most"));
        // A page's bytes past the chunk, a page too large, negative sizes.
        assert!(check(&ok, 300, 64, false)
            .unwrap_err()
            .contains("runs past"));
        let big = MAX_PAGE_BYTES as i32 + 1;
        let h = page_header(&header(DATA_PAGE, big, 100, Some((5, 1, 10)))).unwrap();
        assert!(check(&h, 1000, 64, false).unwrap_err().contains("256 MiB"));
        let h = page_header(&header(DATA_PAGE, -1, 100, Some((5, 1, 10)))).unwrap();
        assert!(check(&h, 1000, 64, false).unwrap_err().contains("negative"));
        // A data page without its nested header, or with negative rows.
        let h = page_header(&header(DATA_PAGE, 10, 10, None)).unwrap();
        assert!(check(&h, 1000, 64, false).unwrap_err().contains("without"));
        let h = page_header(&header(DATA_PAGE, 10, 10, Some((5, 1, -3)))).unwrap();
        assert!(check(&h, 1000, 64, false)
            .unwrap_err()
            .contains("-3 values"));
        // A byte-array page in a delta encoding (the helper's encoding field is 0, PLAIN).
        let mut b = header(DATA_PAGE, 10, 10, Some((5, 1, 3)));
        let plain = page_header(&b).unwrap();
        assert_eq!(check(&plain, 1000, 32, true), Ok(()));
        let at = b.len() - 4; // the encoding's value, zigzag 0
        for (enc, refused) in [(6, true), (7, true), (5, false)] {
            b[at] = enc * 2;
            let h = page_header(&b).unwrap();
            assert_eq!(h.encoding, Some(i32::from(enc)));
            assert_eq!(
                check(&h, 1000, 32, true).is_err(),
                refused,
                "encoding {enc}"
            );
            assert_eq!(check(&h, 1000, 64, false), Ok(()));
        }
    }
}
