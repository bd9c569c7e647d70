//! Running configs from Python, and intelligence functions written in Python.
//!
//! A Python function is any object with the methods of `wattio.Function`; [`PyFunction`]
//! adapts it to the Rust [`Function`] trait, so it runs in the same stacks, under the same
//! executors, as the built-in functions.

use pyo3::exceptions::{PyKeyError, PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use wattio_core::device::DeviceInfo;
use wattio_core::function::{Action, Actions, Function, TimerId};
use wattio_core::io::{Breakdown, Buf, Completion, Io, IoId, Op, Status};
use wattio_core::power::PowerStateId;
use wattio_core::time::Nanos;
use wattio_engine::Registry;
use wattio_engine::{Input, Opener, RunConfig, RunOptions};
use wattio_functions::external::python::PythonConfig;
use wattio_functions::registry::BuildContext;

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyIo>()?;
    m.add_class::<PyCompletion>()?;
    m.add_class::<PyActions>()?;
    m.add_class::<PyDevice>()?;
    m.add_function(wrap_pyfunction!(run_config, m)?)?;
    m.add_function(wrap_pyfunction!(check_config, m)?)?;
    m.add_function(wrap_pyfunction!(check_run, m)?)?;
    m.add_function(wrap_pyfunction!(catalogue, m)?)?;
    m.add_function(wrap_pyfunction!(functions, m)?)?;
    Ok(())
}

fn op_name(op: Op) -> &'static str {
    op.as_str()
}

fn parse_op(s: &str) -> PyResult<Op> {
    Ok(match s {
        "read" => Op::Read,
        "write" => Op::Write,
        "flush" => Op::Flush,
        "discard" => Op::Discard,
        _ => {
            return Err(PyValueError::new_err(format!(
                "op: expected read, write, flush or discard, got {s:?}"
            )))
        }
    })
}

/// A Python function's scratch buffer `k` as a Python-made `Io` names it, before the layer is
/// known: the top bit, which no scratch id of any layer uses.
const LOCAL: u64 = 1 << 63;
/// Python layers' scratch ids: `2^61 | layer << 40 | k` (scratch ids are global to the stack;
/// FS2, PARAID, RAID and EXCES keep below 2^61: `crate::placement::fs2::copy_base`).
const PY_SCRATCH: u64 = 1 << 61;
/// Scratch buffer numbers a Python function may use: below 2^40.
const SCRATCH_NUMBERS: u64 = 1 << 40;

/// The scratch ids of the Python function at stack position `layer`.
fn scratch_base(layer: usize) -> u64 {
    PY_SCRATCH | ((layer as u64 & 0xF_FFFF) << 40)
}

fn scratch_number(k: u64, what: &str) -> PyResult<u64> {
    if k >= SCRATCH_NUMBERS {
        return Err(PyValueError::new_err(format!(
            "{what}: expected a scratch buffer number below 2**40, got {k}"
        )));
    }
    Ok(k)
}

/// The buffer a Python function's scratch number names, once its layer is known.
fn resolve(buf: Buf, base: u64) -> Buf {
    match buf {
        Buf::Scratch { id, offset } if id & LOCAL != 0 => Buf::Scratch {
            id: base | (id & (SCRATCH_NUMBERS - 1)),
            offset,
        },
        b => b,
    }
}

fn parse_status(s: &str) -> PyResult<Status> {
    Status::from_name(s).ok_or_else(|| {
        PyValueError::new_err(format!(
            "status: expected {}, got {s:?}",
            Status::NAMES.join(", ")
        ))
    })
}

/// An I/O in flight (immutable; `replace` makes a modified copy). `Io(n, op, offset, length,
/// dev=…, own=True)` is an I/O a function originates itself (a cache fill, a write-back, a
/// prefetch): its completion comes back to that function's `on_completion`, never to the host.
/// With `scratch=k` its bytes are the function's scratch buffer `k` (a read fills it, a write
/// sends it; the write that drains it frees it). Without `own` the id is taken as a host
/// request's (for driving a function by hand in a unit test).
#[pyclass(name = "Io", module = "wattio._core", frozen)]
#[derive(Clone)]
pub struct PyIo {
    pub inner: Io,
}

#[pymethods]
impl PyIo {
    #[new]
    #[pyo3(signature = (id, op, offset, length, dev=0, stream=0, priority=0, fua=false, own=false, scratch=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        id: u64,
        op: &str,
        offset: u64,
        length: u32,
        dev: u16,
        stream: u32,
        priority: i8,
        fua: bool,
        own: bool,
        scratch: Option<u64>,
    ) -> PyResult<Self> {
        // The top bits of an id are the kernel's flags (own I/O, sub-I/O of a fan-out): a
        // number reaching them would pass for another kind of I/O and its completion could
        // reach the wrong layer or request.
        if id >= 1 << 62 {
            return Err(PyValueError::new_err(format!(
                "id: expected a number below 2**62 (the higher bits mark own and split I/O), got {id}"
            )));
        }
        let mut io = Io::own(id, parse_op(op)?, dev, offset, length);
        // Without `scratch` no bytes: the I/O names no buffer (not the scratch buffer
        // `Io::own` names, which another layer's scratch id could share), and the live server
        // refuses such a read or write before the device serves it. With it, buffer `k`
        // marked as this function's: `Actions.submit` puts it in the layer's range.
        io.buf = match scratch {
            None => Buf::None,
            Some(k) => {
                let k = scratch_number(k, "scratch")?;
                if !own {
                    return Err(PyValueError::new_err(
                        "scratch: only an I/O the function originates (own=True) moves its scratch buffers",
                    ));
                }
                if !io.op.moves_data() {
                    return Err(PyValueError::new_err(format!(
                        "scratch: a {op} moves no bytes (only a read or a write has a buffer)"
                    )));
                }
                Buf::Scratch {
                    id: LOCAL | k,
                    offset: 0,
                }
            }
        };
        if !own {
            io.id = IoId(id);
        }
        io.stream = stream;
        io.priority = priority;
        io.fua = fua;
        Ok(PyIo { inner: io })
    }
    #[getter]
    fn id(&self) -> u64 {
        self.inner.id.0
    }
    #[getter]
    fn op(&self) -> &'static str {
        op_name(self.inner.op)
    }
    #[getter]
    fn offset(&self) -> u64 {
        self.inner.offset
    }
    #[getter]
    fn length(&self) -> u32 {
        self.inner.len
    }
    #[getter]
    fn dev(&self) -> u16 {
        self.inner.dev
    }
    #[getter]
    fn stream(&self) -> u32 {
        self.inner.stream
    }
    #[getter]
    fn priority(&self) -> i8 {
        self.inner.priority
    }
    #[getter]
    fn fua(&self) -> bool {
        self.inner.fua
    }
    #[getter]
    fn file(&self) -> Option<u64> {
        self.inner.file
    }
    #[getter]
    fn call_site(&self) -> Option<u64> {
        self.inner.call_site
    }
    /// The function's scratch buffer number this I/O reads into or writes from, if any.
    #[getter]
    fn scratch(&self) -> Option<u64> {
        match self.inner.buf {
            // Before submit (marked local) or after (in a Python layer's range).
            Buf::Scratch { id, .. } if id & LOCAL != 0 || (PY_SCRATCH..1 << 62).contains(&id) => {
                Some(id & (SCRATCH_NUMBERS - 1))
            }
            _ => None,
        }
    }
    /// A copy with some fields changed: `io.replace(dev=1, offset=4096)`.
    #[pyo3(signature = (*, dev=None, offset=None, length=None, priority=None, op=None))]
    fn replace(
        &self,
        dev: Option<u16>,
        offset: Option<u64>,
        length: Option<u32>,
        priority: Option<i8>,
        op: Option<&str>,
    ) -> PyResult<PyIo> {
        let mut io = self.inner;
        if let Some(d) = dev {
            io.dev = d;
        }
        if let Some(o) = offset {
            io.offset = o;
        }
        if let Some(l) = length {
            io.len = l;
        }
        if let Some(p) = priority {
            io.priority = p;
        }
        if let Some(o) = op {
            io.op = parse_op(o)?;
        }
        Ok(PyIo { inner: io })
    }
    fn __repr__(&self) -> String {
        let scratch = self
            .scratch()
            .map(|k| format!(", scratch={k}"))
            .unwrap_or_default();
        format!(
            "Io(id={}, op={}, offset={}, length={}, dev={}{scratch})",
            self.inner.id.0,
            op_name(self.inner.op),
            self.inner.offset,
            self.inner.len,
            self.inner.dev
        )
    }
}

/// A finished I/O. `Completion(io, status="ok", finished=…)` builds one, to drive a
/// function's `on_completion` by hand in a unit test.
#[pyclass(name = "Completion", module = "wattio._core", frozen)]
#[derive(Clone)]
pub struct PyCompletion {
    pub inner: Completion,
}

#[pymethods]
impl PyCompletion {
    #[new]
    #[pyo3(signature = (io, status="ok", finished=0, queue_ns=0, power_wait_ns=0, service_ns=0))]
    fn new(
        io: &PyIo,
        status: &str,
        finished: Nanos,
        queue_ns: Nanos,
        power_wait_ns: Nanos,
        service_ns: Nanos,
    ) -> PyResult<Self> {
        let status = parse_status(status)?;
        Ok(PyCompletion {
            inner: Completion {
                io: io.inner,
                status,
                finished,
                breakdown: Breakdown {
                    queue_ns,
                    power_wait_ns,
                    service_ns,
                },
            },
        })
    }
    #[getter]
    fn io(&self) -> PyIo {
        PyIo {
            inner: self.inner.io,
        }
    }
    #[getter]
    fn ok(&self) -> bool {
        self.inner.status == Status::Ok
    }
    #[getter]
    fn status(&self) -> &'static str {
        self.inner.status.as_str()
    }
    #[getter]
    fn finished(&self) -> Nanos {
        self.inner.finished
    }
    #[getter]
    fn queue_ns(&self) -> Nanos {
        self.inner.breakdown.queue_ns
    }
    #[getter]
    fn power_wait_ns(&self) -> Nanos {
        self.inner.breakdown.power_wait_ns
    }
    #[getter]
    fn service_ns(&self) -> Nanos {
        self.inner.breakdown.service_ns
    }
    /// The completion of `io` (an I/O this layer received) with this one's timing: what a
    /// layer replies upward once the work it forwarded is done.
    fn for_io(&self, io: &PyIo) -> PyCompletion {
        PyCompletion {
            inner: Completion {
                io: io.inner,
                ..self.inner
            },
        }
    }
}

/// Where a Python function puts its actions.
#[pyclass(name = "Actions", module = "wattio._core")]
#[derive(Default)]
pub struct PyActions {
    list: Vec<PyAct>,
    /// The scratch ids of the function being called ([`scratch_base`]).
    base: u64,
}

/// An action as a Python function gives it: the bytes of a fill and a failure's message
/// travel with it until the call returns, then go into the layer's `Actions` arena.
enum PyAct {
    Act(Action),
    Fill(Buf, Vec<u8>),
    Fail(String),
}

/// One end of a copy: an I/O's buffer, or the function's scratch buffer `k`.
#[derive(FromPyObject)]
enum End {
    Io(PyIo),
    Scratch(u64),
}

impl PyActions {
    /// The function's scratch buffer `k` (checked; `what` names the argument), at `offset`.
    fn scratch(&self, k: u64, offset: u32, what: &str) -> PyResult<Buf> {
        Ok(Buf::Scratch {
            id: self.base | scratch_number(k, what)?,
            offset,
        })
    }

    fn end(&self, e: &End, offset: u32, what: &str) -> PyResult<(Buf, Option<u32>)> {
        Ok(match e {
            End::Io(io) => {
                if io.inner.buf == Buf::None {
                    return Err(PyValueError::new_err(format!(
                        "{what}: {} names no buffer (a flush, a discard, or an own I/O without scratch=)",
                        io.__repr__()
                    )));
                }
                if offset >= io.inner.len && io.inner.len > 0 {
                    return Err(PyValueError::new_err(format!(
                        "{what}_offset: {offset} is past the {} bytes of {}",
                        io.inner.len,
                        io.__repr__()
                    )));
                }
                let buf = resolve(io.inner.buf, self.base).at(offset);
                (buf, Some(io.inner.len - offset.min(io.inner.len)))
            }
            End::Scratch(k) => (self.scratch(*k, offset, what)?, None),
        })
    }
}

#[pymethods]
impl PyActions {
    /// Send `io` to the layer below (or to device `io.dev` from the bottom layer).
    fn submit(&mut self, io: &PyIo) {
        let mut io = io.inner;
        io.buf = resolve(io.buf, self.base);
        self.list.push(PyAct::Act(Action::Submit(io)));
    }
    /// Copy bytes: `dst = src` over `length` bytes. Each end is an `Io` (its buffer: a host
    /// read's to answer it from bytes the function holds, a host write's to keep its bytes)
    /// or an int, the function's scratch buffer of that number (created by the copy if new).
    /// Between two `Io`s `length` defaults to what both have after their offsets; with a
    /// scratch end it is required.
    #[pyo3(signature = (dst, src, length=None, dst_offset=0, src_offset=0))]
    fn copy(
        &mut self,
        dst: End,
        src: End,
        length: Option<u32>,
        dst_offset: u32,
        src_offset: u32,
    ) -> PyResult<()> {
        let (d, dl) = self.end(&dst, dst_offset, "dst")?;
        let (s, sl) = self.end(&src, src_offset, "src")?;
        let room = match (dl, sl) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        // Only between two I/Os' buffers does `length` default: a scratch buffer's size is the
        // function's to know (a default from the other end once copied a 4 KiB buffer into
        // 8 KiB of a read, which live refused and the simulator let pass).
        let len = match (length, room) {
            (Some(l), Some(r)) if l > r => {
                return Err(PyValueError::new_err(format!(
                    "length: {l} bytes do not fit: an I/O end has {r} bytes after its offset"
                )))
            }
            (Some(l), _) => l,
            (None, Some(r)) if dl.is_some() && sl.is_some() => r,
            (None, _) => {
                return Err(PyValueError::new_err(
                    "length: required when an end is a scratch buffer",
                ))
            }
        };
        self.list.push(PyAct::Act(Action::Copy {
            dst: d,
            src: s,
            len,
        }));
        Ok(())
    }
    /// Put `data` (bytes the function made: its metadata) at the start of scratch buffer `k`,
    /// to be written to a device by an own write with `scratch=k`. The simulator keeps such
    /// bytes only for I/O to a region the function reserved (`regions()`), live writes them.
    fn fill(&mut self, k: u64, data: Vec<u8>) -> PyResult<()> {
        let dst = self.scratch(k, 0, "fill")?;
        if u32::try_from(data.len()).is_err() {
            return Err(PyValueError::new_err(format!(
                "data: {} bytes, more than a scratch buffer holds (4 GiB)",
                data.len()
            )));
        }
        self.list.push(PyAct::Fill(dst, data));
        Ok(())
    }
    /// Ask for the first `length` bytes of scratch buffer `k` (a read of the function's
    /// metadata that is back): they come to `on_bytes(now, tag, data, out)` once this call
    /// has returned, and the buffer is freed.
    fn take(&mut self, k: u64, length: u32, tag: u64) -> PyResult<()> {
        let src = self.scratch(k, 0, "take")?;
        self.list.push(PyAct::Act(Action::Take {
            src,
            len: length,
            tag,
        }));
        Ok(())
    }
    /// The function cannot go on (its metadata is not what it wrote, …): the simulated run
    /// stops with `message`; a live session keeps it as its first fault.
    fn fail(&mut self, message: String) {
        self.list.push(PyAct::Fail(message));
    }
    /// Free scratch buffer `k` without writing it out (a fill given up after its read):
    /// at once, or when the I/O out on it is back.
    fn release(&mut self, k: u64) -> PyResult<()> {
        let buf = self.scratch(k, 0, "release")?;
        self.list.push(PyAct::Act(Action::Release { buf }));
        Ok(())
    }
    /// Complete an I/O received from above.
    fn reply(&mut self, done: &PyCompletion) {
        self.list.push(PyAct::Act(Action::Reply(done.inner)));
    }
    /// Reply to `io` with no device work (e.g. a cache hit in memory).
    fn reply_now(&mut self, io: &PyIo) {
        self.list.push(PyAct::Act(Action::Reply(Completion {
            io: io.inner,
            status: Status::Ok,
            finished: 0,
            breakdown: Breakdown::default(),
        })));
    }
    fn set_power(&mut self, device: u16, state: PowerStateId) {
        self.list
            .push(PyAct::Act(Action::SetPower { device, state }));
    }
    fn set_timer(&mut self, timer: TimerId, at: Nanos) {
        self.list.push(PyAct::Act(Action::SetTimer { timer, at }));
    }
    fn cancel_timer(&mut self, timer: TimerId) {
        self.list.push(PyAct::Act(Action::CancelTimer { timer }));
    }
}

/// A device as a function sees it at attach.
#[pyclass(name = "Device", module = "wattio._core", frozen)]
pub struct PyDevice {
    info: DeviceInfo,
}

#[pymethods]
impl PyDevice {
    #[getter]
    fn id(&self) -> u16 {
        self.info.id
    }
    #[getter]
    fn name(&self) -> String {
        self.info.name.clone()
    }
    #[getter]
    fn capacity(&self) -> u64 {
        self.info.capacity
    }
    /// Power state names, indexed by state id.
    #[getter]
    fn states(&self) -> Vec<String> {
        self.info
            .power
            .states
            .iter()
            .map(|s| s.name.clone())
            .collect()
    }
    #[getter]
    fn idle_state(&self) -> PowerStateId {
        self.info.power.idle
    }
    fn state_id(&self, name: &str) -> PyResult<PowerStateId> {
        self.info.power.state_id(name).ok_or_else(|| {
            PyKeyError::new_err(format!(
                "device `{}` has no power state `{name}`",
                self.info.name
            ))
        })
    }
    /// The deepest sleep state's id, or None.
    #[getter]
    fn deepest_sleep(&self) -> Option<PowerStateId> {
        self.info.power.deepest_sleep()
    }
    /// Break-even time (ns) of sleeping in `state` (default: the deepest sleep state).
    #[pyo3(signature = (state=None))]
    fn break_even_ns(&self, state: Option<PowerStateId>) -> Option<Nanos> {
        let s = state.or(self.info.power.deepest_sleep())?;
        self.info.power.break_even(s)
    }
    /// Latency (ns) of the transition from `from_state` to `to_state`, if there is one.
    fn transition_ns(&self, from_state: PowerStateId, to_state: PowerStateId) -> Option<Nanos> {
        let t = self.info.power.transition(from_state, to_state)?;
        Some(self.info.power.transitions[t].latency)
    }
}

/// Adapts a Python object to [`Function`]. The first exception it raises stops its further
/// calls and is re-raised when the run returns.
struct PyFunction {
    obj: Py<PyAny>,
    name: String,
    /// `function[i] (class)`: where the config put it, for its errors.
    label: String,
    acts: Py<PyActions>,
    error: Arc<Mutex<Option<PyErr>>>,
    /// Its scratch ids ([`scratch_base`] of its stack position).
    base: u64,
}

impl PyFunction {
    /// Call `method(*args, out)` (without `out` when `with_actions` is false) under one
    /// acquisition of the GIL, and move the actions it produced into `out`; `now` dates an
    /// exception it raises.
    fn call(
        &self,
        method: &str,
        now: Option<Nanos>,
        args: impl for<'py> FnOnce(Python<'py>) -> PyResult<Vec<Bound<'py, PyAny>>>,
        with_actions: bool,
        out: &mut Actions,
    ) {
        Python::with_gil(|py| {
            if self.error.lock().map(|e| e.is_some()).unwrap_or(true) {
                return;
            }
            let r = (|| -> PyResult<()> {
                let obj = self.obj.bind(py);
                if !obj.hasattr(method)? {
                    return Ok(());
                }
                let mut args = args(py)?;
                if with_actions {
                    self.acts.bind(py).borrow_mut().base = self.base;
                    args.push(self.acts.bind(py).clone().into_any());
                }
                obj.call_method1(method, pyo3::types::PyTuple::new(py, args)?)?;
                let mut acts = self.acts.bind(py).borrow_mut();
                for a in acts.list.drain(..) {
                    match a {
                        PyAct::Act(a) => out.push(a),
                        PyAct::Fill(dst, bytes) => out.fill(dst, &bytes),
                        PyAct::Fail(msg) => out.fail(&msg),
                    }
                }
                Ok(())
            })();
            if let Err(e) = r {
                self.acts.bind(py).borrow_mut().list.clear();
                self.keep(py, e, method, now);
            }
        })
    }

    /// Keep `e`, raised by `method`, as the function's error (the first one is re-raised
    /// when the run returns); returns its message.
    fn keep(&self, py: Python<'_>, e: PyErr, method: &str, now: Option<Nanos>) -> String {
        let e = located(py, e, &self.label, method, now);
        let msg = e.to_string();
        if let Ok(mut slot) = self.error.lock() {
            slot.get_or_insert(e);
        }
        msg
    }

    /// What its optional query `method()` returns, read by `read`; `default` when it does
    /// not define one, or when the call or the read fails (then the function's error).
    fn query<T>(
        &self,
        method: &str,
        default: T,
        read: impl for<'py> FnOnce(Bound<'py, PyAny>) -> PyResult<T>,
    ) -> T {
        Python::with_gil(|py| {
            let obj = self.obj.bind(py);
            if !obj.hasattr(method).unwrap_or(false) {
                return default;
            }
            match obj.call_method0(method).and_then(read) {
                Ok(v) => v,
                Err(e) => {
                    self.keep(py, e, method, None);
                    default
                }
            }
        })
    }
}

/// The exception a user's function raised, marked with which function and method, where
/// (file and line of the innermost frame) and when (simulated time): the exception itself
/// propagates from `wattio.run` unchanged, with that sentence in its `wattio_context`
/// attribute (which the CLI prints as a user error, exit code 2) and, where Python has
/// them (3.11+), in its notes.
fn located(py: Python<'_>, e: PyErr, label: &str, method: &str, now: Option<Nanos>) -> PyErr {
    let mut place = String::new();
    if let Some(tb) = e.traceback(py) {
        let mut tb = tb.into_any();
        while let Ok(next) = tb.getattr("tb_next") {
            if next.is_none() {
                break;
            }
            tb = next;
        }
        let file = tb
            .getattr("tb_frame")
            .and_then(|f| f.getattr("f_code"))
            .and_then(|c| c.getattr("co_filename"))
            .and_then(|f| f.extract::<String>());
        let line = tb.getattr("tb_lineno").and_then(|l| l.extract::<u64>());
        if let (Ok(file), Ok(line)) = (file, line) {
            place = format!(" at {file}:{line}");
        }
    }
    let when = match now {
        Some(t) => format!(", simulated time {:.6} s", t as f64 / 1e9),
        None => String::new(),
    };
    let value = e.value(py);
    let what = value
        .get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "exception".into());
    let msg = format!("{label}: {method} raised {what}: {value}{place}{when}");
    // Best effort: an exception type that refuses attributes still propagates as it is.
    let _ = value.setattr("wattio_context", &msg);
    if value.hasattr("add_note").unwrap_or(false) {
        let _ = value.call_method1("add_note", (format!("wattio: {msg}"),));
    }
    e
}

impl Function for PyFunction {
    fn name(&self) -> &str {
        &self.name
    }

    fn attach(&mut self, devices: &[DeviceInfo]) -> Result<(), String> {
        Python::with_gil(|py| {
            let list = PyList::empty(py);
            for d in devices {
                list.append(Py::new(py, PyDevice { info: d.clone() }).map_err(|e| e.to_string())?)
                    .map_err(|e| e.to_string())?;
            }
            let obj = self.obj.bind(py);
            if obj.hasattr("attach").unwrap_or(false) {
                obj.call_method1("attach", (list,))
                    .map_err(|e| self.keep(py, e, "attach", None))?;
            }
            Ok(())
        })
    }

    fn on_start(&mut self, now: Nanos, out: &mut Actions) {
        self.call(
            "on_start",
            Some(now),
            |py| Ok(vec![now.into_pyobject(py)?.into_any()]),
            true,
            out,
        )
    }

    fn on_stop(&mut self, now: Nanos, out: &mut Actions) {
        self.call(
            "on_stop",
            Some(now),
            |py| Ok(vec![now.into_pyobject(py)?.into_any()]),
            true,
            out,
        )
    }

    fn on_request(&mut self, now: Nanos, io: Io, out: &mut Actions) {
        self.call(
            "on_request",
            Some(now),
            |py| {
                Ok(vec![
                    now.into_pyobject(py)?.into_any(),
                    Bound::new(py, PyIo { inner: io })?.into_any(),
                ])
            },
            true,
            out,
        )
    }

    fn on_completion(&mut self, now: Nanos, done: Completion, out: &mut Actions) {
        self.call(
            "on_completion",
            Some(now),
            |py| {
                Ok(vec![
                    now.into_pyobject(py)?.into_any(),
                    Bound::new(py, PyCompletion { inner: done })?.into_any(),
                ])
            },
            true,
            out,
        )
    }

    fn on_timer(&mut self, now: Nanos, timer: TimerId, out: &mut Actions) {
        self.call(
            "on_timer",
            Some(now),
            |py| {
                Ok(vec![
                    now.into_pyobject(py)?.into_any(),
                    timer.into_pyobject(py)?.into_any(),
                ])
            },
            true,
            out,
        )
    }

    fn on_power(&mut self, now: Nanos, device: u16, state: PowerStateId) {
        self.call(
            "on_power",
            Some(now),
            |py| {
                Ok(vec![
                    now.into_pyobject(py)?.into_any(),
                    device.into_pyobject(py)?.into_any(),
                    state.into_pyobject(py)?.into_any(),
                ])
            },
            false,
            &mut Actions::new(),
        )
    }

    fn on_transition(&mut self, now: Nanos, device: u16, to: PowerStateId) {
        self.call(
            "on_transition",
            Some(now),
            |py| {
                Ok(vec![
                    now.into_pyobject(py)?.into_any(),
                    device.into_pyobject(py)?.into_any(),
                    to.into_pyobject(py)?.into_any(),
                ])
            },
            false,
            &mut Actions::new(),
        )
    }

    fn on_bytes(&mut self, now: Nanos, tag: u64, bytes: &[u8], out: &mut Actions) {
        self.call(
            "on_bytes",
            Some(now),
            |py| {
                Ok(vec![
                    now.into_pyobject(py)?.into_any(),
                    tag.into_pyobject(py)?.into_any(),
                    pyo3::types::PyBytes::new(py, bytes).into_any(),
                ])
            },
            true,
            out,
        )
    }

    /// `regions()` as a list of `(device, offset, length)`; what it raises, or a value that
    /// is not such a list, stops the run like any exception of the function's.
    fn regions(&self) -> Vec<wattio_core::Region> {
        self.query("regions", Vec::new(), |v| {
            let r = v.extract::<Vec<(u16, u64, u64)>>().map_err(|_| {
                PyValueError::new_err(
                    "regions(): expected a list of (device id, offset, length) tuples of ints",
                )
            })?;
            Ok(r.into_iter()
                .map(|(dev, offset, len)| wattio_core::Region { dev, offset, len })
                .collect())
        })
    }

    fn unload_left(&self) -> Option<String> {
        Python::with_gil(|py| {
            let obj = self.obj.bind(py);
            if !obj.hasattr("unload_left").unwrap_or(false) {
                return None;
            }
            match obj
                .call_method0("unload_left")
                .and_then(|v| v.extract::<Option<String>>())
            {
                Ok(left) => left,
                Err(e) => Some(format!("unload_left() failed: {e}")),
            }
        })
    }

    /// Its `scratch_buffers()`, if it defines one: how many scratch buffers it keeps on
    /// purpose (the leak rule of a checked run counts them as held, not leaked). An
    /// exception, or a value that is not an int ≥ 0, is the function's error.
    fn scratch_buffers(&self) -> usize {
        self.query("scratch_buffers", 0, |v| v.extract::<usize>())
    }

    /// Its `counters()`, if it defines one: a dict of name → number, or a list of (name,
    /// number) pairs. An exception, or a value of another shape, is the function's error
    /// (the run raises it), never counters silently missing from the summary.
    fn counters(&self) -> Vec<(String, f64)> {
        self.query("counters", Vec::new(), |c| {
            if let Ok(d) = c.downcast::<PyDict>() {
                return d
                    .iter()
                    .map(|(k, v)| Ok((k.extract()?, v.extract()?)))
                    .collect::<PyResult<_>>()
                    .map_err(|e| {
                        PyTypeError::new_err(format!("expected a dict of str to a number: {e}"))
                    });
            }
            c.extract::<Vec<(String, f64)>>().map_err(|_| {
                PyTypeError::new_err(format!(
                    "expected a dict of str to a number or a list of (str, number), got {}",
                    c.get_type()
                        .name()
                        .map(|n| n.to_string())
                        .unwrap_or_else(|_| "?".into())
                ))
            })
        })
    }
}

/// How to read a `--trace` file (the CLI's vocabulary); with the config's `[trace]`
/// instead, its keys apply and these override them where given.
#[derive(Default)]
struct TraceArgs {
    path: Option<String>,
    format: Option<String>,
    read: crate::trace::ReadArgs,
}

/// The opener for a config — a trace file (`--trace` or `[trace]`) or its workload — and
/// what kind of input that is.
fn opener_for(cfg: &RunConfig, base: &Path, a: TraceArgs) -> PyResult<(Opener, Input)> {
    let from_cli = a.path.is_some();
    let (path, format, read) = match (a.path, &cfg.trace) {
        (Some(p), _) => (p, a.format, a.read.options()?),
        (None, Some(t)) => {
            let r = a.read;
            let (columns, delimiter, header) = r.csv;
            (
                base.join(&t.path).display().to_string(),
                a.format.or_else(|| t.format.clone()),
                crate::trace::ReadArgs {
                    lenient: r.lenient || t.lenient,
                    device: r.device.or_else(|| t.device.clone()),
                    action: r.action,
                    csv: (
                        columns.or_else(|| t.columns.clone()),
                        delimiter.or_else(|| t.delimiter.clone()),
                        header.or(t.header),
                    ),
                    sort: r.sort || t.sort,
                    sort_window: r.sort_window.or(t.sort_window),
                }
                .options()?,
            )
        }
        (None, None) => {
            let o = wattio_engine::workload_opener(cfg).ok_or_else(|| {
                PyValueError::new_err(
                    "the config has no [workload] and no trace was given (--trace FILE)",
                )
            })?;
            return Ok((o, Input::Workload));
        }
    };
    let lenient = read.lenient;
    let mut opener = crate::trace::file_opener(PathBuf::from(path), format, read)?;
    // The config's `trace.speedup` (not with --trace, which replaces the config's [trace]).
    if let Some(x) = cfg
        .trace
        .as_ref()
        .and_then(|t| t.speedup)
        .filter(|_| !from_cli)
    {
        let inner = opener;
        opener = std::sync::Arc::new(move || {
            Ok(Box::new(wattio_core::trace::Rescaled::new(inner()?, x))
                as Box<dyn wattio_core::TraceSource>)
        });
    }
    Ok((opener, Input::Trace { lenient }))
}

/// Parse and check a config; raises ValueError naming the key.
#[pyfunction]
#[pyo3(signature = (text, origin="config"))]
fn check_config(text: &str, origin: &str) -> PyResult<()> {
    RunConfig::from_toml(origin, text)
        .map(|_| ())
        .map_err(PyValueError::new_err)
}

/// Everything a run of this config needs before it simulates, built the one way both
/// [`run_config`] and [`check_run`] use, so `wattio check` cannot drift from `wattio run`.
struct Prepared {
    cfg: RunConfig,
    cat: wattio_devices::Catalogue,
    opener: Opener,
    input: Input,
}

fn prepare(text: &str, origin: &str, base_dir: &str, trace: TraceArgs) -> PyResult<Prepared> {
    let cfg = RunConfig::from_toml(origin, text).map_err(PyValueError::new_err)?;
    let base = PathBuf::from(base_dir);
    let cat = wattio_engine::catalogue_for(&cfg, &base).map_err(PyValueError::new_err)?;
    let (opener, input) = opener_for(&cfg, &base, trace)?;
    Ok(Prepared {
        cfg,
        cat,
        opener,
        input,
    })
}

/// What `wattio check` does: every validation of a run — the config, the catalogue, the
/// devices, every function built and attached (the Python objects in `functions` too), the
/// whole trace read and judged — without simulating. Returns a JSON report.
#[pyfunction]
#[pyo3(signature = (text, origin="config", base_dir=".", trace=None, trace_format=None, functions=None, **read))]
#[allow(clippy::too_many_arguments)]
fn check_run(
    py: Python<'_>,
    text: &str,
    origin: &str,
    base_dir: &str,
    trace: Option<String>,
    trace_format: Option<String>,
    functions: Option<Bound<'_, PyDict>>,
    read: Option<&Bound<'_, PyDict>>,
) -> PyResult<String> {
    let p = prepare(
        text,
        origin,
        base_dir,
        TraceArgs {
            path: trace,
            format: trace_format,
            read: crate::trace::ReadArgs::from_kwargs(read)?,
        },
    )?;
    let error: Arc<Mutex<Option<PyErr>>> = Arc::new(Mutex::new(None));
    let mut external = python_functions(py, functions, error.clone())?;
    let result = py.allow_threads(|| {
        wattio_engine::check(
            &p.cfg,
            &p.cat,
            &p.opener,
            &mut Registry::new().with_external("python", &mut external),
            p.input,
        )
    });
    if let Some(e) = error.lock().ok().and_then(|mut e| e.take()) {
        return Err(e);
    }
    let r = result.map_err(PyValueError::new_err)?;
    let json = serde_json::json!({
        "devices": r.devices,
        "functions": r.functions,
        "trace_requests": r.trace.map(|t| t.0),
        "trace_span_s": r.trace.map(|t| t.1 as f64 / 1e9),
        "assumptions": r.assumptions,
        "warnings": r.warnings,
    });
    Ok(json.to_string())
}

/// Names and descriptions of the embedded device catalogue.
#[pyfunction]
fn catalogue() -> PyResult<Vec<(String, String, String)>> {
    let c = wattio_devices::Catalogue::embedded().map_err(PyRuntimeError::new_err)?;
    Ok(c.specs()
        .map(|s| (s.name.clone(), s.kind.clone(), s.description.clone()))
        .collect())
}

/// The function kinds of the registry: (kind, module, summary, source, documentation page).
#[pyfunction]
fn functions() -> Vec<(
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    &'static str,
)> {
    wattio_functions::registry::KINDS
        .iter()
        .map(|k| (k.kind, k.module, k.summary, k.source, k.doc))
        .collect()
}

/// The registry's builder for `kind = "python"` functions (`Registry::with_external`):
/// `functions` maps stack positions to the Python objects to use there. The first exception
/// any of them raises lands in `error`. (Also used by live mode: `live::serve`.)
#[allow(clippy::type_complexity)]
pub(crate) fn python_functions(
    py: Python<'_>,
    functions: Option<Bound<'_, PyDict>>,
    error: Arc<Mutex<Option<PyErr>>>,
) -> PyResult<impl FnMut(usize, &toml::Table, &BuildContext) -> Result<Box<dyn Function>, String>> {
    let mut pyfuncs: Vec<(usize, Py<PyAny>)> = Vec::new();
    if let Some(f) = functions {
        for (k, v) in f.iter() {
            pyfuncs.push((k.extract()?, v.unbind()));
        }
    }
    let acts = Py::new(py, PyActions::default())?;
    let err2 = error;
    Ok(
        move |i: usize, t: &toml::Table, ctx: &BuildContext| -> Result<Box<dyn Function>, String> {
            let p = PythonConfig::parse(t, ctx.key)?;
            let pos = pyfuncs.iter().position(|(k, _)| *k == i).ok_or_else(|| {
                format!(
                    "{}: Python class `{}` was not instantiated (run configs with Python functions through the wattio CLI or wattio.run)",
                    ctx.key, p.class
                )
            })?;
            let obj = pyfuncs.swap_remove(pos).1;
            let name = Python::with_gil(|py| {
                obj.bind(py)
                    .getattr("name")
                    .and_then(|n| n.extract::<String>())
                    .unwrap_or_else(|_| p.class.clone())
            });
            Ok(Box::new(PyFunction {
                obj,
                name,
                label: format!("{} ({})", ctx.key, p.class),
                acts: Python::with_gil(|py| acts.clone_ref(py)),
                error: err2.clone(),
                base: scratch_base(i),
            }))
        },
    )
}

/// Run a config. `functions` maps stack positions of `kind = "python"` functions to the
/// objects to use there. Returns `summary.json`'s text.
#[pyfunction]
#[pyo3(signature = (text, origin="config", base_dir=".", trace=None, trace_format=None, out_dir=None, progress=None, functions=None, **read))]
#[allow(clippy::too_many_arguments)]
fn run_config(
    py: Python<'_>,
    text: &str,
    origin: &str,
    base_dir: &str,
    trace: Option<String>,
    trace_format: Option<String>,
    out_dir: Option<String>,
    progress: Option<Py<PyAny>>,
    functions: Option<Bound<'_, PyDict>>,
    read: Option<&Bound<'_, PyDict>>,
) -> PyResult<String> {
    let p = prepare(
        text,
        origin,
        base_dir,
        TraceArgs {
            path: trace,
            format: trace_format,
            read: crate::trace::ReadArgs::from_kwargs(read)?,
        },
    )?;
    let error: Arc<Mutex<Option<PyErr>>> = Arc::new(Mutex::new(None));
    let mut external = python_functions(py, functions, error.clone())?;
    let mut progress_fn = |n: u64, t: Nanos| -> Result<(), String> {
        Python::with_gil(|py| {
            py.check_signals().map_err(|e| e.to_string())?;
            if let Some(p) = &progress {
                p.call1(py, (n, t)).map_err(|e| e.to_string())?;
            }
            Ok(())
        })
    };
    let result = py.allow_threads(|| {
        wattio_engine::run(
            &p.cfg,
            &p.cat,
            &p.opener,
            &mut Registry::new().with_external("python", &mut external),
            RunOptions {
                out_dir: out_dir.map(PathBuf::from),
                progress: Some(&mut progress_fn),
                input: p.input,
            },
        )
    });
    if let Some(e) = error.lock().ok().and_then(|mut e| e.take()) {
        return Err(e);
    }
    let summary = result.map_err(|e| {
        if e.contains("KeyboardInterrupt") {
            pyo3::exceptions::PyKeyboardInterrupt::new_err(e)
        } else {
            PyRuntimeError::new_err(e)
        }
    })?;
    serde_json::to_string_pretty(&summary).map_err(|e| PyRuntimeError::new_err(e.to_string()))
}
