//! Trace writers behind one interface, chosen by name or by the output file's extension.

#[cfg(feature = "columnar")]
use crate::columnar::ColumnarWriter;
use crate::disksim::DisksimAsciiWriter;
use crate::error::FormatError;
use crate::fio::FioWriter;
use std::path::Path;
use wattio_core::Request;

/// Formats a trace can be written in.
pub const WRITE_FORMATS: &[&str] = &["columnar", "disksim", "fio"];

pub trait TraceWriter {
    fn write(&mut self, r: &Request) -> Result<(), FormatError>;
    /// Flushes and closes; returns the number of requests written.
    fn finish(self: Box<Self>) -> Result<u64, FormatError>;
    /// Records provenance where the format has room for it (the columnar file does).
    fn annotate(&mut self, _key: &str, _value: &str) {}
}

/// The writer format for `path`: the explicit `format`, else the extension (`.parquet`,
/// `.wattio` → columnar; `.iolog`, `.fio` → fio v3; `.disksim`, `.ascii` → DiskSim ascii).
pub fn writer_format(path: &Path, format: Option<&str>) -> Result<&'static str, FormatError> {
    let name = path.display().to_string();
    let f =
        match format {
            Some(f) => f.to_ascii_lowercase(),
            None => {
                let ext = path
                    .extension()
                    .and_then(|e| e.to_str())
                    .unwrap_or("")
                    .to_ascii_lowercase();
                match ext.as_str() {
                    "parquet" | "wattio" | "columnar" => "columnar".into(),
                    "iolog" | "fio" => "fio".into(),
                    "disksim" | "ascii" => "disksim".into(),
                    _ => return Err(FormatError::file(
                        name,
                        format!("cannot tell the output format from the extension `.{ext}`"),
                    )
                    .with_expected(
                        "--to columnar|disksim|fio, or an extension .parquet, .disksim or .iolog",
                    )),
                }
            }
        };
    Ok(match f.as_str() {
        "columnar" | "parquet" | "wattio" => "columnar",
        "disksim" | "disksim-ascii" | "ascii" => "disksim",
        "fio" | "fio-v3" | "fio3" | "iolog" => "fio",
        other => {
            return Err(
                FormatError::file(name, format!("cannot write format `{other}`"))
                    .with_expected(format!("one of {}", WRITE_FORMATS.join(", "))),
            )
        }
    })
}

pub fn create_writer(
    path: &Path,
    format: Option<&str>,
    provenance: &[(String, String)],
) -> Result<Box<dyn TraceWriter>, FormatError> {
    Ok(match writer_format(path, format)? {
        #[cfg(feature = "columnar")]
        "columnar" => Box::new(ColumnarWriter::create(path, provenance)?),
        #[cfg(not(feature = "columnar"))]
        "columnar" => {
            let _ = provenance;
            return Err(FormatError::file(
                path.display().to_string(),
                "built without the columnar feature",
            ));
        }
        "disksim" => Box::new(DisksimAsciiWriter::create(path)?),
        _ => Box::new(FioWriter::create(path, Vec::new())?),
    })
}
