//! A validated request becomes a DataFusion logical plan: scan → filter → projection → limit.
//!
//! Built with `LogicalPlanBuilder` and `Expr`, never SQL text, so no value from a request can
//! change the shape of the query.

use std::sync::Arc;

use datafusion::arrow::datatypes::Schema;
use datafusion::common::ScalarValue;
use datafusion::error::Result;
use datafusion::logical_expr::utils::conjunction;
use datafusion::logical_expr::{Expr, LogicalPlan, LogicalPlanBuilder, TableSource, cast, col, lit};

use crate::aliases::ColumnSource;
use crate::part::{PART_KEY, part_predicate};
use crate::privacy::Treatment;
use crate::privacy::kernels::treat;
use crate::request::{Column, ExportRequest, FilterValue};

/// The name of the scanned table in plans and their explanations.
pub const TABLE_NAME: &str = "errors";

/// Whether the plan tests each row against the request's time range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RangeTest {
    /// Every row is tested.
    PerRow,
    /// None is: the footers of the files scanned prove every row inside the range (see
    /// [`crate::FileSelection::all_in_range`]). Saves decoding the timestamp column.
    ProvenByFooters,
}

/// The plan of `request` over `table`, whose schema is [`crate::schema::file_schema`] or
/// [`crate::schema::file_schema_copying_texts`] (the table holds one application's files, so
/// `application_id` is a constant of the request). The output has the types of
/// [`crate::schema::record_schema`] either way.
pub fn build_plan(
    request: &ExportRequest,
    table: Arc<dyn TableSource>,
    range: RangeTest,
) -> Result<LogicalPlan> {
    let scanned = table.schema();
    let mut builder = LogicalPlanBuilder::scan(TABLE_NAME, table, None)?;
    if let Some(predicate) = build_predicate(request, range) {
        builder = builder.filter(predicate)?;
    }
    let columns =
        request.columns().iter().map(|c| column_expr(request, c, &scanned)).collect::<Result<Vec<_>>>()?;
    builder = builder.project(columns)?;
    if let Some(limit) = request.limit() {
        // DataFusion keeps a fetch as an i64: any limit from 2^63 up means "all rows".
        let fetch = usize::try_from(limit.min(i64::MAX as u64)).unwrap_or(usize::MAX);
        builder = builder.limit(0, Some(fetch))?;
    }
    builder.build()
}

/// The conjunction of the date range (unless proven), the equality filters and the part, if any.
pub fn build_predicate(request: &ExportRequest, range_test: RangeTest) -> Option<Expr> {
    let mut predicates = Vec::new();
    if range_test == RangeTest::PerRow {
        let range = request.range();
        let time = col(request.date_dimension().timestamp_field().name());
        predicates.extend([time.clone().gt_eq(lit(range.since)), time.lt_eq(lit(range.until))]);
    }
    let privacy = request.privacy();
    predicates.extend(request.filters().iter().map(|filter| {
        let value = match &filter.value {
            FilterValue::String(s) => lit(ScalarValue::Utf8View(Some(s.clone()))),
            FilterValue::Int64(v) => lit(*v),
            FilterValue::UInt64(v) => lit(*v),
        };
        // A filter on a treated field compares the value as the caller sees it.
        let field = filter.field;
        if privacy.treatment(field) == Treatment::Allow {
            col(field.name()).eq(value)
        } else {
            let output = crate::schema::arrow_type(field.field_type());
            let column = if field.field_type().is_integer() {
                col(field.name())
            } else {
                cast(col(field.name()), output)
            };
            treat(privacy, field, column).eq(value)
        }
    }));
    // A part computed from hidden values is keyed, so that it tells nothing about them.
    let keyed = PART_KEY.iter().any(|f| privacy.treatment(*f) != Treatment::Allow);
    predicates
        .extend(request.parts().map(|parts| part_predicate(parts, privacy.key().filter(|_| keyed).cloned())));
    conjunction(predicates)
}

/// The expression of one output column, named as the request named it.
fn column_expr(request: &ExportRequest, column: &Column, scanned: &Schema) -> Result<Expr> {
    let output = crate::schema::arrow_type(column.source.field_type());
    let field = match column.source {
        ColumnSource::Field(field) => field,
        ColumnSource::Absent(_) => return Ok(lit(ScalarValue::try_from(&output)?).alias(&column.name)),
    };
    let expr = if field.is_partition() {
        lit(request.application_id())
    } else {
        match scanned.field_with_name(field.name()) {
            Ok(f) if *f.data_type() != output => cast(col(field.name()), output),
            _ => col(field.name()),
        }
    };
    let expr = treat(request.privacy(), field, expr);
    Ok(if matches!(expr, Expr::Column(_)) && column.name == field.name() {
        expr
    } else {
        expr.alias(&column.name)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::RequestPolicy;
    use crate::schema::file_schema;
    use datafusion::arrow::datatypes::DataType;
    use datafusion::datasource::empty::EmptyTable;
    use datafusion::datasource::provider_as_source;

    fn plan(query: &str) -> LogicalPlan {
        plan_with(query, RangeTest::PerRow)
    }

    fn plan_with(query: &str, range: RangeTest) -> LogicalPlan {
        let request = ExportRequest::parse(query, &RequestPolicy::default()).unwrap();
        build_plan(&request, provider_as_source(Arc::new(EmptyTable::new(file_schema()))), range).unwrap()
    }

    #[test]
    fn plan_has_range_filters_projection_and_limit() {
        let plan = plan(
            "application_id=7&date_since=2026-10-01&date_until=2026-10-01&fields=os_name,application_id,mcc\
             &os_name=ios&mcc=250&limit=10",
        );
        let text = plan.display_indent().to_string();
        let expected = "Limit: skip=0, fetch=10\
            \n  Projection: errors.os_name, Int64(7) AS application_id, errors.mcc\
            \n    Filter: errors.error_timestamp >= Int64(1790812800) AND errors.error_timestamp <= Int64(1790899199) \
            AND errors.os_name = Utf8View(\"ios\") AND errors.mcc = Int64(250)\
            \n      TableScan: errors";
        assert_eq!(text, expected);
        let names: Vec<_> = plan.schema().fields().iter().map(|f| f.name().clone()).collect();
        assert_eq!(names, ["os_name", "application_id", "mcc"]);
    }

    #[test]
    fn receive_dimension_filters_the_receive_timestamp_and_parts_add_the_hash() {
        let plan = plan(
            "application_id=7&date_since=2026-10-01&date_until=2026-10-02&fields=error\
             &date_dimension=receive&parts_count=3&part_number=1",
        );
        let text = plan.display_indent().to_string();
        assert!(text.contains("errors.error_receive_timestamp >= Int64(1790812800)"), "{text}");
        assert!(!text.contains("errors.error_timestamp >="), "{text}");
        assert!(
            text.contains(
                "logs_record_part(errors.error_timestamp, errors.error_receive_timestamp, \
                 errors.service_device_id, errors.error_id) = UInt32(1)"
            ),
            "{text}"
        );
        assert!(!text.contains("Limit"), "{text}");
    }

    #[test]
    fn hostile_filter_values_stay_literals() {
        let plan = plan(
            "application_id=7&date_since=2026-10-01&date_until=2026-10-02&fields=error\
             &city=x%27)%20OR%201%3D1%20--",
        );
        let text = plan.display_indent().to_string();
        assert!(text.contains("errors.city = Utf8View(\"x') OR 1=1 --\")"), "{text}");
    }

    #[test]
    fn a_range_proven_by_the_footers_is_not_tested_per_row() {
        let query = "application_id=7&date_since=2026-10-01&date_until=2026-10-01&fields=os_name&os_name=ios";
        let text = plan_with(query, RangeTest::ProvenByFooters).display_indent().to_string();
        let expected = "Projection: errors.os_name\
            \n  Filter: errors.os_name = Utf8View(\"ios\")\
            \n    TableScan: errors";
        assert_eq!(text, expected);
        let text = plan_with(
            "application_id=7&date_since=2026-10-01&date_until=2026-10-01&fields=os_name",
            RangeTest::ProvenByFooters,
        )
        .display_indent()
        .to_string();
        assert_eq!(text, "Projection: errors.os_name\n  TableScan: errors");
    }

    #[test]
    fn texts_scanned_as_utf8_are_cast_back_to_the_output_type() {
        let request = ExportRequest::parse(
            "application_id=7&date_since=2026-10-01&date_until=2026-10-01&fields=error,os_name,error_json&os_name=ios",
            &RequestPolicy::default(),
        )
        .unwrap();
        let table = provider_as_source(Arc::new(EmptyTable::new(crate::schema::file_schema_copying_texts())));
        let plan = build_plan(&request, table, RangeTest::PerRow).unwrap();
        let text = plan.display_indent().to_string();
        assert!(text.contains("CAST(errors.error AS Utf8View) AS error, errors.os_name, CAST(errors.error_json AS Utf8View) AS error_json"), "{text}");
        let types: Vec<_> = plan.schema().fields().iter().map(|f| f.data_type().clone()).collect();
        assert_eq!(types, vec![DataType::Utf8View; 3]);
        // Scanned as the output type: no cast.
        assert!(
            !super::tests::plan("application_id=7&date_since=2026-10-01&date_until=2026-10-01&fields=error")
                .display_indent()
                .to_string()
                .contains("CAST")
        );
    }
}
