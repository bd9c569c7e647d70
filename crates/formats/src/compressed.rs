//! Traces as they are published: compressed, or in a tar archive. The MSR Cambridge traces
//! come as `.csv.gz`, the Tencent CBS trace as one `.tgz` an hour; a trace is read through
//! its decompressor, chosen by the stream's magic bytes (not its name), and out of a tar
//! archive that holds it alone, so every text reader and the blktrace reader take them as
//! they are downloaded.
//!
//! Decompression streams: memory is the decoder's window (gzip 32 KiB; zstd at most the
//! library's default limit of 2^27 bytes, which a frame asking for more is refused) and the
//! readers' own bounded buffers, whatever the compression ratio.

use crate::lines::read_full;
use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::Path;

/// A compression wattio reads through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Codec {
    Gzip,
    Zstd,
}

impl Codec {
    pub fn name(self) -> &'static str {
        match self {
            Codec::Gzip => "gzip",
            Codec::Zstd => "zstd",
        }
    }
}

/// The compression `head` (a stream's first bytes) starts with, if any.
pub fn codec_of(head: &[u8]) -> Option<Codec> {
    if head.starts_with(&[0x1f, 0x8b]) {
        Some(Codec::Gzip)
    } else if head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        Some(Codec::Zstd)
    } else {
        None
    }
}

/// Read up to `n` bytes of `r` (fewer only at its end).
fn peek(r: &mut impl Read, n: usize) -> std::io::Result<Vec<u8>> {
    let mut v = Vec::with_capacity(n);
    r.take(n as u64).read_to_end(&mut v)?;
    Ok(v)
}

/// The stream `r`, decompressed if it starts with a compression's magic and its one file
/// if it is (then) a tar archive.
pub fn from_reader<R: Read + Send + 'static>(r: R) -> std::io::Result<Opened> {
    let mut b = BufReader::with_capacity(64 << 10, r);
    // The first bytes, put back in front: a compression's magic or data.
    let head = peek(&mut b, 4)?;
    let codec = codec_of(&head);
    let r = wrap(Box::new(std::io::Cursor::new(head).chain(b)), codec)?;
    // The (decompressed) stream's first block, put back in front: a tar header or data.
    let mut b = BufReader::with_capacity(64 << 10, r);
    let first = peek(&mut b, BLOCK)?;
    let tar = is_tar(&first);
    let stream: Box<dyn Read + Send> = Box::new(std::io::Cursor::new(first).chain(b));
    if !tar {
        return Ok(Opened {
            reader: stream,
            codec,
            member: None,
        });
    }
    let t = TarMember::new(stream)?;
    let member = Some(t.name.clone());
    Ok(Opened {
        reader: Box::new(t),
        codec,
        member,
    })
}

fn wrap(r: Box<dyn Read + Send>, codec: Option<Codec>) -> std::io::Result<Box<dyn Read + Send>> {
    Ok(match codec {
        // Multi-member: `cat a.gz b.gz` and pigz's output are one stream to gunzip.
        Some(Codec::Gzip) => Box::new(flate2::read::MultiGzDecoder::new(r)),
        Some(Codec::Zstd) => Box::new(zstd::stream::read::Decoder::new(r)?),
        None => r,
    })
}

/// A trace file opened for reading: its bytes, and what was undone to get them.
pub struct Opened {
    pub reader: Box<dyn Read + Send>,
    pub codec: Option<Codec>,
    /// The member read, when the file is a tar archive.
    pub member: Option<String>,
}

impl Opened {
    /// What was undone, for a reader's assumptions.
    pub fn notes(&self) -> Vec<String> {
        let mut v = Vec::new();
        if let Some(c) = self.codec {
            v.push(format!("decompressed: {} stream", c.name()));
        }
        if let Some(m) = &self.member {
            v.push(format!("tar archive: read its one file, {m}"));
        }
        v
    }
}

/// The file at `path`, decompressed if it is compressed and its one file if it is a tar
/// archive; a plain file is handed back as it is, rewound (no layer between it and the
/// reader's own buffer).
pub fn open(path: &Path) -> std::io::Result<Opened> {
    let mut f = File::open(path)?;
    let head = peek(&mut f, BLOCK)?;
    f.seek(SeekFrom::Start(0))?;
    let codec = codec_of(&head);
    if codec.is_none() && !is_tar(&head) {
        return Ok(Opened {
            reader: Box::new(f),
            codec: None,
            member: None,
        });
    }
    from_reader(f)
}

/// A tar block.
const BLOCK: usize = 512;

/// The one regular file of a tar archive, read as a stream: directories and extended
/// headers (pax `x`/`g`, GNU long names `L`/`K`) are passed over; a second regular file is
/// an error when the reader reaches it (which file a trace is must not be a guess).
pub struct TarMember<R: Read> {
    r: R,
    name: String,
    /// Bytes of the member not read yet, then of its padding.
    left: u64,
    pad: u64,
    done: bool,
}

/// A header's checksum: the sum of its bytes, the checksum field counted as spaces.
fn checksum(b: &[u8; BLOCK]) -> u64 {
    let field = 148..156;
    b.iter().map(|&x| x as u64).sum::<u64>() - b[field].iter().map(|&x| x as u64).sum::<u64>()
        + 8 * 32
}

/// A header's name (with the ustar prefix), size and type.
fn header(b: &[u8; BLOCK]) -> std::io::Result<(String, u64, u8)> {
    let bad = |m: String| std::io::Error::new(std::io::ErrorKind::InvalidData, m);
    let sum = checksum(b);
    let field = |r: std::ops::Range<usize>| {
        let f = &b[r];
        let end = f.iter().position(|&c| c == 0).unwrap_or(f.len());
        String::from_utf8_lossy(&f[..end]).trim().to_string()
    };
    let octal = |r: std::ops::Range<usize>, what: &str| -> std::io::Result<u64> {
        let f = &b[r.clone()];
        if f[0] & 0x80 != 0 {
            // GNU base-256 (a member of 8 GiB or more): big-endian after the marker bit.
            return Ok(f[1..]
                .iter()
                .fold(0u64, |a, &x| a.saturating_mul(256).saturating_add(x as u64)));
        }
        let t = field(r);
        if t.is_empty() {
            return Ok(0);
        }
        u64::from_str_radix(&t, 8)
            .map_err(|_| bad(format!("tar header: {what} `{t}` is not octal")))
    };
    let want = octal(148..156, "checksum")?;
    if want != sum {
        return Err(bad(format!(
            "tar header: checksum {want} where the header sums to {sum} (a damaged archive)"
        )));
    }
    let mut name = field(0..100);
    let prefix = field(345..500);
    if !prefix.is_empty() && &b[257..262] == b"ustar" && b[263] == b'0' {
        name = format!("{prefix}/{name}");
    }
    Ok((name, octal(124..136, "size")?, b[156]))
}

impl<R: Read> TarMember<R> {
    /// Positioned at the archive's first regular file.
    pub fn new(r: R) -> std::io::Result<TarMember<R>> {
        let mut t = TarMember {
            r,
            name: String::new(),
            left: 0,
            pad: 0,
            done: false,
        };
        match t.next_file()? {
            Some((name, size)) => {
                t.name = name;
                t.left = size;
                t.pad = (BLOCK as u64 - size % BLOCK as u64) % BLOCK as u64;
                Ok(t)
            }
            None => Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "a tar archive with no file in it",
            )),
        }
    }

    /// The next regular file's name and size, the headers before it passed over; `None`
    /// at the archive's end.
    fn next_file(&mut self) -> std::io::Result<Option<(String, u64)>> {
        let mut block = [0u8; BLOCK];
        // A long name given by the entry before the file's (GNU `L`, pax `path`).
        let mut long: Option<String> = None;
        loop {
            let n = read_full(&mut self.r, &mut block)?;
            if n == 0 || block.iter().all(|&b| b == 0) {
                return Ok(None);
            }
            if n < BLOCK {
                return Err(eof("the tar archive ends inside a header"));
            }
            let (name, size, kind) = header(&block)?;
            if matches!(kind, b'0' | 0 | b'7') {
                return Ok(Some((long.unwrap_or(name), size)));
            }
            let padded = size.div_ceil(BLOCK as u64) * BLOCK as u64;
            if matches!(kind, b'L' | b'x') {
                // A name or extended header: read (bounded), then its padding.
                if size > MAX_EXTENSION {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::InvalidData,
                        format!(
                            "tar: an extended header of {size} bytes (at most {MAX_EXTENSION})"
                        ),
                    ));
                }
                let mut data = vec![0u8; padded as usize];
                if read_full(&mut self.r, &mut data)? < padded as usize {
                    return Err(eof("the tar archive ends inside an entry"));
                }
                data.truncate(size as usize);
                if kind == b'L' {
                    let end = data.iter().position(|&c| c == 0).unwrap_or(data.len());
                    long = Some(String::from_utf8_lossy(&data[..end]).into_owned());
                } else if let Some(p) = pax_path(&data) {
                    long = Some(p);
                }
                continue;
            }
            // Anything else (directory, link, global header, …): its data, skipped.
            let got = std::io::copy(&mut (&mut self.r).take(padded), &mut std::io::sink())?;
            if got < padded {
                return Err(eof("the tar archive ends inside an entry"));
            }
            long = None;
        }
    }
}

/// Bytes of a GNU long name or a pax extended header read at most.
const MAX_EXTENSION: u64 = 1 << 20;

fn eof(what: &str) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::UnexpectedEof, what.to_string())
}

/// The `path` of a pax extended header's records (`LEN key=value\n` each).
fn pax_path(mut data: &[u8]) -> Option<String> {
    let mut path = None;
    while !data.is_empty() {
        let sp = data.iter().position(|&c| c == b' ')?;
        let len: usize = std::str::from_utf8(&data[..sp]).ok()?.parse().ok()?;
        if len <= sp || len > data.len() {
            return path;
        }
        let rec = &data[sp + 1..len];
        let rec = rec.strip_suffix(b"\n").unwrap_or(rec);
        if let Some(v) = rec.strip_prefix(b"path=") {
            path = Some(String::from_utf8_lossy(v).into_owned());
        }
        data = &data[len..];
    }
    path
}

impl<R: Read> Read for TarMember<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.left > 0 {
            let want = buf.len().min(self.left.min(usize::MAX as u64) as usize);
            let n = self.r.read(&mut buf[..want])?;
            if n == 0 && want > 0 {
                return Err(eof(&format!("the tar archive ends inside {}", self.name)));
            }
            self.left -= n as u64;
            return Ok(n);
        }
        if self.done {
            return Ok(0);
        }
        self.done = true;
        let mut pad = [0u8; BLOCK];
        read_full(&mut self.r, &mut pad[..self.pad as usize])?;
        match self.next_file()? {
            None => Ok(0),
            Some((other, _)) => Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!(
                    "the tar archive holds another file, {other}, after {}: extract the one to read",
                    self.name
                ),
            )),
        }
    }
}

/// Does `data` (a stream's first bytes, decompressed) begin a tar archive (a `.tgz`)?
pub fn is_tar(data: &[u8]) -> bool {
    data.len() >= 262 && &data[257..262] == b"ustar"
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    const TEXT: &[u8] = b"128166372003061629,hm,1,Read,3154227200,4096,40160\n";

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    fn read_all(r: Box<dyn Read + Send>) -> std::io::Result<Vec<u8>> {
        let mut v = Vec::new();
        let mut r = r;
        r.read_to_end(&mut v)?;
        Ok(v)
    }

    #[test]
    fn gzip_zstd_and_plain_streams_read_back_the_same_bytes() {
        let gz = gzip(TEXT);
        let zs = zstd::stream::encode_all(TEXT, 3).unwrap();
        for (data, codec) in [
            (gz, Some(Codec::Gzip)),
            (zs, Some(Codec::Zstd)),
            (TEXT.to_vec(), None),
        ] {
            let o = from_reader(std::io::Cursor::new(data)).unwrap();
            assert_eq!(o.codec, codec);
            assert_eq!(read_all(o.reader).unwrap(), TEXT);
        }
        // Two gzip members back to back (`cat a.gz b.gz`) are one stream.
        let two = [gzip(TEXT), gzip(TEXT)].concat();
        let o = from_reader(std::io::Cursor::new(two)).unwrap();
        assert_eq!(read_all(o.reader).unwrap(), [TEXT, TEXT].concat());
    }

    /// A ustar header for a regular file `name` of `size` bytes, its checksum right.
    fn tar_header(name: &str, size: u64) -> [u8; BLOCK] {
        let mut b = [0u8; BLOCK];
        b[..name.len()].copy_from_slice(name.as_bytes());
        b[124..135].copy_from_slice(format!("{size:011o}").as_bytes());
        b[156] = b'0';
        b[257..263].copy_from_slice(b"ustar\0");
        b[263..265].copy_from_slice(b"00");
        let sum: u64 = b.iter().map(|&x| x as u64).sum::<u64>() + 8 * 32;
        b[148..155].copy_from_slice(format!("{sum:06o}\0").as_bytes());
        b[155] = b' ';
        b
    }

    #[test]
    fn a_tar_member_is_read_to_its_size_and_damage_is_an_error() {
        let mut tar = tar_header("t.csv", TEXT.len() as u64).to_vec();
        tar.extend_from_slice(TEXT);
        tar.resize(tar.len().div_ceil(BLOCK) * BLOCK + 2 * BLOCK, 0);
        let mut t = TarMember::new(std::io::Cursor::new(tar.clone())).unwrap();
        assert_eq!(t.name, "t.csv");
        let mut got = Vec::new();
        t.read_to_end(&mut got).unwrap();
        assert_eq!(got, TEXT);
        // A header whose checksum does not add up.
        let mut bad = tar.clone();
        bad[0] = b'T';
        let err = TarMember::new(std::io::Cursor::new(bad)).err().unwrap();
        assert!(err.to_string().contains("checksum"), "{err}");
        // Cut inside the member: an error, not a shorter trace.
        let cut = tar[..BLOCK + 10].to_vec();
        let mut t = TarMember::new(std::io::Cursor::new(cut)).unwrap();
        assert!(t.read_to_end(&mut Vec::new()).is_err());
        // Past the bound, a GNU long name is refused before it is read.
        let mut long = tar_header("././@LongLink", MAX_EXTENSION + 1).to_vec();
        long[156] = b'L';
        let sum = checksum(long[..BLOCK].try_into().unwrap());
        long[148..155].copy_from_slice(format!("{sum:06o}\0").as_bytes());
        let err = TarMember::new(std::io::Cursor::new(long)).err().unwrap();
        assert!(err.to_string().contains("extended header"), "{err}");
    }

    /// A reader that hands out one byte per read: the magic is still found.
    struct Trickle(std::io::Cursor<Vec<u8>>);
    impl Read for Trickle {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = buf.len().min(1);
            self.0.read(&mut buf[..n])
        }
    }

    #[test]
    fn the_magic_is_found_across_short_reads_and_short_inputs_pass_through() {
        let o = from_reader(Trickle(std::io::Cursor::new(gzip(TEXT)))).unwrap();
        assert_eq!(o.codec, Some(Codec::Gzip));
        assert_eq!(read_all(o.reader).unwrap(), TEXT);
        for short in [&b""[..], b"\x1f", b"ab"] {
            let o = from_reader(Trickle(std::io::Cursor::new(short.to_vec()))).unwrap();
            assert_eq!(o.codec, None);
            assert_eq!(read_all(o.reader).unwrap(), short);
        }
    }

    #[test]
    fn a_damaged_stream_is_an_error_not_a_short_trace() {
        let mut gz = gzip(TEXT);
        let n = gz.len();
        gz.truncate(n - 12);
        // At the first block's peek or later: an error either way.
        assert!(from_reader(std::io::Cursor::new(gz))
            .and_then(|o| read_all(o.reader))
            .is_err());
        let mut zs = zstd::stream::encode_all(TEXT, 3).unwrap();
        let n = zs.len();
        zs.truncate(n - 4);
        assert!(from_reader(std::io::Cursor::new(zs))
            .and_then(|o| read_all(o.reader))
            .is_err());
    }
}
