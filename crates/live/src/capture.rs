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

/// A capture in wattio's columnar trace format (Parquet), which `wattio run --trace` and the
/// other trace tools read directly: a live session replays in the simulator unchanged.
#[cfg(feature = "engine")]
pub struct ColumnarCapture {
    w: Option<wattio_formats::ColumnarWriter>,
}

#[cfg(feature = "engine")]
impl ColumnarCapture {
    pub fn create(path: &std::path::Path) -> Result<ColumnarCapture, String> {
        let prov = [(
            "wattio.trace.source".to_string(),
            "wattio live capture".to_string(),
        )];
        let w = wattio_formats::ColumnarWriter::create(path, &prov).map_err(|e| e.to_string())?;
        Ok(ColumnarCapture { w: Some(w) })
    }
}

#[cfg(feature = "engine")]
impl CaptureSink for ColumnarCapture {
    fn record(&mut self, r: &Request) -> Result<(), String> {
        match self.w.as_mut() {
            Some(w) => w.write(r).map_err(|e| e.to_string()),
            None => Err("capture already finished".into()),
        }
    }

    fn finish(mut self: Box<Self>) -> Result<(), String> {
        match self.w.take() {
            Some(w) => w.finish().map(|_| ()).map_err(|e| e.to_string()),
            None => Ok(()),
        }
    }
}

/// The capture sink for `path`: columnar for `.parquet` (builds with the `engine` feature,
/// which brings the Parquet stack), the text form otherwise.
pub fn capture_for(path: &std::path::Path) -> Result<Box<dyn CaptureSink>, String> {
    if path.extension().is_some_and(|e| e == "parquet") {
        #[cfg(feature = "engine")]
        return Ok(Box::new(ColumnarCapture::create(path)?));
        #[cfg(not(feature = "engine"))]
        return Err(format!(
            "{}: columnar capture needs wattio-live's `engine` feature",
            path.display()
        ));
    }
    Ok(Box::new(TextCapture::create(path)?))
}

#[cfg(all(test, feature = "engine"))]
mod columnar_tests {
    use super::*;
    use wattio_core::io::Op;
    use wattio_core::trace::TraceSource;

    #[test]
    fn columnar_capture_reads_back_as_a_trace() {
        let dir = std::env::temp_dir().join(format!("wattio-cap-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("cap.parquet");
        let mut sink = capture_for(&path).unwrap();
        let mut reqs = vec![
            Request::new(10, Op::Read, 0, 4096),
            Request::new(2_000, Op::Write, 8192, 512),
            Request::new(3_000_000_000, Op::Flush, 0, 0),
        ];
        reqs[1].dev = 1;
        reqs[1].stream = 7;
        for r in &reqs {
            sink.record(r).unwrap();
        }
        sink.finish().unwrap();
        let mut rd = wattio_formats::ColumnarReader::open(&path).unwrap();
        let mut back = Vec::new();
        while let Some(r) = rd.next_request().unwrap() {
            back.push(r);
        }
        assert_eq!(back, reqs);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
