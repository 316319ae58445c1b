//! Typed, allocation-free access to the columns of a record batch, shared by both formats.
//!
//! A [`Column`] wraps one Arrow array; [`Column::cell`] reads the value of one row as a
//! [`Cell`]. Each format turns cells into bytes with its own `write_cell` function (a
//! [`RenderCell`]). Dictionary columns are rendered ahead of time: every dictionary value is
//! written once per batch into a [`DictionaryCells`] scratch buffer, and a row then only copies
//! the pre-rendered bytes its key points at.

use arrow::array::{
    Array, AsArray, BooleanArray, LargeStringArray, PrimitiveArray, StringArray, StringViewArray,
};
use arrow::datatypes::ArrowNativeType;
use arrow::datatypes::{
    ArrowPrimitiveType, DataType, Float32Type, Float64Type, Int8Type, Int16Type, Int32Type, Int64Type,
    UInt8Type, UInt16Type, UInt32Type, UInt64Type,
};
use arrow::record_batch::RecordBatch;

use crate::FormatError;

/// Writes one cell in a particular output format.
pub(crate) type RenderCell = fn(&mut Vec<u8>, Cell<'_>);

/// What a column holds, as far as the output is concerned. A batch column must be of the same
/// kind as the schema field it belongs to (an all-null column fits any field).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Null,
    Text,
    Integer,
    Boolean,
    Float,
}

impl Kind {
    /// The kind of a supported type, `None` for an unsupported one.
    pub(crate) fn of(data_type: &DataType) -> Option<Kind> {
        Some(match data_type {
            DataType::Null => Kind::Null,
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => Kind::Text,
            DataType::Int8
            | DataType::Int16
            | DataType::Int32
            | DataType::Int64
            | DataType::UInt8
            | DataType::UInt16
            | DataType::UInt32
            | DataType::UInt64 => Kind::Integer,
            DataType::Boolean => Kind::Boolean,
            DataType::Float32 | DataType::Float64 => Kind::Float,
            DataType::Dictionary(key, value) if key.is_dictionary_key_type() => match value.as_ref() {
                DataType::Dictionary(..) => return None,
                value => return Kind::of(value),
            },
            _ => return None,
        })
    }

    fn fits(self, field: Kind) -> bool {
        self == field || self == Kind::Null || field == Kind::Null
    }
}

/// The value of one row of one column.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Cell<'a> {
    Null,
    /// UTF-8 text, not yet escaped.
    Text(&'a [u8]),
    Signed(i64),
    Unsigned(u64),
    Boolean(bool),
    Float32(f32),
    Float64(f64),
    /// Bytes already rendered in the output format (a pre-rendered dictionary value).
    Rendered(&'a [u8]),
}

/// One column of a record batch, ready to be read row by row.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Column<'a> {
    Null,
    Utf8(&'a StringArray),
    LargeUtf8(&'a LargeStringArray),
    Utf8View(&'a StringViewArray),
    Int8(&'a PrimitiveArray<Int8Type>),
    Int16(&'a PrimitiveArray<Int16Type>),
    Int32(&'a PrimitiveArray<Int32Type>),
    Int64(&'a PrimitiveArray<Int64Type>),
    UInt8(&'a PrimitiveArray<UInt8Type>),
    UInt16(&'a PrimitiveArray<UInt16Type>),
    UInt32(&'a PrimitiveArray<UInt32Type>),
    UInt64(&'a PrimitiveArray<UInt64Type>),
    Boolean(&'a BooleanArray),
    Float32(&'a PrimitiveArray<Float32Type>),
    Float64(&'a PrimitiveArray<Float64Type>),
    /// A dictionary column whose cells were rendered into a [`DictionaryCells`].
    Rendered(&'a DictionaryCells),
}

/// The value at `row` of a primitive array, or `Cell::Null`.
#[inline(always)]
fn primitive<T: ArrowPrimitiveType>(
    array: &PrimitiveArray<T>,
    row: usize,
    cell: impl FnOnce(T::Native) -> Cell<'static>,
) -> Cell<'static> {
    if array.is_null(row) { Cell::Null } else { cell(array.value(row)) }
}

impl<'a> Column<'a> {
    /// Wraps a non-dictionary array; `None` if its type is unsupported or a dictionary.
    fn plain(array: &'a dyn Array) -> Option<Column<'a>> {
        Some(match array.data_type() {
            DataType::Null => Column::Null,
            DataType::Utf8 => Column::Utf8(array.as_string()),
            DataType::LargeUtf8 => Column::LargeUtf8(array.as_string()),
            DataType::Utf8View => Column::Utf8View(array.as_string_view()),
            DataType::Int8 => Column::Int8(array.as_primitive()),
            DataType::Int16 => Column::Int16(array.as_primitive()),
            DataType::Int32 => Column::Int32(array.as_primitive()),
            DataType::Int64 => Column::Int64(array.as_primitive()),
            DataType::UInt8 => Column::UInt8(array.as_primitive()),
            DataType::UInt16 => Column::UInt16(array.as_primitive()),
            DataType::UInt32 => Column::UInt32(array.as_primitive()),
            DataType::UInt64 => Column::UInt64(array.as_primitive()),
            DataType::Boolean => Column::Boolean(array.as_boolean()),
            DataType::Float32 => Column::Float32(array.as_primitive()),
            DataType::Float64 => Column::Float64(array.as_primitive()),
            _ => return None,
        })
    }

    /// The value at `row` (which must be in bounds).
    #[inline]
    pub(crate) fn cell(&self, row: usize) -> Cell<'a> {
        match *self {
            Column::Null => Cell::Null,
            Column::Utf8(array) => text(array, row, || array.value(row)),
            Column::LargeUtf8(array) => text(array, row, || array.value(row)),
            Column::Utf8View(array) => text(array, row, || array.value(row)),
            Column::Int8(array) => primitive(array, row, |v| Cell::Signed(v.into())),
            Column::Int16(array) => primitive(array, row, |v| Cell::Signed(v.into())),
            Column::Int32(array) => primitive(array, row, |v| Cell::Signed(v.into())),
            Column::Int64(array) => primitive(array, row, Cell::Signed),
            Column::UInt8(array) => primitive(array, row, |v| Cell::Unsigned(v.into())),
            Column::UInt16(array) => primitive(array, row, |v| Cell::Unsigned(v.into())),
            Column::UInt32(array) => primitive(array, row, |v| Cell::Unsigned(v.into())),
            Column::UInt64(array) => primitive(array, row, Cell::Unsigned),
            Column::Boolean(array) if array.is_null(row) => Cell::Null,
            Column::Boolean(array) => Cell::Boolean(array.value(row)),
            Column::Float32(array) => primitive(array, row, Cell::Float32),
            Column::Float64(array) => primitive(array, row, Cell::Float64),
            Column::Rendered(cells) => Cell::Rendered(cells.get(row)),
        }
    }
}

/// The text at `row`, or `Cell::Null`.
#[inline(always)]
fn text<'a>(array: &impl Array, row: usize, value: impl FnOnce() -> &'a str) -> Cell<'a> {
    if array.is_null(row) { Cell::Null } else { Cell::Text(value().as_bytes()) }
}

/// Per-column scratch space for a dictionary column, reused from batch to batch so that a
/// dictionary costs no allocation once the buffers have grown.
///
/// `bytes[offsets[i]..offsets[i + 1]]` is entry `i` rendered in the output format; row `r`
/// shows entry `entries[r]`. Normally the entries are the dictionary values plus one extra
/// entry for a null key. When the dictionary has more values than the batch has rows (a large
/// shared dictionary sliced into a small batch), rendering every value would waste work, so
/// the rows' own values are rendered instead, one entry per row.
#[derive(Debug, Default)]
pub(crate) struct DictionaryCells {
    bytes: Vec<u8>,
    offsets: Vec<usize>,
    entries: Vec<usize>,
}

impl DictionaryCells {
    #[inline(always)]
    fn get(&self, row: usize) -> &[u8] {
        let entry = self.entries[row];
        &self.bytes[self.offsets[entry]..self.offsets[entry + 1]]
    }

    fn push_entry(&mut self, render: RenderCell, cell: Cell<'_>) {
        render(&mut self.bytes, cell);
        self.offsets.push(self.bytes.len());
    }

    /// Renders the dictionary array `array` for one batch. `None` if its value type is
    /// unsupported (its key type was checked by [`Kind::of`]).
    fn fill(&mut self, array: &dyn Array, render: RenderCell) -> Option<()> {
        let dictionary = array.as_any_dictionary();
        let values = Column::plain(dictionary.values().as_ref())?;
        let keys = dictionary.keys();
        let value_count = dictionary.values().len();
        self.bytes.clear();
        self.offsets.clear();
        self.offsets.push(0);
        self.entries.clear();
        if value_count <= keys.len() {
            for value in 0..value_count {
                self.push_entry(render, values.cell(value));
            }
            self.push_entry(render, Cell::Null);
            push_keys(keys, value_count, &mut self.entries)?;
        } else {
            push_keys(keys, value_count, &mut self.entries)?;
            for row in 0..keys.len() {
                let key = self.entries[row];
                let cell = if key == value_count { Cell::Null } else { values.cell(key) };
                self.push_entry(render, cell);
                self.entries[row] = row;
            }
        }
        Some(())
    }
}

/// Appends the keys of a dictionary as indexes, with `null_key` for a null key.
fn push_keys(keys: &dyn Array, null_key: usize, out: &mut Vec<usize>) -> Option<()> {
    fn push<T: ArrowPrimitiveType>(keys: &dyn Array, null_key: usize, out: &mut Vec<usize>) {
        let keys = keys.as_primitive::<T>();
        out.extend(keys.values().iter().map(|key| key.as_usize()));
        if let Some(nulls) = keys.nulls().filter(|nulls| nulls.null_count() > 0) {
            let start = out.len() - keys.len();
            for row in nulls.iter().enumerate().filter(|(_, valid)| !valid).map(|(row, _)| row) {
                out[start + row] = null_key;
            }
        }
    }
    match keys.data_type() {
        DataType::Int8 => push::<Int8Type>(keys, null_key, out),
        DataType::Int16 => push::<Int16Type>(keys, null_key, out),
        DataType::Int32 => push::<Int32Type>(keys, null_key, out),
        DataType::Int64 => push::<Int64Type>(keys, null_key, out),
        DataType::UInt8 => push::<UInt8Type>(keys, null_key, out),
        DataType::UInt16 => push::<UInt16Type>(keys, null_key, out),
        DataType::UInt32 => push::<UInt32Type>(keys, null_key, out),
        DataType::UInt64 => push::<UInt64Type>(keys, null_key, out),
        _ => return None,
    }
    Some(())
}

/// The fixed part of an encoder that knows the schema: column names and kinds, and the
/// dictionary scratch space.
#[derive(Debug)]
pub(crate) struct Columns {
    names: Vec<String>,
    types: Vec<DataType>,
    kinds: Vec<Kind>,
    dictionaries: Vec<DictionaryCells>,
}

impl Columns {
    /// Checks that every field of `schema` has a supported type.
    pub(crate) fn new(schema: &arrow::datatypes::Schema) -> Result<Columns, FormatError> {
        let mut columns =
            Columns { names: Vec::new(), types: Vec::new(), kinds: Vec::new(), dictionaries: Vec::new() };
        for field in schema.fields() {
            let kind = Kind::of(field.data_type()).ok_or_else(|| FormatError::UnsupportedType {
                column: field.name().clone(),
                data_type: field.data_type().clone(),
            })?;
            columns.names.push(field.name().clone());
            columns.types.push(field.data_type().clone());
            columns.kinds.push(kind);
            columns.dictionaries.push(DictionaryCells::default());
        }
        Ok(columns)
    }

    /// The column names, in output order.
    pub(crate) fn names(&self) -> impl Iterator<Item = &str> {
        self.names.iter().map(String::as_str)
    }

    /// Checks `batch` against the schema and wraps its columns, rendering dictionary columns
    /// with `render`. Nothing is written anywhere if this fails.
    pub(crate) fn prepare<'a>(
        &'a mut self,
        batch: &'a RecordBatch,
        render: RenderCell,
    ) -> Result<Vec<Column<'a>>, FormatError> {
        if batch.num_columns() != self.names.len() {
            return Err(FormatError::SchemaMismatch {
                expected: self.names.len(),
                found: batch.num_columns(),
            });
        }
        let unsupported = |name: &String, array: &dyn Array| FormatError::UnsupportedType {
            column: name.clone(),
            data_type: array.data_type().clone(),
        };
        for (((array, name), &kind), expected) in
            batch.columns().iter().zip(&self.names).zip(&self.kinds).zip(&self.types)
        {
            let found = Kind::of(array.data_type()).ok_or_else(|| unsupported(name, array))?;
            if !found.fits(kind) {
                return Err(FormatError::ColumnTypeMismatch {
                    column: name.clone(),
                    expected: expected.clone(),
                    found: array.data_type().clone(),
                });
            }
        }
        for ((array, dictionary), name) in batch.columns().iter().zip(&mut self.dictionaries).zip(&self.names)
        {
            if matches!(array.data_type(), DataType::Dictionary(..)) {
                dictionary.fill(array.as_ref(), render).ok_or_else(|| unsupported(name, array.as_ref()))?;
            }
        }
        let dictionaries: &'a [DictionaryCells] = &self.dictionaries;
        batch
            .columns()
            .iter()
            .zip(dictionaries)
            .zip(&self.names)
            .map(|((array, dictionary), name)| match array.data_type() {
                DataType::Dictionary(..) => Ok(Column::Rendered(dictionary)),
                _ => Column::plain(array.as_ref()).ok_or_else(|| unsupported(name, array.as_ref())),
            })
            .collect()
    }
}
