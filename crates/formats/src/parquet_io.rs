//! Parquet files through the Parquet crate's own column API, without Arrow.
//!
//! wattio's Parquet files (columnar block traces, memory traces, a run's tables) are flat
//! tables of a few primitive types, so they are written and read column by column with the
//! Parquet crate alone. Its `arrow` feature would give record batches at the price of the
//! Arrow compute crates it pulls in (cast, ord, select, ipc): measured on the 2-core CI
//! machine, a release build of parquet with it took 239 s of wall clock, without it 71 s
//! (docs/benchmarks.md). Column types follow Arrow's mapping to Parquet, and every file
//! carries the `ARROW:schema` an Arrow writer would have written, so pyarrow and pandas read
//! the files exactly as they read the Arrow-written ones (dictionary columns as
//! categoricals); files written by Arrow-based writers (wattio before this module, pyarrow)
//! read here.

use crate::error::{FormatError, Location};
use parquet::basic::{ConvertedType, IntType, LogicalType, Repetition, Type as Physical};
use parquet::column::reader::{get_typed_column_reader, ColumnReaderImpl};
use parquet::column::writer::ColumnWriter;
use parquet::data_type::{ByteArray, DataType};
use parquet::errors::ParquetError;
use parquet::file::metadata::{KeyValue, ParquetMetaData};
use parquet::file::properties::WriterProperties;
use parquet::file::reader::{ChunkReader, FileReader, RowGroupReader};
use parquet::file::serialized_reader::SerializedFileReader;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::types::{ColumnDescriptor, Type, TypePtr};
use std::fs::File;
use std::path::Path;
use std::sync::Arc;

/// A column's type, named as Arrow names it (the names the docs and errors use).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    UInt8,
    UInt16,
    UInt32,
    UInt64,
    Int64,
    Float64,
    Boolean,
    Utf8,
    Binary,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::UInt8 => "UInt8",
            Kind::UInt16 => "UInt16",
            Kind::UInt32 => "UInt32",
            Kind::UInt64 => "UInt64",
            Kind::Int64 => "Int64",
            Kind::Float64 => "Float64",
            Kind::Boolean => "Boolean",
            Kind::Utf8 => "Utf8",
            Kind::Binary => "Binary",
        }
    }

    fn physical(self) -> Physical {
        match self {
            Kind::UInt8 | Kind::UInt16 | Kind::UInt32 => Physical::INT32,
            Kind::UInt64 | Kind::Int64 => Physical::INT64,
            Kind::Float64 => Physical::DOUBLE,
            Kind::Boolean => Physical::BOOLEAN,
            Kind::Utf8 | Kind::Binary => Physical::BYTE_ARRAY,
        }
    }

    fn logical(self) -> Option<LogicalType> {
        let unsigned = |bit_width| {
            LogicalType::Integer(IntType {
                bit_width,
                is_signed: false,
            })
        };
        match self {
            Kind::UInt8 => Some(unsigned(8)),
            Kind::UInt16 => Some(unsigned(16)),
            Kind::UInt32 => Some(unsigned(32)),
            Kind::UInt64 => Some(unsigned(64)),
            Kind::Utf8 => Some(LogicalType::String),
            _ => None,
        }
    }

    /// The kind a column of a file has, as Arrow's reader would type it; `None` for a
    /// type wattio's files never use.
    pub fn of(d: &ColumnDescriptor) -> Option<Kind> {
        let logical = d.logical_type_ref();
        let converted = d.converted_type();
        let int = |bits: i8, signed: bool| match logical {
            Some(LogicalType::Integer(IntType {
                bit_width,
                is_signed,
            })) => *bit_width == bits && *is_signed == signed,
            _ => false,
        };
        Some(match d.physical_type() {
            Physical::INT32 if int(8, false) || converted == ConvertedType::UINT_8 => Kind::UInt8,
            Physical::INT32 if int(16, false) || converted == ConvertedType::UINT_16 => {
                Kind::UInt16
            }
            Physical::INT32 if int(32, false) || converted == ConvertedType::UINT_32 => {
                Kind::UInt32
            }
            Physical::INT64 if int(64, false) || converted == ConvertedType::UINT_64 => {
                Kind::UInt64
            }
            Physical::INT64
                if int(64, true)
                    || (logical.is_none()
                        && matches!(converted, ConvertedType::NONE | ConvertedType::INT_64)) =>
            {
                Kind::Int64
            }
            Physical::DOUBLE if logical.is_none() => Kind::Float64,
            Physical::BOOLEAN => Kind::Boolean,
            Physical::BYTE_ARRAY
                if matches!(logical, Some(LogicalType::String))
                    || converted == ConvertedType::UTF8 =>
            {
                Kind::Utf8
            }
            Physical::BYTE_ARRAY if logical.is_none() && converted == ConvertedType::NONE => {
                Kind::Binary
            }
            _ => return None,
        })
    }
}

/// How a column's type is described in an error.
pub fn describe(d: &ColumnDescriptor) -> String {
    match Kind::of(d) {
        Some(k) => k.name().to_string(),
        None => match d.logical_type_ref() {
            Some(l) => format!("{} ({l:?})", d.physical_type()),
            None => format!("{} ({})", d.physical_type(), d.converted_type()),
        },
    }
}

/// A column of a table wattio writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Col {
    pub name: &'static str,
    pub kind: Kind,
    pub nullable: bool,
    /// For a `Utf8` column read as a dictionary (a pandas categorical): the bit width and
    /// signedness of Arrow's dictionary keys.
    pub dictionary: Option<(u8, bool)>,
}

impl Col {
    pub const fn new(name: &'static str, kind: Kind) -> Col {
        Col {
            name,
            kind,
            nullable: false,
            dictionary: None,
        }
    }

    pub const fn nullable(mut self) -> Col {
        self.nullable = true;
        self
    }

    pub const fn dictionary(mut self, bits: u8, signed: bool) -> Col {
        self.dictionary = Some((bits, signed));
        self
    }
}

/// The Parquet schema of `cols`.
pub fn schema(cols: &[Col]) -> Result<TypePtr, ParquetError> {
    let fields = cols
        .iter()
        .map(|c| {
            let rep = if c.nullable {
                Repetition::OPTIONAL
            } else {
                Repetition::REQUIRED
            };
            Type::primitive_type_builder(c.name, c.kind.physical())
                .with_repetition(rep)
                .with_logical_type(c.kind.logical())
                .build()
                .map(Arc::new)
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Arc::new(
        Type::group_type_builder("schema")
            .with_fields(fields)
            .build()?,
    ))
}

/// One column's values for a row group: `def` (1 valid, 0 null) for a nullable column, in
/// which case `values` holds the valid rows' values only.
pub struct Column<'a> {
    pub values: Values<'a>,
    pub def: Option<&'a [i16]>,
}

pub enum Values<'a> {
    Int32(&'a [i32]),
    Int64(&'a [i64]),
    Double(&'a [f64]),
    Bool(&'a [bool]),
    Bytes(&'a [ByteArray]),
}

impl<'a> Column<'a> {
    pub fn required(values: Values<'a>) -> Self {
        Column { values, def: None }
    }

    /// A column that cannot hold nulls, from its values.
    pub fn of<T: Stored>(values: &'a [T]) -> Self {
        Column::required(T::values(values))
    }
}

/// A type a column's values are held in before they are written (Parquet's physical types).
pub trait Stored: Sized {
    fn values(v: &[Self]) -> Values<'_>;
}

impl Stored for i32 {
    fn values(v: &[i32]) -> Values<'_> {
        Values::Int32(v)
    }
}

impl Stored for i64 {
    fn values(v: &[i64]) -> Values<'_> {
        Values::Int64(v)
    }
}

impl Stored for f64 {
    fn values(v: &[f64]) -> Values<'_> {
        Values::Double(v)
    }
}

impl Stored for bool {
    fn values(v: &[bool]) -> Values<'_> {
        Values::Bool(v)
    }
}

impl Stored for ByteArray {
    fn values(v: &[ByteArray]) -> Values<'_> {
        Values::Bytes(v)
    }
}

/// A column's values held until its row group is written.
pub trait ColumnBuffer {
    /// Rows held.
    fn rows(&self) -> usize;
    fn column(&self) -> Column<'_>;
    fn clear(&mut self);
}

impl<T: Stored> ColumnBuffer for Vec<T> {
    fn rows(&self) -> usize {
        self.len()
    }
    fn column(&self) -> Column<'_> {
        Column::of(self)
    }
    fn clear(&mut self) {
        Vec::clear(self);
    }
}

impl<T: Stored> ColumnBuffer for Nullable<T> {
    fn rows(&self) -> usize {
        self.def.len()
    }
    fn column(&self) -> Column<'_> {
        Nullable::column(self)
    }
    fn clear(&mut self) {
        Nullable::clear(self);
    }
}

/// A nullable column being filled: the values present and a definition level a row.
pub struct Nullable<T> {
    values: Vec<T>,
    def: Vec<i16>,
}

impl<T> Default for Nullable<T> {
    fn default() -> Self {
        Nullable {
            values: Vec::new(),
            def: Vec::new(),
        }
    }
}

impl<T: Stored> Nullable<T> {
    pub fn push(&mut self, v: Option<T>) {
        self.def.push(i16::from(v.is_some()));
        self.values.extend(v);
    }

    pub fn column(&self) -> Column<'_> {
        Column {
            values: T::values(&self.values),
            def: Some(&self.def),
        }
    }

    pub fn clear(&mut self) {
        self.values.clear();
        self.def.clear();
    }
}

/// A Parquet file written a row group at a time.
pub struct Writer {
    inner: SerializedFileWriter<File>,
    columns: usize,
}

impl Writer {
    /// Writes a file of `cols` into `f` (created by the caller, who names it in errors),
    /// with the key-value metadata of `props` and the `ARROW:schema` an Arrow writer would
    /// add. The row groups are what [`Writer::write_group`] is given: `props`' row-group
    /// size does not apply.
    pub fn new(f: File, cols: &[Col], props: WriterProperties) -> Result<Self, ParquetError> {
        let mut inner = SerializedFileWriter::new(f, schema(cols)?, Arc::new(props))?;
        inner.append_key_value_metadata(arrow_schema(cols));
        Ok(Writer {
            inner,
            columns: cols.len(),
        })
    }

    /// Writes one row group; `columns` in the schema's order, all of the same row count.
    pub fn write_group(&mut self, columns: &[Column<'_>]) -> Result<(), ParquetError> {
        if columns.len() != self.columns {
            return Err(ParquetError::General(format!(
                "{} columns given for a schema of {}",
                columns.len(),
                self.columns
            )));
        }
        let mut rg = self.inner.next_row_group()?;
        for c in columns {
            let mut w = rg
                .next_column()?
                .ok_or_else(|| ParquetError::General("more columns than the schema".into()))?;
            let def = c.def;
            match (w.untyped(), &c.values) {
                (ColumnWriter::Int32ColumnWriter(t), Values::Int32(v)) => {
                    t.write_batch(v, def, None)?;
                }
                (ColumnWriter::Int64ColumnWriter(t), Values::Int64(v)) => {
                    t.write_batch(v, def, None)?;
                }
                (ColumnWriter::DoubleColumnWriter(t), Values::Double(v)) => {
                    t.write_batch(v, def, None)?;
                }
                (ColumnWriter::BoolColumnWriter(t), Values::Bool(v)) => {
                    t.write_batch(v, def, None)?;
                }
                (ColumnWriter::ByteArrayColumnWriter(t), Values::Bytes(v)) => {
                    t.write_batch(v, def, None)?;
                }
                _ => {
                    return Err(ParquetError::General(
                        "values of another type than the column's".into(),
                    ))
                }
            }
            w.close()?;
        }
        rg.close()?;
        Ok(())
    }

    /// Writes `buffers` (one per column, in the schema's order) as one row group and empties
    /// them; nothing when they hold no rows.
    pub fn flush(&mut self, buffers: &mut [&mut dyn ColumnBuffer]) -> Result<(), ParquetError> {
        if buffers.first().is_none_or(|b| b.rows() == 0) {
            return Ok(());
        }
        let columns: Vec<Column<'_>> = buffers.iter().map(|b| b.column()).collect();
        self.write_group(&columns)?;
        drop(columns);
        for b in buffers {
            b.clear();
        }
        Ok(())
    }

    pub fn append_key_value(&mut self, kv: KeyValue) {
        self.inner.append_key_value_metadata(kv);
    }

    pub fn close(self) -> Result<(), ParquetError> {
        self.inner.close().map(|_| ())
    }
}

/// Writes a whole file of one row group (`columns` as in [`Writer::write_group`]): for
/// files written in one go, and for tests that need files wattio's writers would not write.
pub fn write_file(
    path: &Path,
    cols: &[Col],
    props: WriterProperties,
    columns: &[Column<'_>],
) -> Result<(), String> {
    let f = File::create(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut w = Writer::new(f, cols, props).map_err(|e| e.to_string())?;
    w.write_group(columns).map_err(|e| e.to_string())?;
    w.close().map_err(|e| e.to_string())
}

/// The `ARROW:schema` key-value an Arrow writer puts in a Parquet file: the Arrow schema as
/// an IPC message (a flatbuffer, Arrow's `Message.fbs` and `Schema.fbs`), base64-encoded.
/// pyarrow types the columns by it; what matters here is that dictionary columns come back
/// as dictionaries (pandas categoricals), the rest is what the Parquet types say anyway.
pub fn arrow_schema(cols: &[Col]) -> KeyValue {
    use flatbuf::{Table, V};
    let int = |bits: i32, signed: bool| Table(vec![(0, V::I32(bits)), (1, V::Bool(signed))]);
    let mut dict_id = 0i64;
    let fields = cols
        .iter()
        .map(|c| {
            // Arrow's `Type` union: Int 2, FloatingPoint 3, Binary 4, Utf8 5, Bool 6.
            let (code, ty) = match c.kind {
                Kind::UInt8 => (2, int(8, false)),
                Kind::UInt16 => (2, int(16, false)),
                Kind::UInt32 => (2, int(32, false)),
                Kind::UInt64 => (2, int(64, false)),
                Kind::Int64 => (2, int(64, true)),
                Kind::Float64 => (3, Table(vec![(0, V::I16(2))])), // Precision DOUBLE
                Kind::Binary => (4, Table(vec![])),
                Kind::Utf8 => (5, Table(vec![])),
                Kind::Boolean => (6, Table(vec![])),
            };
            let mut f = vec![
                (0, V::Str(c.name.to_string())),
                (1, V::Bool(c.nullable)),
                (2, V::U8(code)),
                (3, V::Table(ty)),
            ];
            if let Some((bits, signed)) = c.dictionary {
                // DictionaryEncoding: id, indexType.
                f.push((
                    4,
                    V::Table(Table(vec![
                        (0, V::I64(dict_id)),
                        (1, V::Table(int(i32::from(bits), signed))),
                    ])),
                ));
                dict_id += 1;
            }
            // Arrow's reader wants the children vector present, if empty.
            f.push((5, V::Tables(vec![])));
            Table(f)
        })
        .collect();
    let schema = Table(vec![(1, V::Tables(fields))]);
    // Message: version V5 (4), header type Schema (1), header, body length 0.
    let message = Table(vec![
        (0, V::I16(4)),
        (1, V::U8(1)),
        (2, V::Table(schema)),
        (3, V::I64(0)),
    ]);
    let mut fb = flatbuf::finish(&message);
    while !fb.len().is_multiple_of(8) {
        fb.push(0);
    }
    // The IPC encapsulation: continuation marker, metadata length, metadata.
    let mut ipc = Vec::with_capacity(fb.len() + 8);
    ipc.extend_from_slice(&u32::MAX.to_le_bytes());
    ipc.extend_from_slice(&(fb.len() as u32).to_le_bytes());
    ipc.extend_from_slice(&fb);
    KeyValue::new("ARROW:schema".to_string(), base64(&ipc))
}

/// Standard base64 with padding (RFC 4648 §4).
fn base64(data: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut s = String::with_capacity(data.len().div_ceil(3) * 4);
    for c in data.chunks(3) {
        let b = [c[0], *c.get(1).unwrap_or(&0), *c.get(2).unwrap_or(&0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for (i, shift) in [18, 12, 6, 0].into_iter().enumerate() {
            if i <= c.len() {
                s.push(char::from(A[((n >> shift) & 63) as usize]));
            } else {
                s.push('=');
            }
        }
    }
    s
}

/// Just enough of a flatbuffer writer for a schema message. Objects are laid out front to
/// back: a table's vtable right before it, the objects it refers to after it, so every
/// offset is forward (unsigned) as the format requires; scalars sit at multiples of their
/// size from the 8-aligned table start.
mod flatbuf {
    pub enum V {
        Bool(bool),
        U8(u8),
        I16(i16),
        I32(i32),
        I64(i64),
        Str(String),
        Table(Table),
        Tables(Vec<Table>),
    }

    /// A table's fields by slot (the field's index in the schema file).
    pub struct Table(pub Vec<(u16, V)>);

    impl V {
        /// Inline size (also the alignment).
        fn size(&self) -> usize {
            match self {
                V::Bool(_) | V::U8(_) => 1,
                V::I16(_) => 2,
                V::I32(_) | V::Str(_) | V::Table(_) | V::Tables(_) => 4,
                V::I64(_) => 8,
            }
        }
    }

    pub fn finish(root: &Table) -> Vec<u8> {
        let mut b = vec![0u8; 4];
        let at = table(&mut b, root);
        patch(&mut b, 0, at);
        b
    }

    fn pad(b: &mut Vec<u8>, align: usize) {
        while !b.len().is_multiple_of(align) {
            b.push(0);
        }
    }

    /// Points the offset at `at` to `target` (always after it).
    fn patch(b: &mut [u8], at: usize, target: usize) {
        let off = ((target - at) as u32).to_le_bytes();
        b[at..at + 4].copy_from_slice(&off);
    }

    fn table(b: &mut Vec<u8>, t: &Table) -> usize {
        let slots = t.0.iter().map(|(s, _)| *s as usize + 1).max().unwrap_or(0);
        // Inline layout from the table start: the vtable offset, then each field aligned.
        let mut vt = vec![0u16; slots];
        let mut at = Vec::with_capacity(t.0.len());
        let mut off = 4usize;
        for (slot, v) in &t.0 {
            off = off.div_ceil(v.size()) * v.size();
            vt[*slot as usize] = off as u16;
            at.push(off);
            off += v.size();
        }
        pad(b, 2);
        let vpos = b.len();
        b.extend_from_slice(&((4 + 2 * slots) as u16).to_le_bytes());
        b.extend_from_slice(&(off as u16).to_le_bytes());
        for o in &vt {
            b.extend_from_slice(&o.to_le_bytes());
        }
        pad(b, 8);
        let tpos = b.len();
        b.extend_from_slice(&((tpos - vpos) as i32).to_le_bytes());
        b.resize(tpos + off, 0);
        for ((_, v), &o) in t.0.iter().zip(&at) {
            let p = tpos + o;
            match v {
                V::Bool(x) => b[p] = u8::from(*x),
                V::U8(x) => b[p] = *x,
                V::I16(x) => b[p..p + 2].copy_from_slice(&x.to_le_bytes()),
                V::I32(x) => b[p..p + 4].copy_from_slice(&x.to_le_bytes()),
                V::I64(x) => b[p..p + 8].copy_from_slice(&x.to_le_bytes()),
                _ => {}
            }
        }
        for ((_, v), &o) in t.0.iter().zip(&at) {
            let child = match v {
                V::Str(s) => {
                    pad(b, 4);
                    let p = b.len();
                    b.extend_from_slice(&(s.len() as u32).to_le_bytes());
                    b.extend_from_slice(s.as_bytes());
                    b.push(0);
                    p
                }
                V::Table(t) => table(b, t),
                V::Tables(ts) => {
                    pad(b, 4);
                    let p = b.len();
                    b.extend_from_slice(&(ts.len() as u32).to_le_bytes());
                    b.resize(p + 4 + 4 * ts.len(), 0);
                    for (i, t) in ts.iter().enumerate() {
                        let c = table(b, t);
                        patch(b, p + 4 + 4 * i, c);
                    }
                    p
                }
                _ => continue,
            };
            patch(b, tpos + o, child);
        }
        tpos
    }
}

/// Runs a call into the Parquet crate, turning a panic into an error. It still panics on
/// some malformed files (parquet 57's footer decoder unwraps a missing boolean, found by
/// fuzzing; fixed in parquet 60): a corrupt file must not take the whole run down. Only
/// calls into the crate are wrapped, so a panic in wattio's own code still surfaces. The
/// reader is not used again after such an error.
pub(crate) fn contain<R>(
    file: &str,
    at: Location,
    f: impl FnOnce() -> R,
) -> Result<R, FormatError> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).map_err(|p| {
        let what = p
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| p.downcast_ref::<String>().cloned())
            .unwrap_or_default();
        FormatError::new(
            file,
            at,
            format!("the Parquet decoder failed on this file: {what}"),
        )
        .with_expected("a well-formed Parquet file")
    })
}

/// Runs [`crate::footer::check`] on the footer before the Parquet crate decodes it;
/// `expected` says what the file should have been.
pub(crate) fn check_footer<T: ChunkReader>(
    input: &T,
    file_len: u64,
    file: &str,
    expected: &str,
) -> Result<(), FormatError> {
    let io = |e: ParquetError| FormatError::file(file, format!("Parquet: {e}"));
    let Some(tail_at) = file_len.checked_sub(8) else {
        return Ok(()); // too short: the Parquet crate says so
    };
    let tail = input.get_bytes(tail_at, 8).map_err(io)?;
    let Some(len) = crate::footer::footer_len(&tail) else {
        return Ok(());
    };
    let (Some(start), Ok(n)) = (tail_at.checked_sub(len), usize::try_from(len)) else {
        return Ok(()); // longer than the file: the Parquet crate says so
    };
    let footer = input.get_bytes(start, n).map_err(io)?;
    crate::footer::check(&footer).map_err(|e| {
        FormatError::file(file, format!("not a Parquet file: corrupt footer: {e}"))
            .with_expected(expected)
    })
}

/// Every column chunk must lie inside the file. The Parquet crate trusts the footer here: a
/// negative offset trips an assertion, and a huge length becomes the capacity of the buffer
/// it reads the chunk into, so a corrupt footer would abort the process instead of failing.
pub(crate) fn check_chunk_ranges(
    file: &str,
    md: &ParquetMetaData,
    file_len: u64,
) -> Result<(), FormatError> {
    for (g, rg) in md.row_groups().iter().enumerate() {
        for c in rg.columns() {
            let start = c.dictionary_page_offset().unwrap_or(c.data_page_offset());
            let inside = u64::try_from(start)
                .ok()
                .zip(u64::try_from(c.compressed_size()).ok())
                .and_then(|(s, l)| s.checked_add(l))
                .is_some_and(|end| end <= file_len);
            if !inside {
                return Err(FormatError::file(
                    file,
                    format!(
                        "row group {g}, column `{}`: chunk at byte {start} of {} bytes lies outside the {file_len}-byte file",
                        c.column_path().string(),
                        c.compressed_size()
                    ),
                )
                .with_expected("a complete, uncorrupted Parquet file"));
            }
        }
        if rg.num_rows() < 0 {
            return Err(FormatError::file(
                file,
                format!("row group {g} declares {} rows", rg.num_rows()),
            )
            .with_expected("a complete, uncorrupted Parquet file"));
        }
    }
    Ok(())
}

/// Walks every column chunk's page headers (`pages.rs`) before the Parquet crate decodes a
/// page, which sizes buffers from what they declare. Only the headers are read, in windows
/// of 1 KiB grown as needed; chunk ranges must have been checked
/// ([`check_chunk_ranges`]).
pub(crate) fn check_pages<T: ChunkReader>(
    input: &T,
    md: &ParquetMetaData,
    file: &str,
) -> Result<(), FormatError> {
    use crate::pages;
    for (g, rg) in md.row_groups().iter().enumerate() {
        for c in rg.columns() {
            let descr = c.column_descr();
            // The least an entry of a PLAIN dictionary takes.
            let entry_bits = match descr.physical_type() {
                Physical::BOOLEAN => 1,
                Physical::INT32 | Physical::FLOAT | Physical::BYTE_ARRAY => 32,
                Physical::INT64 | Physical::DOUBLE => 64,
                Physical::INT96 => 96,
                Physical::FIXED_LEN_BYTE_ARRAY => {
                    8 * u64::try_from(descr.type_length()).unwrap_or(0)
                }
            };
            let (start, len) = c.byte_range();
            let refuse = |at: u64, m: String| {
                FormatError::new(
                    file,
                    Location::Byte(start + at),
                    format!("row group {g}, column `{}`: {m}", c.column_path().string()),
                )
                .with_expected("a complete, uncorrupted Parquet file")
            };
            let (mut pos, mut rows) = (0u64, 0i64);
            while pos < len {
                let left = len - pos;
                let mut window = left.min(1024);
                let h = loop {
                    let b = input
                        .get_bytes(start + pos, window as usize)
                        .map_err(|e| refuse(pos, format!("Parquet: {e}")))?;
                    match pages::page_header(&b) {
                        Ok(h) => break h,
                        Err(pages::HeaderError::Short(_))
                            if window < left.min(pages::MAX_HEADER_BYTES) =>
                        {
                            window = (window * 16).min(left.min(pages::MAX_HEADER_BYTES));
                        }
                        Err(pages::HeaderError::Short(m)) => {
                            return Err(refuse(
                                pos,
                                format!(
                                    "page header cut short ({m}; {left} bytes of the chunk left)"
                                ),
                            ))
                        }
                        Err(pages::HeaderError::Bad(m)) => return Err(refuse(pos, m)),
                    }
                };
                pages::check(
                    &h,
                    left,
                    entry_bits,
                    descr.physical_type() == Physical::BYTE_ARRAY,
                )
                .map_err(|m| refuse(pos, m))?;
                if matches!(h.kind, pages::DATA_PAGE | pages::DATA_PAGE_V2) {
                    rows = rows.saturating_add(h.rows.unwrap_or(0));
                }
                pos += h.len as u64 + h.compressed as u64;
            }
            // In a flat column every row is one value (null or not) of exactly one page.
            if descr.max_rep_level() == 0 && rows != rg.num_rows() {
                return Err(refuse(
                    0,
                    format!(
                        "its pages hold {rows} values but the row group declares {} rows",
                        rg.num_rows()
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// Opens a Parquet file with the checks every wattio Parquet reader needs (columnar traces,
/// memory traces): the footer, every column chunk's byte range within the file and its page
/// headers, the Parquet crate's own panics contained. `expected` says what the file should
/// have been.
pub(crate) fn open<T: ChunkReader + 'static>(
    input: T,
    file: &str,
    expected: &str,
) -> Result<SerializedFileReader<Shared<T>>, FormatError> {
    let file_len = input.len();
    check_footer(&input, file_len, file, expected)?;
    let input = Shared(Arc::new(input));
    let reader = contain(file, Location::File, || {
        SerializedFileReader::new(input.clone())
    })?
    .map_err(|e| {
        FormatError::file(file, format!("not a Parquet file: {e}")).with_expected(expected)
    })?;
    check_chunk_ranges(file, reader.metadata(), file_len)?;
    check_pages(&input, reader.metadata(), file)?;
    Ok(reader)
}

/// An input shared between the Parquet crate's reader and the page-header walk, which runs
/// after the crate has decoded the footer (the crate keeps its input to itself).
pub(crate) struct Shared<T>(Arc<T>);

impl<T> Clone for Shared<T> {
    fn clone(&self) -> Self {
        Shared(Arc::clone(&self.0))
    }
}

impl<T: ChunkReader> parquet::file::reader::Length for Shared<T> {
    fn len(&self) -> u64 {
        self.0.len()
    }
}

impl<T: ChunkReader> ChunkReader for Shared<T> {
    type T = T::T;

    fn get_read(&self, start: u64) -> Result<Self::T, ParquetError> {
        self.0.get_read(start)
    }

    fn get_bytes(&self, start: u64, length: usize) -> Result<bytes::Bytes, ParquetError> {
        self.0.get_bytes(start, length)
    }
}

/// A Parquet file's key-value metadata as (key, value) pairs (a missing value is empty).
pub(crate) fn key_values(md: &parquet::file::metadata::FileMetaData) -> Vec<(String, String)> {
    md.key_value_metadata()
        .map(|kvs| {
            kvs.iter()
                .map(|kv| (kv.key.clone(), kv.value.clone().unwrap_or_default()))
                .collect()
        })
        .unwrap_or_default()
}

/// Finds the top-level column `name` of kind `want` (either repetition): its index. The
/// errors name the column and what it should have been; `schema_doc` names the schema.
pub(crate) fn find_column(
    reader: &dyn FileReader,
    file: &str,
    name: &str,
    want: Kind,
    schema_doc: &str,
) -> Result<usize, FormatError> {
    let descr = reader.metadata().file_metadata().schema_descr();
    let Some(i) = descr
        .columns()
        .iter()
        .position(|c| c.path().parts().len() == 1 && c.name() == name)
    else {
        return Err(
            FormatError::file(file, format!("column `{name}` is missing"))
                .with_expected(schema_doc.to_string()),
        );
    };
    let d = descr.column(i);
    if Kind::of(&d) != Some(want) || d.max_rep_level() != 0 || d.max_def_level() > 1 {
        return Err(
            FormatError::file(file, format!("column `{name}` has type {}", describe(&d)))
                .with_expected(format!("type {}", want.name())),
        );
    }
    Ok(i)
}

/// [`find_column`] for each of `cols`: their indices, in the same order.
pub(crate) fn find_columns<const N: usize>(
    reader: &dyn FileReader,
    file: &str,
    cols: &[Col; N],
    schema_doc: &str,
) -> Result<[usize; N], FormatError> {
    let mut at = [0usize; N];
    for (i, c) in cols.iter().enumerate() {
        at[i] = find_column(reader, file, c.name, c.kind, schema_doc)?;
    }
    Ok(at)
}

/// Where the nulls are in the rows last read by a [`Chunk`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Nulls {
    None,
    All,
    Some,
}

/// One column's values, read a run of rows at a time from the row group in hand.
pub(crate) struct Chunk<T: DataType> {
    col: usize,
    reader: Option<ColumnReaderImpl<T>>,
    nullable: bool,
    values: Vec<T::T>,
    def: Vec<i16>,
    /// The valid values spread to their rows, when some rows are null.
    dense: Vec<T::T>,
    nulls: Nulls,
    rows: usize,
}

impl<T: DataType> Chunk<T> {
    pub fn new(col: usize) -> Self {
        Chunk {
            col,
            reader: None,
            nullable: false,
            values: Vec::new(),
            def: Vec::new(),
            dense: Vec::new(),
            nulls: Nulls::None,
            rows: 0,
        }
    }

    /// Starts reading the column in row group `rg`.
    pub fn start(&mut self, rg: &dyn RowGroupReader) -> Result<(), ParquetError> {
        let r = rg.get_column_reader(self.col)?;
        self.nullable = rg
            .metadata()
            .column(self.col)
            .column_descr()
            .max_def_level()
            > 0;
        self.reader = Some(get_typed_column_reader::<T>(r));
        Ok(())
    }

    /// Skips `n` rows; returns how many there were.
    pub fn skip(&mut self, n: usize) -> Result<usize, ParquetError> {
        match &mut self.reader {
            Some(r) => r.skip_records(n),
            None => Ok(0),
        }
    }

    /// Reads the next `n` rows at most; returns how many were read.
    pub fn read(&mut self, n: usize) -> Result<usize, ParquetError> {
        self.values.clear();
        self.def.clear();
        self.rows = 0;
        let Some(r) = &mut self.reader else {
            return Ok(0);
        };
        let def = self.nullable.then_some(&mut self.def);
        let (rows, valid, _) = r.read_records(n, def, None, &mut self.values)?;
        self.rows = rows;
        self.nulls = if !self.nullable || valid == rows {
            Nulls::None
        } else if valid == 0 {
            Nulls::All
        } else {
            self.dense.clear();
            let mut v = self.values.iter();
            for &d in &self.def {
                let x = if d > 0 { v.next().cloned() } else { None };
                self.dense.push(x.unwrap_or_default());
            }
            Nulls::Some
        };
        Ok(rows)
    }

    pub fn nulls(&self) -> Nulls {
        self.nulls
    }

    /// The definition levels of the rows read (1 valid, 0 null); empty for a column that
    /// cannot hold nulls.
    pub fn def(&self) -> &[i16] {
        &self.def
    }

    /// One value per row read (a null row's is the type's default); empty when every row
    /// is null.
    pub fn values(&self) -> &[T::T] {
        match self.nulls {
            Nulls::None => &self.values,
            Nulls::Some => &self.dense,
            Nulls::All => &[],
        }
    }

    pub fn is_valid(&self, i: usize) -> bool {
        match self.nulls {
            Nulls::None => i < self.rows,
            Nulls::All => false,
            Nulls::Some => self.def.get(i).is_some_and(|&d| d > 0),
        }
    }

    /// The first null row, if any.
    pub fn first_null(&self) -> Option<usize> {
        match self.nulls {
            Nulls::None => None,
            Nulls::All => (self.rows > 0).then_some(0),
            Nulls::Some => self.def.iter().position(|&d| d == 0),
        }
    }
}

/// The row groups of a file, walked in order, with the rows left in the current one.
pub(crate) struct Groups {
    next: usize,
    left: u64,
}

impl Groups {
    pub fn new() -> Self {
        Groups { next: 0, left: 0 }
    }

    /// Rows left in the row group in hand.
    pub fn left(&self) -> u64 {
        self.left
    }

    pub fn take(&mut self, n: usize) {
        self.left = self.left.saturating_sub(n as u64);
    }

    /// Moves to the next row group that has rows, starting `start` on it; `Ok(false)` after
    /// the last one.
    pub fn advance(
        &mut self,
        reader: &dyn FileReader,
        mut start: impl FnMut(&dyn RowGroupReader) -> Result<(), ParquetError>,
    ) -> Result<bool, ParquetError> {
        while self.left == 0 {
            if self.next >= reader.num_row_groups() {
                return Ok(false);
            }
            let rg = reader.get_row_group(self.next)?;
            self.next += 1;
            self.left = u64::try_from(rg.metadata().num_rows()).unwrap_or(0);
            if self.left > 0 {
                start(&*rg)?;
            }
        }
        Ok(true)
    }

    /// Skips whole row groups while `rows` is at least the next one's size; returns the
    /// rows still to skip (inside the row group the next [`Groups::advance`] starts).
    pub fn skip_groups(&mut self, reader: &dyn FileReader, mut rows: u64) -> u64 {
        let md = reader.metadata();
        while self.left == 0 && self.next < md.num_row_groups() {
            let n = u64::try_from(md.row_group(self.next).num_rows()).unwrap_or(0);
            if rows < n {
                break;
            }
            rows -= n;
            self.next += 1;
        }
        rows
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_rfc_4648_vectors() {
        // RFC 4648 §10.
        for (plain, coded) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64(plain.as_bytes()), coded);
        }
    }

    #[test]
    fn flatbuffer_tables_are_laid_out_as_the_format_says() {
        use flatbuf::{Table, V};
        // A table with a byte at slot 1 and a 64-bit value at slot 0.
        let b = flatbuf::finish(&Table(vec![(1, V::U8(7)), (0, V::I64(-2))]));
        let u32_at = |p: usize| u32::from_le_bytes(b[p..p + 4].try_into().unwrap()) as usize;
        let u16_at = |p: usize| u16::from_le_bytes(b[p..p + 2].try_into().unwrap()) as usize;
        let root = u32_at(0);
        assert_eq!(root % 8, 0);
        let vtable = root - u32_at(root);
        assert_eq!(u16_at(vtable), 4 + 2 * 2); // two slots
        let (slot0, slot1) = (u16_at(vtable + 4), u16_at(vtable + 6));
        assert_eq!(b[root + slot1], 7);
        assert_eq!((root + slot0) % 8, 0);
        assert_eq!(
            i64::from_le_bytes(b[root + slot0..root + slot0 + 8].try_into().unwrap()),
            -2
        );
        // The table's inline size covers both fields: byte at 4, the i64 aligned to 8.
        assert_eq!(u16_at(vtable + 2), 16);
    }
}
