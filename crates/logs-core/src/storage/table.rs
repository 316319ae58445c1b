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
use datafusion::common::config::TableParquetOptions;
use datafusion::datasource::TableProvider;
use datafusion::datasource::listing::PartitionedFile;
use datafusion::datasource::physical_plan::parquet::source::ParquetSource;
use datafusion::datasource::physical_plan::{FileGroup, FileScanConfigBuilder};
use datafusion::datasource::source::DataSourceExec;
use datafusion::datasource::table_schema::TableSchema;
use datafusion::error::Result;
use datafusion::execution::object_store::ObjectStoreUrl;
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown, TableType};
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
        _filters: &[Expr],
        limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let files = self.files.iter().map(|f| PartitionedFile::new_from_meta(f.object.clone())).collect();
        let groups = FileGroup::new(files).split_files(state.config().target_partitions().max(1));
        let columns = match projection {
            Some(indices) => indices.iter().map(|&i| self.schema.field(i).name().clone()).collect(),
            None => self.schema.fields().iter().map(|field| field.name().clone()).collect(),
        };
        let readers = Arc::new(self.readers.reading(columns));
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
