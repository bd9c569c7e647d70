//! FIU traces (SNIA IOTTA, homes/mail/web-vm): `ts pid process lba size op major minor md5`.
//!
//! `ts` is nanoseconds, `lba` and `size` are 512-byte blocks, `op` is `R` or `W`, and the
//! device is `major minor`. The process name may itself contain spaces, so the fixed fields
//! after it are taken from the right.

use crate::lines::{FieldError, Fields};
use crate::text::{sectors, DevKey, LineFormat, OwnedKey, Parsed, Raw};
use wattio_core::Op;

pub const LINE_FORM: &str =
    "ts_ns pid process lba size R|W major minor [md5] (ns, integer, name, 512 B blocks, 512 B blocks)";

const MAX_TOKENS: usize = 24;

#[derive(Default)]
pub struct Fiu;

fn is_md5(t: &[u8]) -> bool {
    t.len() == 32 && t.iter().all(|b| b.is_ascii_hexdigit())
}

impl LineFormat for Fiu {
    fn name(&self) -> &'static str {
        "fiu"
    }
    fn line_form(&self) -> &'static str {
        LINE_FORM
    }
    fn absolute_clock(&self) -> bool {
        true
    }
    fn parse<'a>(&mut self, line: &'a [u8]) -> Result<Parsed<'a>, FieldError> {
        let mut f = Fields::ws(line);
        let mut toks: [(&[u8], usize); MAX_TOKENS] = [(&[], 0); MAX_TOKENS];
        let mut n = 0;
        while let Some(t) = f.next_field() {
            if n == MAX_TOKENS {
                return Err(FieldError::new(f.col, "too many fields", LINE_FORM));
            }
            toks[n] = (t, f.col);
            n += 1;
        }
        if n == 0 {
            return Ok(Parsed::Skip);
        }
        let tail = if is_md5(toks[n - 1].0) { n - 1 } else { n };
        if tail < 8 {
            return Err(FieldError::new(
                line.len(),
                format!("line has {n} fields"),
                LINE_FORM,
            ));
        }
        let num = |i: usize, what: &str| -> Result<u64, FieldError> {
            let (t, c) = toks[i];
            crate::lines::parse_u64(t).ok_or_else(|| {
                FieldError::new(c, format!("bad field `{}`", crate::lines::show(t)), what)
            })
        };
        let time = num(0, "a timestamp in ns")?;
        let pid = num(1, "a process id")?;
        let stream = u32::try_from(pid)
            .map_err(|_| FieldError::new(toks[1].1, "pid does not fit 32 bits", "a process id"))?;
        let lba = num(tail - 5, "an LBA in 512-byte blocks")?;
        let size = num(tail - 4, "a size in 512-byte blocks")?;
        let (opt, opc) = toks[tail - 3];
        let op = match opt {
            b"R" | b"r" => Op::Read,
            b"W" | b"w" => Op::Write,
            _ => {
                return Err(FieldError::new(
                    opc,
                    format!("bad field `{}`", crate::lines::show(opt)),
                    "R or W",
                ))
            }
        };
        let major = num(tail - 2, "a device major number")?;
        let minor = num(tail - 1, "a device minor number")?;
        if major > u32::MAX as u64 || minor > u32::MAX as u64 {
            return Err(FieldError::new(
                toks[tail - 2].1,
                "device number too large",
                "major minor < 2^32",
            ));
        }
        let offset = sectors(lba, toks[tail - 5].1)?;
        let len = sectors(size, toks[tail - 4].1)?;
        Ok(Parsed::Record(Raw {
            time,
            op,
            offset,
            len,
            dev: DevKey::Num(major << 32 | minor),
            stream,
            measured: None,
        }))
    }
    fn assumptions(&self) -> Vec<String> {
        vec![
            "fiu: ts is nanoseconds; lba and size are 512-byte blocks; pid is kept as the stream"
                .into(),
            "fiu: a device is `major,minor`".into(),
        ]
    }
    fn parse_selection(&self, sel: &str) -> Result<OwnedKey, String> {
        parse_major_minor(sel)
    }
    fn display_key(&self, k: &OwnedKey) -> String {
        display_major_minor(k)
    }
}

/// `8,16` or `8:16` → the key `major << 32 | minor`.
pub fn parse_major_minor(sel: &str) -> Result<OwnedKey, String> {
    let (a, b) = sel
        .trim()
        .split_once([',', ':', ' '])
        .ok_or("expected MAJOR,MINOR, e.g. 8,16")?;
    let a: u32 = a
        .trim()
        .parse()
        .map_err(|_| format!("`{a}` is not a major number"))?;
    let b: u32 = b
        .trim()
        .parse()
        .map_err(|_| format!("`{b}` is not a minor number"))?;
    Ok(OwnedKey::Num((a as u64) << 32 | b as u64))
}

pub fn display_major_minor(k: &OwnedKey) -> String {
    match k {
        OwnedKey::Num(n) => format!("{},{}", n >> 32, n & 0xffff_ffff),
        OwnedKey::Bytes(b) => String::from_utf8_lossy(b).into_owned(),
    }
}
