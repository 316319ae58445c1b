//! The table an export scans: exactly the files the catalog selected, no listing of its own.
//!
//! DataFusion's `ListingTable` would list every file again (and treat a file that vanished
//! meanwhile as an empty folder); this provider hands the selected files, as the catalog listed
//! them, straight to a Parquet scan whose reader (`reader.rs`) reads them through the storage
//! layer. A file that vanishes or changes after selection then fails the scan instead of
//! silently shrinking the export.

use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::catalog::Session;
use datafusion::common::ScalarValue;
use datafusion::common::config::TableParquetOptions;
use datafusion::datasource::TableProvider;
use datafusion::datasource::listing::PartitionedFile;
use datafusion::datasource::physical_plan::parquet::source::ParquetSource;
use datafusion::datasource::physical_plan::{FileGroup, FileScanConfigBuilder};
use datafusion::datasource::source::DataSourceExec;
use datafusion::datasource::table_schema::TableSchema;
use datafusion::error::Result;
use datafusion::execution::object_store::ObjectStoreUrl;
use datafusion::logical_expr::{BinaryExpr, Cast, Expr, Operator, TableProviderFilterPushDown, TableType};
use datafusion::physical_plan::ExecutionPlan;

use crate::storage::catalog::SelectedFile;
use crate::storage::reader::ScanReaders;

/// A Parquet scan over a fixed list of selected files, with the schema of the dataset contract.
#[derive(Debug)]
pub(crate) struct SelectedFiles {
    schema: SchemaRef,
    files: Vec<SelectedFile>,
    options: TableParquetOptions,
    /// The store's URL as registered with DataFusion's runtime.
    url: ObjectStoreUrl,
    /// The readers of the selected files, given the columns of each scan.
    readers: ScanReaders,
}

impl SelectedFiles {
    pub(crate) fn new(
        schema: SchemaRef,
        files: Vec<SelectedFile>,
        options: TableParquetOptions,
        url: ObjectStoreUrl,
        readers: ScanReaders,
    ) -> SelectedFiles {
        SelectedFiles { schema, files, options, url, readers }
    }
}

#[async_trait]
impl TableProvider for SelectedFiles {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    /// Filters stay in the plan (DataFusion pushes them into the Parquet scan for pruning and
    /// late materialisation, and still applies them to every row).
    fn supports_filters_pushdown(&self, filters: &[&Expr]) -> Result<Vec<TableProviderFilterPushDown>> {
        Ok(vec![TableProviderFilterPushDown::Inexact; filters.len()])
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let files = self.files.iter().map(|f| PartitionedFile::new_from_meta(f.object.clone())).collect();
        let groups = FileGroup::new(files).split_files(state.config().target_partitions().max(1));
        let columns = match projection {
            Some(indices) => indices.iter().map(|&i| self.schema.field(i).name().clone()).collect(),
            None => self.schema.fields().iter().map(|field| field.name().clone()).collect(),
        };
        let readers = Arc::new(self.readers.reading(columns).selecting(text_equalities(filters)));
        let source = ParquetSource::new(TableSchema::from(self.schema.clone()))
            .with_table_parquet_options(self.options.clone())
            .with_parquet_file_reader_factory(readers);
        let config = FileScanConfigBuilder::new(self.url.clone(), Arc::new(source))
            .with_file_groups(groups)
            .with_projection_indices(projection.cloned())?
            .with_limit(limit)
            .build();
        Ok(DataSourceExec::from_data_source(config))
    }
}

/// The filters of the form `column = 'text'` among `filters` (each one a conjunct of the
/// scan's predicate), as column name and value.
fn text_equalities(filters: &[Expr]) -> Vec<(String, String)> {
    fn column(expr: &Expr) -> Option<String> {
        match expr {
            Expr::Column(c) => Some(c.name.clone()),
            Expr::Cast(Cast { expr, .. }) => column(expr),
            _ => None,
        }
    }
    fn text(expr: &Expr) -> Option<String> {
        match expr {
            Expr::Literal(
                ScalarValue::Utf8(Some(s)) | ScalarValue::Utf8View(Some(s)) | ScalarValue::LargeUtf8(Some(s)),
                _,
            ) => Some(s.clone()),
            _ => None,
        }
    }
    filters
        .iter()
        .filter_map(|filter| match filter {
            Expr::BinaryExpr(BinaryExpr { left, op: Operator::Eq, right }) => {
                Some((column(left).or_else(|| column(right))?, text(right).or_else(|| text(left))?))
            }
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::datatypes::DataType;
    use datafusion::logical_expr::{cast, col, lit};

    use super::*;

    #[test]
    fn only_equalities_of_a_column_and_a_text_are_taken() {
        let text = |s: &str| lit(ScalarValue::Utf8View(Some(s.to_owned())));
        let filters = [
            col("os_name").eq(text("ios")),
            cast(col("city"), DataType::Utf8View).eq(lit(ScalarValue::Utf8(Some("Rome".into())))),
            text("x").eq(col("error_id")),
            col("mcc").eq(lit(250i64)),
            col("city").eq(col("os_name")),
            col("city").not_eq(text("Rome")),
            col("city").eq(text("Rome")).or(col("city").eq(text("Oslo"))),
            col("os_name").eq(lit(ScalarValue::Utf8View(None))),
        ];
        let taken: Vec<(String, String)> = text_equalities(&filters);
        let expected = [("os_name", "ios"), ("city", "Rome"), ("error_id", "x")];
        assert_eq!(taken, expected.map(|(c, v)| (c.to_owned(), v.to_owned())));
    }
}
