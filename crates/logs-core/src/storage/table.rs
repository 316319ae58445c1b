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
        let groups = groups_by_bytes(&self.files, state.config().target_partitions().max(1));
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

/// `files` in at most `n` scan partitions of about the same bytes each: a run of files in
/// path order each (a date folder's files stay together), so that many small files make a
/// few partitions of many files rather than a task each, and a partition of large files no
/// more work than one of small ones.
fn groups_by_bytes(files: &[SelectedFile], n: usize) -> Vec<FileGroup> {
    let mut files: Vec<&SelectedFile> = files.iter().collect();
    files.sort_by(|a, b| a.object.location.cmp(&b.object.location));
    let total: u64 = files.iter().map(|f| f.object.size).sum();
    let mut groups = Vec::with_capacity(n);
    let mut group = Vec::new();
    let mut taken = 0u64;
    for file in files {
        group.push(PartitionedFile::new_from_meta(file.object.clone()));
        taken += file.object.size;
        // The group closes once it holds its share of the bytes (the last takes the rest).
        let share = total.saturating_mul(groups.len() as u64 + 1) / n as u64;
        if taken >= share && groups.len() + 1 < n {
            groups.push(FileGroup::new(std::mem::take(&mut group)));
        }
    }
    if !group.is_empty() {
        groups.push(FileGroup::new(group));
    }
    groups
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

    fn file(name: &str, size: u64) -> SelectedFile {
        SelectedFile {
            name: name.to_owned(),
            object: object_store::ObjectMeta {
                location: name.into(),
                last_modified: chrono::DateTime::UNIX_EPOCH,
                size,
                e_tag: None,
                version: None,
            },
            rows: 1,
            row_groups: 1,
            all_in_range: true,
            prefetched: Default::default(),
            row_group_spans: Arc::from([]),
        }
    }

    fn names_and_bytes(groups: &[FileGroup]) -> Vec<(Vec<String>, u64)> {
        let group = |g: &FileGroup| {
            let names = g.iter().map(|f| f.object_meta.location.to_string()).collect();
            (names, g.iter().map(|f| f.object_meta.size).sum())
        };
        groups.iter().map(group).collect()
    }

    #[test]
    fn files_are_grouped_in_path_order_by_bytes() {
        // A large file and many small ones: the large one makes a partition of its own.
        let mut files = vec![file("d1/big", 1000)];
        files.extend((0..10).map(|i| file(&format!("d2/small-{i}"), 100)));
        files.reverse();
        let groups = names_and_bytes(&groups_by_bytes(&files, 2));
        assert_eq!(groups.len(), 2);
        assert_eq!(groups[0], (vec!["d1/big".to_owned()], 1000));
        assert_eq!(groups[1].0.len(), 10);
        assert_eq!(groups[1].0[0], "d2/small-0");
        // Equal files: equal groups; never more groups than files, nor than asked.
        let files: Vec<_> = (0..12).map(|i| file(&format!("f{i:02}"), 10)).collect();
        let bytes: Vec<u64> = names_and_bytes(&groups_by_bytes(&files, 4)).iter().map(|g| g.1).collect();
        assert_eq!(bytes, [30, 30, 30, 30]);
        assert_eq!(groups_by_bytes(&files[..3], 8).len(), 3);
        assert!(groups_by_bytes(&[], 4).is_empty());
        let one = groups_by_bytes(&files, 1);
        assert_eq!(one.len(), 1);
        assert_eq!(one[0].len(), 12);
    }

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
