//! SIGINT and SIGTERM while a capture runs: instead of dying with a mounted image, a loop
//! device and enabled trace events left behind, the process records the signal in a flag
//! that the capture loop polls; the loop then stops the command and the guards clean up.
//! The previous handlers (Python's, the default) come back when the guard drops.

use std::sync::atomic::{AtomicI32, Ordering};

static CAUGHT: AtomicI32 = AtomicI32::new(0);

extern "C" fn record(sig: libc::c_int) {
    // Only an atomic store: the one thing a signal handler may safely do here.
    CAUGHT.store(sig, Ordering::SeqCst);
}

const SIGNALS: [libc::c_int; 2] = [libc::SIGINT, libc::SIGTERM];

/// Installed handlers; restores the previous ones on drop.
pub struct InterruptGuard {
    previous: Vec<(libc::c_int, libc::sigaction)>,
}

impl InterruptGuard {
    pub fn install() -> InterruptGuard {
        CAUGHT.store(0, Ordering::SeqCst);
        let mut previous = Vec::new();
        for sig in SIGNALS {
            // SAFETY: a zeroed sigaction is a valid value; `record` is async-signal-safe;
            // the old action is written into `old` by the kernel.
            unsafe {
                let mut act: libc::sigaction = std::mem::zeroed();
                act.sa_sigaction = record as *const () as usize;
                libc::sigemptyset(&mut act.sa_mask);
                let mut old: libc::sigaction = std::mem::zeroed();
                if libc::sigaction(sig, &act, &mut old) == 0 {
                    previous.push((sig, old));
                }
            }
        }
        InterruptGuard { previous }
    }

    /// The signal caught since [`install`](Self::install), if any.
    pub fn caught(&self) -> Option<i32> {
        match CAUGHT.load(Ordering::SeqCst) {
            0 => None,
            s => Some(s),
        }
    }
}

impl Drop for InterruptGuard {
    fn drop(&mut self) {
        for (sig, old) in &self.previous {
            // SAFETY: restores an action the kernel handed back to us.
            unsafe {
                libc::sigaction(*sig, old, std::ptr::null_mut());
            }
        }
    }
}
