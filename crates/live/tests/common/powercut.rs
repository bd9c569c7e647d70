//! The power-loss model the durability tests share (`crash.rs`, the guest's power cut in
//! `vm_launch.rs`): an `LD_PRELOAD` shim (`tests/data/powercut_shim.c`) that journals a
//! server's writes and syncs to the images it tracks, and the image a power cut at the
//! journal's end could leave.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;

/// The shim, compiled once per test run. It is built beside its final path and renamed
/// onto it: another test process (another test binary, a second `cargo test`) building it
/// at the same time would otherwise truncate the file under a server being started, whose
/// loader then ignores the preload and runs with no journal at all (seen when two crash
/// test runs overlapped: every durable block of a trial "lost").
pub fn shim() -> &'static Path {
    static SHIM: OnceLock<PathBuf> = OnceLock::new();
    SHIM.get_or_init(|| {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/powercut_shim.c");
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR"));
        let out = dir.join("powercut_shim.so");
        let tmp = dir.join(format!("powercut_shim.so.{}.tmp", std::process::id()));
        let st = Command::new("cc")
            .args(["-shared", "-fPIC", "-O2", "-Wall", "-Werror", "-o"])
            .arg(&tmp)
            .arg(&src)
            .arg("-ldl")
            .status()
            .expect("cc (the C compiler) is needed to build the power-loss shim");
        assert!(st.success(), "building {} failed", src.display());
        std::fs::rename(&tmp, &out)
            .unwrap_or_else(|e| panic!("{} → {}: {e}", tmp.display(), out.display()));
        out
    })
}

/// The journal a server run under the shim wrote. The shim creates it as the server opens
/// its first file, so a missing journal means the shim was not loaded (the loader ignores a
/// preload it cannot use): that is the test's failure, never an empty journal (which would
/// read as a server that made nothing durable).
pub fn shim_journal(journal: &Path) -> Vec<u8> {
    std::fs::read(journal).unwrap_or_else(|e| {
        panic!(
            "{}: {e}: the power-loss shim ({}) wrote no journal — was it preloaded?",
            journal.display(),
            shim().display()
        )
    })
}

/// A `wattio-live serve CONFIG` process over `images` (device name, image path) on the
/// Unix socket `sock`, under the shim: it tracks the images in that order (the `file`
/// numbers of [`power_cut_image`]) and journals to `journal`. `ignore_sync`: the control,
/// whose syncs are no-ops.
pub fn serve_config_under_shim(
    cfg: &Path,
    images: &[(&str, &Path)],
    sock: &Path,
    journal: &Path,
    ignore_sync: bool,
) -> Child {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_wattio-live"));
    cmd.arg("serve").arg(cfg);
    for (name, p) in images {
        cmd.arg("--image").arg(format!("{name}={}", p.display()));
    }
    let track: Vec<String> = images
        .iter()
        .map(|(_, p)| p.display().to_string())
        .collect();
    cmd.arg("--socket")
        .arg(sock)
        .args(["--status", "0"])
        .env("LD_PRELOAD", shim())
        .env("WATTIO_SHIM_TRACK", track.join(":"))
        .env("WATTIO_SHIM_LOG", journal)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    if ignore_sync {
        cmd.env("WATTIO_SHIM_IGNORE_SYNC", "1");
    }
    cmd.spawn().unwrap()
}

/// The image a power cut at the end of `journal` could leave of the shim's tracked file
/// number `file`: `initial` plus every write to it made durable by a sync of it that began
/// after the write returned; all other writes dropped.
pub fn power_cut_image(initial: &[u8], journal: &[u8], file: u32) -> Vec<u8> {
    struct Rec {
        kind: u8,
        a: u64,
        b: u64,
        data: std::ops::Range<usize>,
    }
    let mut recs = Vec::new();
    let mut p = 0;
    while p + 24 <= journal.len() {
        let kind = journal[p];
        let of = u32::from_ne_bytes(journal[p + 4..p + 8].try_into().unwrap());
        let a = u64::from_ne_bytes(journal[p + 8..p + 16].try_into().unwrap());
        let b = u64::from_ne_bytes(journal[p + 16..p + 24].try_into().unwrap());
        let n = if kind == b'W' { b as usize } else { 0 };
        if p + 24 + n > journal.len() {
            break; // a record cut off by the kill
        }
        if of != file {
            p += 24 + n;
            continue;
        }
        recs.push(Rec {
            kind,
            a,
            b,
            data: p + 24..p + 24 + n,
        });
        p += 24 + n;
    }
    // Writes before the begin of the last sync that returned are durable.
    let mut begin: HashMap<u64, usize> = HashMap::new();
    let mut durable_before = 0;
    for (i, r) in recs.iter().enumerate() {
        match r.kind {
            b'B' => {
                begin.insert(r.a, i);
            }
            b'E' => durable_before = durable_before.max(begin[&r.a]),
            _ => {}
        }
    }
    let mut img = initial.to_vec();
    for r in &recs[..durable_before] {
        let (off, len) = (r.a as usize, r.b as usize);
        match r.kind {
            b'W' => img[off..off + len].copy_from_slice(&journal[r.data.clone()]),
            b'Z' => img[off..off + len].fill(0),
            _ => {}
        }
    }
    img
}
