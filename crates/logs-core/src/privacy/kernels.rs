//! The treatments as scalar functions over whole Arrow arrays, for the plan: `logs_pseudonymise`,
//! `logs_truncate_ip`, `logs_coarsen` and `logs_scrub`. Each keeps nulls null and allocates per
//! batch, not per row. Their names show in `--explain`; their keys and patterns never do.

use std::fmt::Write;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, Int64Array, StringViewBuilder};
use datafusion::arrow::compute::{cast, interleave};
use datafusion::arrow::datatypes::{DataType, Int64Type, UInt64Type};
use datafusion::common::{Result, ScalarValue, exec_err};
use datafusion::logical_expr::{
    ColumnarValue, Expr, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility, lit,
};

use super::{Coarsening, Privacy, PseudonymKey, Scrubber, Treatment};
use crate::schema::Field;

/// `expr` (the values of `field`, in the output type) as `privacy` lets the caller see them;
/// `expr` itself when the field is allowed (or denied: validation refused it before).
pub fn treat(privacy: &Privacy, field: Field, expr: Expr) -> Expr {
    let policy = privacy.policy();
    let kind = match privacy.treatment(field) {
        Treatment::Allow | Treatment::Deny => return expr,
        Treatment::Pseudonymise => match privacy.key() {
            Some(key) => Kind::Pseudonymise(Arc::clone(key)),
            // `Privacy::new` refuses a pseudonymising policy without a key; were one to slip
            // through, the column is null, never the stored values.
            None => return lit(ScalarValue::Utf8View(None)),
        },
        Treatment::Truncate => Kind::Truncate { ipv4: policy.ipv4_prefix(), ipv6: policy.ipv6_prefix() },
        Treatment::Coarsen => Kind::Coarsen(policy.coarsening()),
        Treatment::Scrub => Kind::Scrub(Arc::clone(privacy.scrubber())),
    };
    ScalarUDF::new_from_impl(Treat { kind, signature: Signature::any(1, Volatility::Immutable) })
        .call(vec![expr])
}

#[derive(Debug, PartialEq, Eq, Hash)]
enum Kind {
    Pseudonymise(Arc<PseudonymKey>),
    Truncate { ipv4: u8, ipv6: u8 },
    Coarsen(Coarsening),
    Scrub(Arc<Scrubber>),
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct Treat {
    kind: Kind,
    signature: Signature,
}

impl ScalarUDFImpl for Treat {
    fn name(&self) -> &str {
        match self.kind {
            Kind::Pseudonymise(_) => "logs_pseudonymise",
            Kind::Truncate { .. } => "logs_truncate_ip",
            Kind::Coarsen(Coarsening::Hour) => "logs_coarsen_to_hour",
            Kind::Coarsen(Coarsening::Day) => "logs_coarsen_to_day",
            Kind::Scrub(_) => "logs_scrub",
        }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        Ok(match (&self.kind, arg_types.first()) {
            (Kind::Coarsen(_), Some(DataType::Int64)) => DataType::Int64,
            _ => DataType::Utf8View,
        })
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        // A constant (the partition's `application_id`) gives a constant.
        let scalar = matches!(args.args.as_slice(), [ColumnarValue::Scalar(_)]);
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let [input] = arrays.as_slice() else {
            return exec_err!("{} takes 1 argument, got {}", self.name(), arrays.len());
        };
        let output: ArrayRef = match &self.kind {
            Kind::Pseudonymise(key) => Arc::new(pseudonymise(key, input)?),
            Kind::Truncate { ipv4, ipv6 } => {
                Arc::new(map_text(input, |text, out| truncate_ip(text, *ipv4, *ipv6, out))?)
            }
            Kind::Coarsen(unit) if input.data_type() == &DataType::Int64 => {
                let unit = unit.seconds();
                Arc::new(input.as_primitive::<Int64Type>().unary::<_, Int64Type>(|t| t - t.rem_euclid(unit)))
                    as Arc<Int64Array>
            }
            Kind::Coarsen(unit) => Arc::new(map_text(input, |text, out| coarsen_datetime(text, *unit, out))?),
            Kind::Scrub(scrubber) => scrub(scrubber, input)?,
        };
        if scalar && output.len() == 1 {
            return Ok(ColumnarValue::Scalar(ScalarValue::try_from_array(&output, 0)?));
        }
        Ok(ColumnarValue::Array(output))
    }
}

/// The pseudonym of every value: an integer as its decimal text, a string as its bytes.
fn pseudonymise(key: &PseudonymKey, input: &ArrayRef) -> Result<datafusion::arrow::array::StringViewArray> {
    // One block for all the pseudonyms of the batch: 32 bytes each.
    let block = u32::try_from(input.len().max(1) * 32).unwrap_or(u32::MAX);
    let mut builder = StringViewBuilder::with_capacity(input.len()).with_fixed_block_size(block);
    let mut hex = [0u8; 32];
    let mut append = |builder: &mut StringViewBuilder, text: Option<&[u8]>| match text {
        Some(text) => {
            key.pseudonym_into(text, &mut hex);
            builder.append_value(std::str::from_utf8(&hex).expect("hex digits"));
        }
        None => builder.append_null(),
    };
    // An integer as its decimal text.
    let mut digits = itoa::Buffer::new();
    match input.data_type() {
        DataType::Int64 => {
            for v in input.as_primitive::<Int64Type>() {
                append(&mut builder, v.map(|v| digits.format(v).as_bytes()));
            }
        }
        DataType::UInt64 => {
            for v in input.as_primitive::<UInt64Type>() {
                append(&mut builder, v.map(|v| digits.format(v).as_bytes()));
            }
        }
        _ => {
            let texts = as_views(input)?;
            for v in texts.as_string_view() {
                append(&mut builder, v.map(str::as_bytes));
            }
        }
    }
    Ok(builder.finish())
}

/// Every text scrubbed. Most texts hold no secret: a batch without any is given back as it
/// came, and one with some keeps the unchanged texts where they are (their views point into
/// the input's buffers, which `interleave` takes as they are, without reading them again) and
/// adds the scrubbed ones.
fn scrub(scrubber: &Scrubber, input: &ArrayRef) -> Result<ArrayRef> {
    let texts = as_views(input)?;
    let array = texts.as_string_view();
    let mut scrubbed = StringViewBuilder::new();
    let mut from: Vec<(usize, usize)> = Vec::new();
    let mut count = 0;
    for (i, value) in array.iter().enumerate() {
        if let Some(text) = value
            && let std::borrow::Cow::Owned(clean) = scrubber.scrub(text)
        {
            if from.is_empty() {
                from = (0..array.len()).map(|k| (0, k)).collect();
            }
            from[i] = (1, count);
            scrubbed.append_value(clean);
            count += 1;
        }
    }
    if from.is_empty() {
        return Ok(texts);
    }
    Ok(interleave(&[array, &scrubbed.finish()], &from)?)
}

/// Text in, text out: `write(value, out)` fills `out` and says whether the value has one
/// (false: null).
fn map_text(
    input: &ArrayRef,
    mut write: impl FnMut(&str, &mut String) -> bool,
) -> Result<datafusion::arrow::array::StringViewArray> {
    let texts = as_views(input)?;
    let mut builder = StringViewBuilder::with_capacity(texts.len());
    let mut out = String::new();
    for value in texts.as_string_view() {
        match value {
            Some(text) => {
                out.clear();
                if write(text, &mut out) {
                    builder.append_value(&out);
                } else {
                    builder.append_null();
                }
            }
            None => builder.append_null(),
        }
    }
    Ok(builder.finish())
}

fn as_views(input: &ArrayRef) -> Result<ArrayRef> {
    match input.data_type() {
        DataType::Utf8View => Ok(Arc::clone(input)),
        DataType::Utf8 | DataType::LargeUtf8 => Ok(cast(input, &DataType::Utf8View)?),
        other => exec_err!("a text treatment got a column of type {other}"),
    }
}

/// An IP address cut to its prefix: IPv4 (and IPv4-mapped IPv6, which keeps its
/// `::ffff:a.b.c.d` form) to `ipv4` bits, other IPv6 to `ipv6` bits, in RFC 5952's form.
/// Anything else has no value.
pub fn truncate_ip(text: &str, ipv4: u8, ipv6: u8, out: &mut String) -> bool {
    let mask4 =
        |a: Ipv4Addr| Ipv4Addr::from(u32::from(a) & u32::MAX.checked_shl(32 - u32::from(ipv4)).unwrap_or(0));
    match text.parse::<IpAddr>() {
        Ok(IpAddr::V4(a)) => {
            let _ = write!(out, "{}", mask4(a));
            true
        }
        Ok(IpAddr::V6(a)) => {
            match a.to_ipv4_mapped() {
                Some(v4) => {
                    let _ = write!(out, "::ffff:{}", mask4(v4));
                }
                None => {
                    let mask = u128::MAX.checked_shl(128 - u32::from(ipv6)).unwrap_or(0);
                    let _ = write!(out, "{}", Ipv6Addr::from(u128::from(a) & mask));
                }
            }
            true
        }
        Err(_) => false,
    }
}

/// A `yyyy-mm-dd hh:mm:ss` text rounded down to the hour or day; anything else has no value.
pub fn coarsen_datetime(text: &str, unit: Coarsening, out: &mut String) -> bool {
    let b = text.as_bytes();
    let shaped = b.len() == 19
        && b.iter().enumerate().all(|(i, c)| match i {
            4 | 7 => *c == b'-',
            10 => *c == b' ',
            13 | 16 => *c == b':',
            _ => c.is_ascii_digit(),
        });
    if !shaped {
        return false;
    }
    match unit {
        Coarsening::Hour => {
            out.push_str(&text[..13]);
            out.push_str(":00:00");
        }
        Coarsening::Day => {
            out.push_str(&text[..10]);
            out.push_str(" 00:00:00");
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn truncated(text: &str, v4: u8, v6: u8) -> Option<String> {
        let mut out = String::new();
        truncate_ip(text, v4, v6, &mut out).then_some(out)
    }

    #[test]
    fn addresses_keep_their_prefix_in_rfc_5952_form() {
        assert_eq!(truncated("192.168.7.9", 24, 48).as_deref(), Some("192.168.7.0"));
        assert_eq!(truncated("192.168.7.9", 16, 48).as_deref(), Some("192.168.0.0"));
        assert_eq!(truncated("192.168.7.9", 0, 48).as_deref(), Some("0.0.0.0"));
        assert_eq!(truncated("::ffff:10.1.2.3", 24, 48).as_deref(), Some("::ffff:10.1.2.0"));
        assert_eq!(truncated("::FFFF:0a01:0203", 24, 48).as_deref(), Some("::ffff:10.1.2.0"));
        assert_eq!(truncated("2001:0DB8:1234:5678::1", 24, 48).as_deref(), Some("2001:db8:1234::"));
        assert_eq!(truncated("2001:db8:1234:5678::1", 24, 128).as_deref(), Some("2001:db8:1234:5678::1"));
        assert_eq!(truncated("::1", 24, 48).as_deref(), Some("::"));
        assert_eq!(truncated("not an address", 24, 48), None);
        assert_eq!(truncated("", 24, 48), None);
    }

    /// A batch with secrets keeps its clean texts and nulls where they were, short (inline)
    /// and long alike; one without is given back as it came.
    #[test]
    fn a_scrubbed_batch_keeps_every_other_value_in_place() {
        use datafusion::arrow::array::StringViewArray;
        let long_clean = "java.lang.IllegalStateException: at Main.run(Main.java:42)";
        let texts: ArrayRef = Arc::new(StringViewArray::from(vec![
            Some("mail bob@example.com now, then a long tail of text"),
            Some(long_clean),
            None,
            Some("ip 10.0.0.1"),
            Some("short"),
        ]));
        let out = scrub(&Scrubber::default(), &texts).unwrap();
        let out: Vec<Option<&str>> = out.as_string_view().iter().collect();
        assert_eq!(
            out,
            [
                Some("mail [email] now, then a long tail of text"),
                Some(long_clean),
                None,
                Some("ip [ip]"),
                Some("short")
            ]
        );
        let clean: ArrayRef = Arc::new(StringViewArray::from(vec![Some(long_clean), None]));
        assert!(Arc::ptr_eq(&scrub(&Scrubber::default(), &clean).unwrap(), &clean));
    }

    #[test]
    fn datetimes_round_down_and_odd_texts_have_no_value() {
        let mut out = String::new();
        assert!(coarsen_datetime("2026-10-01 12:34:56", Coarsening::Hour, &mut out));
        assert_eq!(out, "2026-10-01 12:00:00");
        out.clear();
        assert!(coarsen_datetime("2026-10-01 12:34:56", Coarsening::Day, &mut out));
        assert_eq!(out, "2026-10-01 00:00:00");
        assert!(!coarsen_datetime("2026-10-01T12:34:56", Coarsening::Day, &mut String::new()));
        assert!(!coarsen_datetime("2026-10-01", Coarsening::Day, &mut String::new()));
    }
}
