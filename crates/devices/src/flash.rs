//! A simple flash device (`model = "flash"`): CompactFlash cards, USB sticks and other
//! devices whose datasheets give only per-page latencies and interface bandwidth.
//!
//! T = overhead + pages · page latency (read or program) + len / interface bandwidth, where
//! pages = ⌈len / page_bytes⌉. Erase is folded into the program latency; a device with an FTL
//! worth modelling should use the `ssd` model.
//!
//! Timing parameters: `capacity_bytes`, `page_bytes`, `read_page_us`, `program_page_us`,
//! `read_mbps`, `write_mbps`, optional `overhead_us`.

use crate::params::{check_keys, count, f64_key, opt_f64, positive};
use wattio_core::device::{Service, Timing};
use wattio_core::io::{Io, Op};
use wattio_core::time::{secs_to_ns, Nanos};

#[derive(Clone, Debug)]
pub struct Flash {
    capacity: u64,
    page: u64,
    read_page: Nanos,
    program_page: Nanos,
    read_bps: f64,
    write_bps: f64,
    overhead: Nanos,
}

const KEYS: &[&str] = &[
    "capacity_bytes",
    "page_bytes",
    "read_page_us",
    "program_page_us",
    "read_mbps",
    "write_mbps",
    "overhead_us",
];

impl Flash {
    pub fn from_toml(t: &toml::Table) -> Result<Flash, String> {
        check_keys(t, KEYS)?;
        Ok(Flash {
            capacity: count(t, "capacity_bytes")?,
            page: count(t, "page_bytes")?,
            read_page: secs_to_ns(f64_key(t, "read_page_us")? / 1e6),
            program_page: secs_to_ns(f64_key(t, "program_page_us")? / 1e6),
            read_bps: positive(t, "read_mbps")? * 1e6,
            write_bps: positive(t, "write_mbps")? * 1e6,
            overhead: secs_to_ns(opt_f64(t, "overhead_us")?.unwrap_or(0.0) / 1e6),
        })
    }
}

pub fn timing_from_toml(t: &toml::Table) -> Result<Box<dyn Timing>, String> {
    Ok(Box::new(Flash::from_toml(t)?))
}

impl Timing for Flash {
    fn capacity(&self) -> u64 {
        self.capacity
    }

    fn service(&mut self, _start: Nanos, io: &Io) -> Service {
        let pages = (io.len as u64).div_ceil(self.page);
        let (per_page, bps) = match io.op {
            Op::Read => (self.read_page, self.read_bps),
            Op::Write => (self.program_page, self.write_bps),
            Op::Flush | Op::Discard => {
                return Service {
                    overhead_ns: self.overhead,
                    ..Service::default()
                }
            }
        };
        Service {
            transfer_ns: pages * per_page + secs_to_ns(io.len as f64 / bps),
            overhead_ns: self.overhead,
            ..Service::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wattio_core::io::Request;

    #[test]
    fn service_by_hand() {
        let t: toml::Table = toml::from_str(
            "capacity_bytes = 2_000_000_000\npage_bytes = 2048\nread_page_us = 25\nprogram_page_us = 200\nread_mbps = 20\nwrite_mbps = 10\noverhead_us = 100",
        )
        .unwrap();
        let mut f = Flash::from_toml(&t).unwrap();
        // 4096 B read: 2 pages × 25 µs + 4096 / 20e6 s (204.8 µs) + 100 µs
        let s = f.service(0, &Request::new(0, Op::Read, 0, 4096).io(0));
        assert_eq!(s.total(), 50_000 + 204_800 + 100_000);
        // 5000 B write: 3 pages × 200 µs + 500 µs + 100 µs
        let s = f.service(0, &Request::new(0, Op::Write, 0, 5000).io(0));
        assert_eq!(s.total(), 600_000 + 500_000 + 100_000);
    }
}
