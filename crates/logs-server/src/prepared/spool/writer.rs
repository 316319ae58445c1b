//! Writing one export's two copies, plain and gzip, hashing both.

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use flate2::Compression;
use flate2::write::GzEncoder;
use logs_core::object_store::buffered::BufWriter;
use sha2::{Digest, Sha256};
use tokio::io::AsyncWriteExt;

use super::error::SpoolError;
use super::manifest::{Representation, copy_name};
use super::store::Spool;

/// Bytes each copy buffers before its upload starts (and the size of an upload's parts).
const WRITE_BUFFER: usize = 8 * 1024 * 1024;

impl Spool {
    /// Starts writing the copies of export `key` by `job`.
    pub fn writer(&self, key: &str, job: &str, extension: &str, gzip_level: u32) -> SpoolWriter {
        let plain = self.path(&copy_name(key, job, extension, false));
        let gzip = self.path(&copy_name(key, job, extension, true));
        SpoolWriter {
            plain: BufWriter::with_capacity(Arc::clone(&self.store), plain, WRITE_BUFFER),
            gzip: BufWriter::with_capacity(Arc::clone(&self.store), gzip, WRITE_BUFFER),
            encoder: GzEncoder::new(Vec::new(), Compression::new(gzip_level)),
            plain_sha: Sha256::new(),
            gzip_sha: Sha256::new(),
            plain_bytes: 0,
            gzip_bytes: 0,
        }
    }
}

/// Writes the two copies of one export, hashing both.
#[derive(Debug)]
pub struct SpoolWriter {
    plain: BufWriter,
    gzip: BufWriter,
    encoder: GzEncoder<Vec<u8>>,
    plain_sha: Sha256,
    gzip_sha: Sha256,
    plain_bytes: u64,
    gzip_bytes: u64,
}

impl SpoolWriter {
    /// Writes `chunk` to both copies, after reserving room for them in `spool`; the bytes
    /// reserved.
    pub async fn write(
        &mut self,
        spool: &Spool,
        chunk: Bytes,
        retry_after: Duration,
    ) -> Result<u64, SpoolError> {
        self.encoder.write_all(&chunk).map_err(SpoolError::Gzip)?;
        let compressed = std::mem::take(self.encoder.get_mut());
        let added = chunk.len() as u64 + compressed.len() as u64;
        spool.reserve(added, retry_after).await?;
        self.plain_sha.update(&chunk);
        self.plain_bytes += chunk.len() as u64;
        self.plain.put(chunk).await.map_err(SpoolError::store("write"))?;
        self.put_gzip(compressed).await?;
        Ok(added)
    }

    /// Bytes of the plain copy so far.
    pub fn plain_bytes(&self) -> u64 {
        self.plain_bytes
    }

    /// Completes both copies; their sizes and hashes.
    pub async fn finish(mut self) -> Result<(Representation, Representation), SpoolError> {
        let encoder = std::mem::replace(&mut self.encoder, GzEncoder::new(Vec::new(), Compression::fast()));
        let tail = encoder.finish().map_err(SpoolError::Gzip)?;
        self.put_gzip(tail).await?;
        self.plain.shutdown().await.map_err(|source| SpoolError::Io { action: "write", source })?;
        self.gzip.shutdown().await.map_err(|source| SpoolError::Io { action: "write", source })?;
        let plain =
            Representation { bytes: self.plain_bytes, sha256: hex::encode(self.plain_sha.finalize_reset()) };
        let gzip =
            Representation { bytes: self.gzip_bytes, sha256: hex::encode(self.gzip_sha.finalize_reset()) };
        Ok((plain, gzip))
    }

    /// Abandons both copies: nothing of them stays.
    pub async fn abort(mut self) {
        let _ = self.plain.abort().await;
        let _ = self.gzip.abort().await;
    }

    async fn put_gzip(&mut self, compressed: Vec<u8>) -> Result<(), SpoolError> {
        if compressed.is_empty() {
            return Ok(());
        }
        self.gzip_sha.update(&compressed);
        self.gzip_bytes += compressed.len() as u64;
        self.gzip.put(Bytes::from(compressed)).await.map_err(SpoolError::store("write"))
    }
}
