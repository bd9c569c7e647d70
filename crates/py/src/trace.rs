//! Bindings for the trace area: stats, convert, slice, and the list of formats. The heavy
//! lifting (parsing, statistics) runs with the GIL released.

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::path::Path;
use wattio_formats::{
    copy_trace, create_writer, open_trace, trace_stats as stats_of, writer, FormatError,
    ReadOptions, Slice, SliceOptions,
};

/// How to read a trace, in the CLI's vocabulary (`--lenient`, `--device`, `--action`,
/// `--columns`, `--delimiter`, `--header`, `--sort`): the `**read` keywords of every binding
/// that reads a trace, taken in one place.
#[derive(Default)]
pub(crate) struct ReadArgs {
    pub lenient: bool,
    pub device: Option<String>,
    pub action: Option<String>,
    /// The generic reader's `columns`, `delimiter`, `header`.
    pub csv: Csv,
    /// Records out of time order: read whole and sorted.
    pub sort: bool,
    /// …or reordered within a window of this many records.
    pub sort_window: Option<usize>,
}

impl ReadArgs {
    /// From a binding's `**read` keywords; any other keyword is a `TypeError` naming it.
    pub(crate) fn from_kwargs(kw: Option<&Bound<'_, PyDict>>) -> PyResult<ReadArgs> {
        let mut a = ReadArgs::default();
        for (k, v) in kw.into_iter().flatten() {
            let k: String = k.extract()?;
            match k.as_str() {
                "lenient" => a.lenient = v.extract::<Option<bool>>()?.unwrap_or(false),
                "device" => a.device = v.extract()?,
                "action" => a.action = v.extract()?,
                "columns" => a.csv.0 = v.extract()?,
                "delimiter" => a.csv.1 = v.extract()?,
                "header" => a.csv.2 = v.extract()?,
                "sort" => a.sort = v.extract::<Option<bool>>()?.unwrap_or(false),
                "sort_window" => a.sort_window = v.extract()?,
                _ => {
                    return Err(PyTypeError::new_err(format!(
                        "unexpected keyword argument '{k}' (a trace is read with lenient, \
                         device, action, columns, delimiter, header, sort, sort_window)"
                    )))
                }
            }
        }
        Ok(a)
    }

    pub(crate) fn options(self) -> PyResult<ReadOptions> {
        let blkparse_action = match self.action.as_deref() {
            None => None,
            Some(a) if a.chars().count() == 1 => a.chars().next(),
            Some(a) => {
                return Err(PyValueError::new_err(format!(
                    "blkparse action `{a}` must be one letter (Q, G, I, D, C, …)"
                )))
            }
        };
        Ok(ReadOptions {
            lenient: self.lenient,
            device: self.device,
            blkparse_action,
            keep_absolute_time: false,
            buffer_size: None,
            columns: self.csv.0,
            delimiter: self.csv.1,
            header: self.csv.2,
            sort: self.sort,
            sort_window: self.sort_window,
        })
    }
}

/// The `**read` keywords as [`ReadOptions`].
pub(crate) fn read_options(kw: Option<&Bound<'_, PyDict>>) -> PyResult<ReadOptions> {
    ReadArgs::from_kwargs(kw)?.options()
}

/// The generic reader's (`--columns`, `--delimiter`, `--header`).
pub(crate) type Csv = (Option<String>, Option<String>, Option<bool>);

fn err(e: impl std::fmt::Display) -> PyErr {
    PyValueError::new_err(e.to_string())
}

/// Statistics of a trace: JSON text (`text=False`) or the human-readable report.
#[pyfunction]
#[pyo3(signature = (path, format=None, text=false, **read))]
fn trace_stats(
    py: Python<'_>,
    path: &str,
    format: Option<String>,
    text: bool,
    read: Option<&Bound<'_, PyDict>>,
) -> PyResult<String> {
    let o = read_options(read)?;
    py.allow_threads(|| {
        let mut src = open_trace(Path::new(path), format.as_deref(), &o).map_err(err)?;
        let st = stats_of(src.as_mut()).map_err(err)?;
        if text {
            Ok(st.to_text())
        } else {
            serde_json::to_string(&st).map_err(err)
        }
    })
}

/// Converts a trace; returns (requests written, assumptions).
#[pyfunction]
#[pyo3(signature = (input, output, from_format=None, to_format=None, **read))]
fn trace_convert(
    py: Python<'_>,
    input: &str,
    output: &str,
    from_format: Option<String>,
    to_format: Option<String>,
    read: Option<&Bound<'_, PyDict>>,
) -> PyResult<(u64, Vec<String>)> {
    let o = read_options(read)?;
    py.allow_threads(|| {
        let rep = wattio_formats::convert(
            Path::new(input),
            Path::new(output),
            from_format.as_deref(),
            to_format.as_deref(),
            &o,
        )
        .map_err(err)?;
        Ok((rep.requests, rep.assumptions))
    })
}

/// Writes a time window / one device / a sped-up copy of a trace; returns (requests, assumptions).
#[pyfunction]
#[pyo3(signature = (input, output, from_format=None, to_format=None, start_s=None, end_s=None, dev=None, speedup=1.0, **read))]
#[allow(clippy::too_many_arguments)]
fn trace_slice(
    py: Python<'_>,
    input: &str,
    output: &str,
    from_format: Option<String>,
    to_format: Option<String>,
    start_s: Option<f64>,
    end_s: Option<f64>,
    dev: Option<u16>,
    speedup: f64,
    read: Option<&Bound<'_, PyDict>>,
) -> PyResult<(u64, Vec<String>)> {
    let o = read_options(read)?;
    let secs = |s: Option<f64>, what: &str| -> PyResult<Option<u64>> {
        match s {
            None => Ok(None),
            Some(x) if x.is_finite() && x >= 0.0 => Ok(Some((x * 1e9).round() as u64)),
            Some(x) => Err(PyValueError::new_err(format!(
                "{what} {x} s must be a non-negative number"
            ))),
        }
    };
    let so = SliceOptions {
        start: secs(start_s, "window start")?,
        end: secs(end_s, "window end")?,
        dev,
        speedup,
    };
    py.allow_threads(|| {
        let out_fmt =
            writer::writer_format(Path::new(output), to_format.as_deref()).map_err(err)?;
        let src = open_trace(Path::new(input), from_format.as_deref(), &o).map_err(err)?;
        let mut sl = Slice::new(src, so).map_err(PyValueError::new_err)?;
        let w = create_writer(Path::new(output), Some(out_fmt), &[]).map_err(err)?;
        let r: Result<(u64, Vec<String>), FormatError> = copy_trace(&mut sl, w, input);
        let r = r.map_err(err)?;
        if let Some(why) = sl.nothing_kept() {
            // No empty trace left behind to be mistaken for a slice.
            let _ = std::fs::remove_file(output);
            return Err(PyValueError::new_err(format!("{input}: {why}")));
        }
        Ok(r)
    })
}

/// Names of the formats that can be read and written.
#[pyfunction]
fn trace_formats() -> (Vec<&'static str>, Vec<&'static str>) {
    (
        wattio_formats::READ_FORMATS.to_vec(),
        wattio_formats::writer::WRITE_FORMATS.to_vec(),
    )
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(trace_stats, m)?)?;
    m.add_function(wrap_pyfunction!(trace_convert, m)?)?;
    m.add_function(wrap_pyfunction!(trace_slice, m)?)?;
    m.add_function(wrap_pyfunction!(trace_formats, m)?)?;
    Ok(())
}

/// An opener over a trace file, for runs (`wattio run --trace FILE [--format F]`): each call
/// reopens the file, so the oracle's lookahead readers stream it independently.
pub fn file_opener(
    path: std::path::PathBuf,
    format: Option<String>,
    read: ReadOptions,
) -> PyResult<wattio_engine::Opener> {
    // Fail now, with the reader's message, rather than at the first lookahead.
    open_trace(&path, format.as_deref(), &read).map_err(err)?;
    Ok(std::sync::Arc::new(move || {
        open_trace(&path, format.as_deref(), &read).map_err(|e| e.to_string())
    }))
}
