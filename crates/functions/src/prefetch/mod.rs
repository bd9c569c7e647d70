//! Prefetchers: functions that read ahead of the host.
//!
//! * [`launch`] — application-launch prefetchers: IOLab's (learn a launch, detect it,
//!   pause it and fetch its blocks in sorted order; `kind = "iolab-prefetch"`) and FAST's
//!   two-phase SSD prefetcher (metadata first, the queue kept full, the launch not paused;
//!   `kind = "fast-prefetch"`).

pub mod launch;
