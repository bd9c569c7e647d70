//! IOLab's launch prefetcher served live over a disk image: a "launch" (the same scattered
//! reads, one after another) is learned, then detected and prefetched on each relaunch,
//! with a guest write between launches and one in the middle of each relaunch. Every read returns the image's bytes or the bytes
//! written since, the relaunches hit, and after the last launch has ended (the layer's
//! `gap_s` of idleness) no scratch buffer is left: before the end of a launch released its
//! extents' buffers, every relaunch leaked a whole prefetch (docs/functions/iolab-prefetch.md).

mod common;

use common::*;
use std::time::Duration;
use wattio_live::client::Client;

const K: usize = 4096;
/// The launch: 4 KiB blocks read in this order (scattered, so LBA order differs).
const LAUNCH: [u64; 8] = [900, 17, 512, 3, 2040, 64, 1500, 33];
/// Idleness that ends a launch, and what the test waits between launches (well above it,
/// and the launch's own requests well below it, even on a loaded machine).
const GAP_S: f64 = 0.5;
const PAUSE: Duration = Duration::from_millis(1200);

fn config() -> String {
    format!(
        "[[device]]\nname = \"disk\"\nmodel = \"hp-c2247a\"\n\n\
         [[function]]\nkind = \"iolab-prefetch\"\ngap_s = {GAP_S}\n"
    )
}

#[test]
fn relaunches_hit_return_the_latest_bytes_and_leave_no_buffer_behind() {
    let d = TempDir::new("prefetch-live");
    let cfg = d.path("run.toml");
    std::fs::write(&cfg, config()).unwrap();
    let disk = image(&d, "disk.img", 8 << 20, 71);
    let mut want = std::fs::read(&disk).unwrap();
    let sock = d.path("s");
    let srv = serve_config(&cfg, &[("disk", &disk)], &sock);
    let mut c = Client::connect(&uri(&sock, "disk")).unwrap();
    let launches = 5;
    for launch in 0..launches {
        for (i, &b) in LAUNCH.iter().enumerate() {
            if launch > 0 && i == 4 {
                // Mid-launch, after the prefetch: a write to a block the launch reads next
                // but one. Its extent is fetched, so only the invalidation keeps the read
                // from being answered with the old bytes.
                let w = LAUNCH[5];
                let new = pattern(2000 + launch as u64, K);
                assert_eq!(c.write(w * K as u64, &new, false).unwrap().error, 0);
                want[w as usize * K..(w as usize + 1) * K].copy_from_slice(&new);
            }
            let r = c.read(b * K as u64, K as u32).unwrap();
            assert_eq!(r.error, 0);
            let at = b as usize * K;
            assert!(
                r.data == want[at..at + K],
                "launch {launch}: block {b} is not the latest data"
            );
        }
        std::thread::sleep(PAUSE);
        // Between launches the guest rewrites one block the launch reads: the next
        // launch's prefetch must read it anew (and an extent fetched before a write is
        // never served after it).
        let b = LAUNCH[launch % LAUNCH.len()];
        let new = pattern(1000 + launch as u64, K);
        assert_eq!(c.write(b * K as u64, &new, true).unwrap().error, 0);
        want[b as usize * K..(b as usize + 1) * K].copy_from_slice(&new);
        std::thread::sleep(PAUSE);
    }
    c.disconnect().unwrap();
    let s = srv.shutdown(Duration::from_secs(5)).unwrap();
    let counter = |name: &str| layer_counter(&s, "iolab", name);
    // Launch 1 is learned (with the write after it, which is not a read and so not an
    // extent); launches 2..5 are detected at their third read, and their other reads are
    // answered from the prefetch but the one whose block was just written.
    assert_eq!(counter("learned_extents"), LAUNCH.len() as f64, "{s:?}");
    assert_eq!(counter("launches_detected"), (launches - 1) as f64, "{s:?}");
    assert!(
        counter("prefetch_hits") >= (launches - 1) as f64 * 3.0,
        "{s:?}"
    );
    assert!(
        counter("invalidated_extents") >= (launches - 1) as f64,
        "{s:?}"
    );
    // Every launch ended (the test idled past gap_s): the layer holds no buffer and none is
    // left alive in the kernel.
    assert_eq!(s.scratch_held, 0, "{s:?}");
    assert_eq!(std::fs::read(&disk).unwrap(), want);
}
