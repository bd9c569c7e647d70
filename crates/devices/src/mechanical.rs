//! DiskSim-grade mechanical disk model (`model = "hdd-mechanical"`). Being built on the
//! `devices` branch.

use wattio_core::device::Timing;

pub fn timing_from_toml(t: &toml::Table) -> Result<Box<dyn Timing>, String> {
    let _ = t;
    Err("timing.model: `hdd-mechanical` is not available in this build yet".to_string())
}
