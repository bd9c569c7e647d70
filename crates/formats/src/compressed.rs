//! Traces as they are published: compressed. The MSR Cambridge traces come as `.csv.gz`,
//! others as gzip or zstd streams; a trace is read through its decompressor, chosen by the
//! stream's magic bytes (not its name), so every text reader and the blktrace reader take
//! them as they are downloaded.
//!
//! Decompression streams: memory is the decoder's window (gzip 32 KiB; zstd at most the
//! library's default limit of 2^27 bytes, which a frame asking for more is refused) and the
//! readers' own bounded buffers, whatever the compression ratio.

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

/// `r` decompressed if it starts with a compression's magic, else as it is.
pub fn decompressed<R: Read + Send + 'static>(
    r: R,
) -> std::io::Result<(Box<dyn Read + Send>, Option<Codec>)> {
    let mut b = BufReader::with_capacity(64 << 10, r);
    // The first four bytes (a read may return fewer than asked), put back in front.
    let mut peek = Vec::with_capacity(4);
    while peek.len() < 4 {
        let mut more = [0u8; 4];
        match b.read(&mut more[..4 - peek.len()]) {
            Ok(0) => break,
            Ok(n) => peek.extend_from_slice(&more[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    let codec = codec_of(&peek);
    let joined: Box<dyn Read + Send> = Box::new(std::io::Cursor::new(peek).chain(b));
    wrap(joined, codec).map(|r| (r, codec))
}

fn wrap(r: Box<dyn Read + Send>, codec: Option<Codec>) -> std::io::Result<Box<dyn Read + Send>> {
    Ok(match codec {
        // Multi-member: `cat a.gz b.gz` and pigz's output are one stream to gunzip.
        Some(Codec::Gzip) => Box::new(flate2::read::MultiGzDecoder::new(r)),
        Some(Codec::Zstd) => Box::new(zstd::stream::read::Decoder::new(r)?),
        None => r,
    })
}

/// The file at `path`, decompressed if it is compressed; a plain file is handed back
/// as it is, rewound (no layer between it and the reader's own buffer).
pub fn open(path: &Path) -> std::io::Result<(Box<dyn Read + Send>, Option<Codec>)> {
    let mut f = File::open(path)?;
    let mut head = Vec::with_capacity(4);
    (&mut f).take(4).read_to_end(&mut head)?;
    f.seek(SeekFrom::Start(0))?;
    match codec_of(&head) {
        None => Ok((Box::new(f), None)),
        Some(c) => {
            wrap(Box::new(BufReader::with_capacity(64 << 10, f)), Some(c)).map(|r| (r, Some(c)))
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
            let (r, c) = decompressed(std::io::Cursor::new(data)).unwrap();
            assert_eq!(c, codec);
            assert_eq!(read_all(r).unwrap(), TEXT);
        }
        // Two gzip members back to back (`cat a.gz b.gz`) are one stream.
        let two = [gzip(TEXT), gzip(TEXT)].concat();
        let (r, _) = decompressed(std::io::Cursor::new(two)).unwrap();
        assert_eq!(read_all(r).unwrap(), [TEXT, TEXT].concat());
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
        let (r, c) = decompressed(Trickle(std::io::Cursor::new(gzip(TEXT)))).unwrap();
        assert_eq!(c, Some(Codec::Gzip));
        assert_eq!(read_all(r).unwrap(), TEXT);
        for short in [&b""[..], b"\x1f", b"ab"] {
            let (r, c) = decompressed(Trickle(std::io::Cursor::new(short.to_vec()))).unwrap();
            assert_eq!(c, None);
            assert_eq!(read_all(r).unwrap(), short);
        }
    }

    #[test]
    fn a_damaged_stream_is_an_error_not_a_short_trace() {
        let mut gz = gzip(TEXT);
        let n = gz.len();
        gz.truncate(n - 12);
        let (r, _) = decompressed(std::io::Cursor::new(gz)).unwrap();
        assert!(read_all(r).is_err());
        let mut zs = zstd::stream::encode_all(TEXT, 3).unwrap();
        let n = zs.len();
        zs.truncate(n - 4);
        let (r, _) = decompressed(std::io::Cursor::new(zs)).unwrap();
        assert!(read_all(r).is_err());
    }
}
