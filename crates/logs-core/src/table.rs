//! The table an export scans: exactly the files the catalog selected, no listing of its own.
//!
//! DataFusion's `ListingTable` would look every file up again (and treat a file that vanished
//! meanwhile as an empty folder); this provider hands the selected files, with the size and
//! modification time seen by the catalog, straight to a Parquet scan. A file that vanishes or
//! changes after selection then fails the scan instead of silently shrinking the export.

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
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::object_store::ObjectStoreUrl;
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown, TableType};
use datafusion::object_store::ObjectMeta;
use datafusion::object_store::path::Path as ObjectPath;
use datafusion::physical_plan::ExecutionPlan;

use crate::catalog::SelectedFile;
use crate::reader::{LocalFile, LocalReaderFactory};

/// A Parquet scan over a fixed list of local files, with the schema of the dataset contract.
#[derive(Debug)]
pub struct SelectedFiles {
    schema: SchemaRef,
    files: Vec<SelectedFile>,
    options: TableParquetOptions,
}

impl SelectedFiles {
    pub fn new(schema: SchemaRef, files: Vec<SelectedFile>, options: TableParquetOptions) -> SelectedFiles {
        SelectedFiles { schema, files, options }
    }

    fn partitioned_file(file: &SelectedFile) -> Result<PartitionedFile> {
        let location =
            ObjectPath::from_absolute_path(&file.path).map_err(|e| DataFusionError::External(e.into()))?;
        let meta = ObjectMeta {
            location,
            last_modified: file.modified,
            size: file.size,
            e_tag: None,
            version: None,
        };
        Ok(PartitionedFile::new_from_meta(meta)
            .with_extension(LocalFile { path: file.path.clone(), inode: file.inode }))
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
        let files = self.files.iter().map(Self::partitioned_file).collect::<Result<Vec<_>>>()?;
        let groups = FileGroup::new(files).split_files(state.config().target_partitions().max(1));
        let url = ObjectStoreUrl::local_filesystem();
        let runtime = state.runtime_env();
        let factory = LocalReaderFactory::new(
            runtime.object_store(&url)?,
            runtime.cache_manager.get_file_metadata_cache(),
        );
        let source = ParquetSource::new(TableSchema::from(self.schema.clone()))
            .with_table_parquet_options(self.options.clone())
            .with_parquet_file_reader_factory(Arc::new(factory));
        let config = FileScanConfigBuilder::new(url, Arc::new(source))
            .with_file_groups(groups)
            .with_projection_indices(projection.cloned())?
            .with_limit(limit)
            .build();
        Ok(DataSourceExec::from_data_source(config))
    }
}
