//! `parts_count`/`part_number`: a stable hash assigns each record to one part.
//!
//! The hash covers `error_timestamp`, `error_receive_timestamp`, `service_device_id` and
//! `error_id` (FNV-1a over their bytes, then a SplitMix64 finaliser). It depends on nothing
//! but the record's values, so the parts of an export are disjoint and together make the
//! whole export, whatever the order of execution and across processes and versions.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, UInt32Array};
use datafusion::arrow::datatypes::{DataType, Int64Type, UInt64Type};
use datafusion::common::{Result, exec_err};
use datafusion::logical_expr::{
    ColumnarValue, Expr, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility, col, lit,
};

use crate::privacy::PseudonymKey;
use crate::request::Parts;

pub use crate::schema::PART_KEY;

/// The predicate "this record belongs to part `parts.number` of `parts.count`". With a `key`
/// (a field policy hides one of [`PART_KEY`]), the part is a keyed hash of the record's hash,
/// so that a caller cannot test a guess of a hidden value against the parts.
pub fn part_predicate(parts: Parts, key: Option<Arc<PseudonymKey>>) -> Expr {
    let udf = ScalarUDF::new_from_impl(RecordPart::new(parts.count, key));
    udf.call(PART_KEY.iter().map(|f| col(f.name())).collect()).eq(lit(parts.number))
}

/// The part (0-based) of one record, computed exactly as the engine does; for tests and for
/// clients that want to check a split.
pub fn record_part(
    error_timestamp: Option<i64>,
    error_receive_timestamp: Option<i64>,
    service_device_id: Option<u64>,
    error_id: Option<&str>,
    parts_count: u32,
) -> u32 {
    (record_hash(error_timestamp, error_receive_timestamp, service_device_id, error_id)
        % u64::from(parts_count.max(1))) as u32
}

fn record_hash(
    error_timestamp: Option<i64>,
    error_receive_timestamp: Option<i64>,
    service_device_id: Option<u64>,
    error_id: Option<&str>,
) -> u64 {
    let mut h = Fnv::new();
    h.int(error_timestamp.map(|v| v as u64));
    h.int(error_receive_timestamp.map(|v| v as u64));
    h.int(service_device_id);
    h.text(error_id);
    finalise(h.0)
}

struct Fnv(u64);

impl Fnv {
    fn new() -> Fnv {
        Fnv(0xcbf2_9ce4_8422_2325)
    }

    fn bytes(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 ^= u64::from(b);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }

    fn int(&mut self, value: Option<u64>) {
        match value {
            Some(v) => {
                self.bytes(&[1]);
                self.bytes(&v.to_le_bytes());
            }
            None => self.bytes(&[0]),
        }
    }

    fn text(&mut self, value: Option<&str>) {
        match value {
            Some(s) => {
                self.bytes(&[1]);
                self.bytes(&(s.len() as u64).to_le_bytes());
                self.bytes(s.as_bytes());
            }
            None => self.bytes(&[0]),
        }
    }
}

fn finalise(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The scalar function `logs_record_part(error_timestamp, error_receive_timestamp,
/// service_device_id, error_id)` for a fixed number of parts.
#[derive(Debug, PartialEq, Eq, Hash)]
struct RecordPart {
    count: u32,
    key: Option<Arc<PseudonymKey>>,
    signature: Signature,
}

impl RecordPart {
    fn new(count: u32, key: Option<Arc<PseudonymKey>>) -> RecordPart {
        let types = PART_KEY.iter().map(|f| crate::schema::arrow_type(f.field_type())).collect();
        RecordPart { count, key, signature: Signature::exact(types, Volatility::Immutable) }
    }
}

impl ScalarUDFImpl for RecordPart {
    fn name(&self) -> &str {
        "logs_record_part"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::UInt32)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let [ts, rts, dev, id] = arrays.as_slice() else {
            return exec_err!("logs_record_part takes 4 arguments, got {}", arrays.len());
        };
        let parts = record_parts(ts, rts, dev, id, self.count, self.key.as_deref())?;
        Ok(ColumnarValue::Array(Arc::new(parts)))
    }
}

fn record_parts(
    ts: &ArrayRef,
    rts: &ArrayRef,
    dev: &ArrayRef,
    id: &ArrayRef,
    count: u32,
    key: Option<&PseudonymKey>,
) -> Result<UInt32Array> {
    let ts = ts.as_primitive::<Int64Type>();
    let rts = rts.as_primitive::<Int64Type>();
    let dev = dev.as_primitive::<UInt64Type>();
    let Some(id) = id.as_string_view_opt() else {
        return exec_err!("logs_record_part: error_id must be Utf8View, got {}", id.data_type());
    };
    let value = |a: &dyn Array, i: usize| a.is_valid(i);
    Ok((0..ts.len())
        .map(|i| {
            let hash = record_hash(
                value(ts, i).then(|| ts.value(i)),
                value(rts, i).then(|| rts.value(i)),
                value(dev, i).then(|| dev.value(i)),
                value(id, i).then(|| id.value(i)),
            );
            let hash = key.map_or(hash, |key| key.keyed_u64(b"logs-export part\0", &hash.to_le_bytes()));
            (hash % u64::from(count.max(1))) as u32
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::{Int64Array, StringViewArray, UInt64Array};

    #[test]
    fn the_hash_is_pinned() {
        // These values must never change: clients may have split exports with them.
        let pinned: Vec<u32> =
            (0..8).map(|i| record_part(Some(i), Some(i + 1), Some(i as u64), Some("e"), 7)).collect();
        assert_eq!(pinned, PINNED);
        assert_eq!(record_part(None, None, None, None, 1), 0);
    }

    const PINNED: [u32; 8] = [5, 4, 3, 6, 5, 5, 4, 5];

    #[test]
    fn parts_spread_evenly() {
        let mut counts = [0u32; 4];
        for i in 0..4000 {
            counts[record_part(Some(i), Some(i), Some(i as u64 * 31), Some("x"), 4) as usize] += 1;
        }
        assert!(counts.iter().all(|&c| (800..1200).contains(&c)), "{counts:?}");
    }

    #[test]
    fn array_form_matches_scalar_form() {
        let ts: ArrayRef = Arc::new(Int64Array::from(vec![Some(1), None, Some(3)]));
        let rts: ArrayRef = Arc::new(Int64Array::from(vec![Some(2), Some(2), None]));
        let dev: ArrayRef = Arc::new(UInt64Array::from(vec![Some(u64::MAX), None, Some(9)]));
        let id: ArrayRef =
            Arc::new(StringViewArray::from(vec![Some("a"), Some("a long error id value"), None]));
        let parts = record_parts(&ts, &rts, &dev, &id, 5, None).unwrap();
        assert_eq!(parts.value(0), record_part(Some(1), Some(2), Some(u64::MAX), Some("a"), 5));
        assert_eq!(parts.value(1), record_part(None, Some(2), None, Some("a long error id value"), 5));
        assert_eq!(parts.value(2), record_part(Some(3), None, Some(9), None, 5));
    }
}
