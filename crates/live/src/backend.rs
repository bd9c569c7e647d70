//! Component devices: the image files or block devices an export is built from, and the
//! real system calls carried out for each `Submit` effect.

use std::alloc::{alloc, alloc_zeroed, dealloc, Layout};
use std::fs::{File, OpenOptions};
use std::io::{self, Seek, SeekFrom};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::client::{Client, Reply};
use crate::proto::{
    DEFAULT_MAX_BLOCK, FLAG_READ_ONLY, FLAG_SEND_FLUSH, FLAG_SEND_TRIM, FLAG_SEND_WRITE_ZEROES,
};

/// Alignment of every data buffer: satisfies O_DIRECT on 512- and 4096-byte sector devices.
pub const BUF_ALIGN: usize = 4096;

/// The allocation behind a buffer of `len` > 0 bytes: whole pages, page-aligned.
fn buf_layout(len: usize) -> Layout {
    let size = len.div_ceil(BUF_ALIGN) * BUF_ALIGN;
    match Layout::from_size_align(size, BUF_ALIGN) {
        Ok(l) => l,
        Err(_) => std::alloc::handle_alloc_error(Layout::new::<u8>()),
    }
}

/// A zero-initialised, page-aligned byte buffer (O_DIRECT needs aligned memory).
pub struct AlignedBuf {
    ptr: *mut u8,
    len: usize,
    layout: Option<Layout>,
}

// SAFETY: AlignedBuf owns its allocation exclusively, like a Vec<u8>.
unsafe impl Send for AlignedBuf {}
unsafe impl Sync for AlignedBuf {}

impl AlignedBuf {
    pub fn zeroed(len: usize) -> AlignedBuf {
        if len == 0 {
            return AlignedBuf {
                ptr: std::ptr::NonNull::<u8>::dangling().as_ptr(),
                len: 0,
                layout: None,
            };
        }
        let layout = buf_layout(len);
        // SAFETY: layout has non-zero size.
        let ptr = unsafe { alloc_zeroed(layout) };
        if ptr.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        AlignedBuf {
            ptr,
            len,
            layout: Some(layout),
        }
    }

    /// A copy of `data`. Not `zeroed` then copied: zeroing a buffer about to be overwritten
    /// was a measurable part of every write's cost.
    pub fn from_slice(data: &[u8]) -> AlignedBuf {
        let len = data.len();
        if len == 0 {
            return AlignedBuf::zeroed(0);
        }
        let layout = buf_layout(len);
        // SAFETY: layout has non-zero size.
        let ptr = unsafe { alloc(layout) };
        if ptr.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        // SAFETY: `ptr` is valid for `layout.size()` bytes and does not overlap `data`. Every
        // byte is written before any read: the data, then zeros to the end of the allocation
        // (padding an O_DIRECT transfer may cover).
        unsafe {
            std::ptr::copy_nonoverlapping(data.as_ptr(), ptr, len);
            std::ptr::write_bytes(ptr.add(len), 0, layout.size() - len);
        }
        AlignedBuf {
            ptr,
            len,
            layout: Some(layout),
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: ptr is valid for len bytes (or dangling with len 0).
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as above, and we hold &mut self.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }

    /// Grow to at least `len` bytes, keeping the contents.
    pub fn ensure(&mut self, len: usize) {
        if len > self.len {
            let mut n = AlignedBuf::zeroed(len);
            n.as_mut_slice()[..self.len].copy_from_slice(self.as_slice());
            *self = n;
        }
    }
}

impl Clone for AlignedBuf {
    fn clone(&self) -> AlignedBuf {
        AlignedBuf::from_slice(self.as_slice())
    }
}

impl PartialEq for AlignedBuf {
    fn eq(&self, other: &AlignedBuf) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl Eq for AlignedBuf {}

impl std::fmt::Debug for AlignedBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AlignedBuf({} bytes)", self.len)
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        if let Some(l) = self.layout {
            // SAFETY: allocated with this layout in `zeroed` or `from_slice`.
            unsafe { dealloc(self.ptr, l) }
        }
    }
}

/// How to open a component device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ComponentSpec {
    pub name: String,
    pub path: PathBuf,
    /// Bypass the host page cache (O_DIRECT): the guest sees the medium, not RAM.
    pub direct: bool,
    pub read_only: bool,
}

impl ComponentSpec {
    pub fn file(path: impl AsRef<Path>) -> ComponentSpec {
        let path = path.as_ref().to_path_buf();
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "image".into());
        ComponentSpec {
            name,
            path,
            direct: false,
            read_only: false,
        }
    }
}

/// An open component device. Shared by all worker threads: positional I/O on a file needs
/// no lock; an NBD export is one connection, its requests one at a time.
pub struct Backend {
    pub name: String,
    medium: Medium,
    size: u64,
    pub direct: bool,
}

enum Medium {
    File {
        file: File,
        is_block: bool,
    },
    /// Another NBD server's export (`nbd://…`, `nbd+unix://…`): a device reached over the
    /// network, as the geometry probe times one served with device emulation. Requests are
    /// sent one at a time and split at the server's largest block.
    Nbd {
        client: Mutex<Client>,
        max_block: u32,
        flags: u16,
    },
    /// A device the configuration declares absent (`fault.missing`: pulled, or dead): no
    /// image stands behind it, every read, write, discard and zeroing fails with ENXIO
    /// (the model answers each with an I/O error at once), and a flush has nothing to do.
    Absent,
}

/// How long a request to an NBD component device may wait for the server.
pub const NBD_REQUEST_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// Whether `path` names an NBD export rather than a file.
pub fn is_nbd_uri(path: &Path) -> bool {
    path.to_str()
        .is_some_and(|p| p.starts_with("nbd://") || p.starts_with("nbd+unix://"))
}

impl Backend {
    pub fn open(spec: &ComponentSpec) -> Result<Backend, String> {
        if is_nbd_uri(&spec.path) {
            return Backend::connect(spec);
        }
        let mut o = OpenOptions::new();
        o.read(true).write(!spec.read_only);
        if spec.direct {
            o.custom_flags(libc::O_DIRECT);
        }
        let mut file = o
            .open(&spec.path)
            .map_err(|e| format!("{}: cannot open component device: {e}", spec.path.display()))?;
        let meta = file
            .metadata()
            .map_err(|e| format!("{}: {e}", spec.path.display()))?;
        let is_block = {
            use std::os::unix::fs::FileTypeExt;
            meta.file_type().is_block_device()
        };
        let size = if is_block {
            file.seek(SeekFrom::End(0))
                .map_err(|e| format!("{}: cannot find its size: {e}", spec.path.display()))?
        } else {
            meta.len()
        };
        Ok(Backend {
            name: spec.name.clone(),
            medium: Medium::File { file, is_block },
            size,
            direct: spec.direct,
        })
    }

    fn connect(spec: &ComponentSpec) -> Result<Backend, String> {
        let uri = spec.path.display().to_string();
        if spec.direct {
            return Err(format!(
                "{uri}: --direct applies to files, not to an NBD export"
            ));
        }
        let client = Client::connect_within(&uri, Some(NBD_REQUEST_TIMEOUT))
            .map_err(|e| format!("{uri}: {e}"))?;
        // A hung server fails the request (EIO) instead of holding a worker for ever.
        client.set_timeout(Some(NBD_REQUEST_TIMEOUT))?;
        if !spec.read_only && client.flags & FLAG_READ_ONLY != 0 {
            return Err(format!("{uri}: the export is read-only"));
        }
        // The server's preferred block as the largest request if it names no maximum.
        let max_block = match client.block.2 {
            0 => DEFAULT_MAX_BLOCK,
            m => m.min(DEFAULT_MAX_BLOCK),
        };
        let name = if spec.name.is_empty() {
            uri.clone()
        } else {
            spec.name.clone()
        };
        Ok(Backend {
            name,
            size: client.size,
            medium: Medium::Nbd {
                max_block,
                flags: client.flags,
                client: Mutex::new(client),
            },
            direct: false,
        })
    }

    /// The absent device `name` of `size` bytes (`fault.missing`): see [`Medium::Absent`].
    pub fn absent(name: &str, size: u64) -> Backend {
        Backend {
            name: name.to_string(),
            medium: Medium::Absent,
            size,
            direct: false,
        }
    }

    pub fn is_absent(&self) -> bool {
        matches!(self.medium, Medium::Absent)
    }

    pub fn size(&self) -> u64 {
        self.size
    }

    /// The error of every data operation on an absent device.
    fn absent_error() -> io::Error {
        io::Error::from_raw_os_error(libc::ENXIO)
    }

    /// Read exactly `buf.len()` bytes; bytes past the end of a file read as zeros.
    pub fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let file = match &self.medium {
            Medium::File { file, .. } => file,
            Medium::Absent => return Err(Self::absent_error()),
            Medium::Nbd { .. } => {
                let mut at = 0usize;
                for (off, len) in self.chunks(offset, buf.len() as u64) {
                    let r = self.nbd(|c| c.read(off, len))?;
                    if r.data.len() != len as usize {
                        return Err(io::Error::other(format!(
                            "NBD read of {len} bytes at {off} returned {}",
                            r.data.len()
                        )));
                    }
                    buf[at..at + len as usize].copy_from_slice(&r.data);
                    at += len as usize;
                }
                return Ok(());
            }
        };
        let mut done = 0;
        while done < buf.len() {
            match file.read_at(&mut buf[done..], offset + done as u64) {
                Ok(0) => {
                    buf[done..].fill(0);
                    return Ok(());
                }
                Ok(n) => done += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    pub fn write_at(&self, buf: &[u8], offset: u64, fua: bool) -> io::Result<()> {
        match &self.medium {
            Medium::File { file, .. } => {
                file.write_all_at(buf, offset)?;
                if fua {
                    self.flush()?;
                }
            }
            Medium::Nbd { .. } => {
                let mut at = 0usize;
                for (off, len) in self.chunks(offset, buf.len() as u64) {
                    let data = &buf[at..at + len as usize];
                    // FUA travels with the request: the server makes it durable (and, with
                    // device emulation, times it to the media).
                    self.nbd(|c| c.write(off, data, fua))?;
                    at += len as usize;
                }
            }
            Medium::Absent => return Err(Self::absent_error()),
        }
        Ok(())
    }

    pub fn flush(&self) -> io::Result<()> {
        match &self.medium {
            Medium::File { file, .. } => file.sync_data(),
            Medium::Nbd { flags, .. } => {
                if flags & FLAG_SEND_FLUSH != 0 {
                    self.nbd(|c| c.flush())?;
                }
                Ok(())
            }
            Medium::Absent => Ok(()),
        }
    }

    /// `len` bytes from `offset` in requests the server takes.
    fn chunks(&self, offset: u64, len: u64) -> impl Iterator<Item = (u64, u32)> {
        let max = match &self.medium {
            Medium::Nbd { max_block, .. } => *max_block as u64,
            Medium::File { .. } | Medium::Absent => u32::MAX as u64,
        };
        let end = offset + len;
        (0..len.div_ceil(max)).map(move |i| {
            let off = offset + i * max;
            (off, (end - off).min(max) as u32)
        })
    }

    /// One request to the export; an NBD error is the errno it carries, a broken
    /// connection an I/O error naming it.
    fn nbd(&self, f: impl FnOnce(&mut Client) -> Result<Reply, String>) -> io::Result<Reply> {
        let Medium::Nbd { client, .. } = &self.medium else {
            return Err(io::Error::other("not an NBD export"));
        };
        let mut c = client.lock().unwrap_or_else(|e| e.into_inner());
        let r = f(&mut c).map_err(|e| io::Error::other(format!("{}: {e}", self.name)))?;
        if r.error != 0 {
            return Err(io::Error::from_raw_os_error(r.error as i32));
        }
        Ok(r)
    }

    fn fallocate(&self, mode: libc::c_int, offset: u64, len: u64) -> io::Result<()> {
        let Medium::File { file, .. } = &self.medium else {
            return Err(io::Error::from_raw_os_error(libc::EOPNOTSUPP));
        };
        // SAFETY: plain syscall on an fd we own.
        let r = unsafe {
            libc::fallocate(
                file.as_raw_fd(),
                mode,
                offset as libc::off_t,
                len as libc::off_t,
            )
        };
        if r == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }

    fn is_file(&self) -> bool {
        matches!(
            self.medium,
            Medium::File {
                is_block: false,
                ..
            }
        )
    }

    /// Deallocate a range (TRIM). A device that cannot punch holes ignores the hint, which
    /// the protocol allows.
    pub fn discard(&self, offset: u64, len: u64, fua: bool) -> io::Result<()> {
        if self.is_absent() {
            return Err(Self::absent_error());
        }
        if self.is_file() {
            match self.fallocate(
                libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                offset,
                len,
            ) {
                Ok(()) => {}
                Err(e) if unsupported(&e) => {}
                Err(e) => return Err(e),
            }
        } else if let Medium::Nbd { flags, .. } = &self.medium {
            if flags & FLAG_SEND_TRIM != 0 {
                for (off, n) in self.chunks(offset, len) {
                    self.nbd(|c| c.trim(off, n))?;
                }
            }
        }
        if fua {
            self.flush()?;
        }
        Ok(())
    }

    /// Make a range read as zeros (WRITE_ZEROES), deallocating it when allowed.
    pub fn write_zeroes(&self, offset: u64, len: u64, may_trim: bool, fua: bool) -> io::Result<()> {
        if self.is_absent() {
            return Err(Self::absent_error());
        }
        let mut done = false;
        if self.is_file() {
            let mode = if may_trim {
                libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE
            } else {
                libc::FALLOC_FL_ZERO_RANGE | libc::FALLOC_FL_KEEP_SIZE
            };
            match self.fallocate(mode, offset, len) {
                Ok(()) => done = true,
                Err(e) if unsupported(&e) => {}
                Err(e) => return Err(e),
            }
        } else if let Medium::Nbd { flags, .. } = &self.medium {
            if flags & FLAG_SEND_WRITE_ZEROES != 0 {
                for (off, n) in self.chunks(offset, len) {
                    self.nbd(|c| c.write_zeroes(off, n))?;
                }
                done = true;
            }
        }
        if !done {
            const CHUNK: u64 = 1 << 20;
            let zeros = AlignedBuf::zeroed(CHUNK as usize);
            let mut at = offset;
            while at < offset + len {
                let n = CHUNK.min(offset + len - at) as usize;
                self.write_at(&zeros.as_slice()[..n], at, false)?;
                at += n as u64;
            }
        }
        if fua {
            self.flush()?;
        }
        Ok(())
    }
}

fn unsupported(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EOPNOTSUPP) | Some(libc::ENOSYS) | Some(libc::EINVAL)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_buffers_are_aligned_and_zeroed() {
        let mut b = AlignedBuf::zeroed(5000);
        assert_eq!(b.as_slice().as_ptr() as usize % BUF_ALIGN, 0);
        assert!(b.as_slice().iter().all(|&x| x == 0));
        b.as_mut_slice()[4999] = 7;
        b.ensure(9000);
        assert_eq!(b.len(), 9000);
        assert_eq!(b.as_slice()[4999], 7);
        assert_eq!(AlignedBuf::zeroed(0).as_slice().len(), 0);
    }

    #[test]
    fn file_ops_round_trip() {
        let dir = std::env::temp_dir().join(format!("wattio-backend-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("img");
        std::fs::write(&p, vec![0x11u8; 1 << 16]).unwrap();
        let b = Backend::open(&ComponentSpec::file(&p)).unwrap();
        assert_eq!(b.size(), 1 << 16);
        b.write_at(&[0xAA; 4096], 4096, true).unwrap();
        let mut r = vec![0u8; 8192];
        b.read_at(&mut r, 0).unwrap();
        assert!(r[..4096].iter().all(|&x| x == 0x11));
        assert!(r[4096..].iter().all(|&x| x == 0xAA));
        b.write_zeroes(4096, 4096, false, false).unwrap();
        b.read_at(&mut r, 0).unwrap();
        assert!(r[4096..].iter().all(|&x| x == 0));
        // Reads past the end of the file return zeros instead of failing.
        let mut tail = vec![9u8; 100];
        b.read_at(&mut tail, (1 << 16) - 50).unwrap();
        assert!(tail[..50].iter().all(|&x| x == 0x11));
        assert!(tail[50..].iter().all(|&x| x == 0));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
