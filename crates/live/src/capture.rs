//! Capture: every request the guest issues, recorded as a trace so a live session can be
//! replayed in the simulator. The sink is a trait so the live crate does not depend on the
//! trace formats crate; the columnar writer plugs in behind it.

use wattio_core::Request;

/// Receives the host requests of a session in arrival order.
pub trait CaptureSink: Send {
    fn record(&mut self, r: &Request) -> Result<(), String>;
    /// Flush and close; called once when the session ends.
    fn finish(self: Box<Self>) -> Result<(), String>;
}

/// A capture kept in memory (tests, and short sessions handed to Python).
#[derive(Default)]
pub struct MemoryCapture {
    pub requests: std::sync::Arc<std::sync::Mutex<Vec<Request>>>,
}

impl CaptureSink for MemoryCapture {
    fn record(&mut self, r: &Request) -> Result<(), String> {
        self.requests
            .lock()
            .map_err(|_| "capture buffer poisoned".to_string())?
            .push(*r);
        Ok(())
    }

    fn finish(self: Box<Self>) -> Result<(), String> {
        Ok(())
    }
}

/// A plain-text capture, one request per line:
/// `arrival_ns op offset len dev stream` — readable without the formats crate.
pub struct TextCapture {
    path: std::path::PathBuf,
    out: std::io::BufWriter<std::fs::File>,
}

impl TextCapture {
    pub fn create(path: &std::path::Path) -> Result<TextCapture, String> {
        let f = std::fs::File::create(path)
            .map_err(|e| format!("{}: cannot create capture: {e}", path.display()))?;
        let mut out = std::io::BufWriter::new(f);
        use std::io::Write;
        writeln!(
            out,
            "# wattio live capture: arrival_ns op offset len dev stream"
        )
        .map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(TextCapture {
            path: path.to_path_buf(),
            out,
        })
    }
}

impl CaptureSink for TextCapture {
    fn record(&mut self, r: &Request) -> Result<(), String> {
        use std::io::Write;
        writeln!(
            self.out,
            "{} {} {} {} {} {}",
            r.arrival,
            r.op.as_str(),
            r.offset,
            r.len,
            r.dev,
            r.stream
        )
        .map_err(|e| format!("{}: {e}", self.path.display()))
    }

    fn finish(mut self: Box<Self>) -> Result<(), String> {
        use std::io::Write;
        self.out
            .flush()
            .and_then(|_| self.out.get_ref().sync_data())
            .map_err(|e| format!("{}: {e}", self.path.display()))
    }
}
