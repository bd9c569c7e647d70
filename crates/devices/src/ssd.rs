//! SSD model (`model = "ssd"`). Being built on the `ssd` branch.

use wattio_core::device::Timing;

pub fn timing_from_toml(t: &toml::Table) -> Result<Box<dyn Timing>, String> {
    let _ = t;
    Err("timing.model: `ssd` is not available in this build yet".to_string())
}
