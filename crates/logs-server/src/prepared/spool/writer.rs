//! Writing one export's copies, plain and (unless the format is not worth it) gzip, hashing
//! them.

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
    /// Starts writing the copies of export `key` by `job`: the plain one, and a gzip one at
    /// `gzip_level` unless that is `None`.
    pub fn writer(&self, key: &str, job: &str, extension: &str, gzip_level: Option<u32>) -> SpoolWriter {
        let plain = self.path(&copy_name(key, job, extension, false));
        let gzip = gzip_level.map(|level| GzipCopy {
            writer: BufWriter::with_capacity(
                Arc::clone(&self.store),
                self.path(&copy_name(key, job, extension, true)),
                WRITE_BUFFER,
            ),
            encoder: GzEncoder::new(Vec::new(), Compression::new(level)),
            sha: Sha256::new(),
            bytes: 0,
        });
        SpoolWriter {
            plain: BufWriter::with_capacity(Arc::clone(&self.store), plain, WRITE_BUFFER),
            plain_sha: Sha256::new(),
            plain_bytes: 0,
            gzip,
        }
    }
}

/// Writes the copies of one export, hashing them.
#[derive(Debug)]
pub struct SpoolWriter {
    plain: BufWriter,
    plain_sha: Sha256,
    plain_bytes: u64,
    gzip: Option<GzipCopy>,
}

/// The gzip copy being written.
#[derive(Debug)]
struct GzipCopy {
    writer: BufWriter,
    encoder: GzEncoder<Vec<u8>>,
    sha: Sha256,
    bytes: u64,
}

impl GzipCopy {
    async fn put(&mut self, compressed: Vec<u8>) -> Result<(), SpoolError> {
        if compressed.is_empty() {
            return Ok(());
        }
        self.sha.update(&compressed);
        self.bytes += compressed.len() as u64;
        self.writer.put(Bytes::from(compressed)).await.map_err(SpoolError::store("write"))
    }
}

impl SpoolWriter {
    /// Writes `chunk` to the copies, after reserving room for them in `spool`; the bytes
    /// reserved.
    pub async fn write(
        &mut self,
        spool: &Spool,
        chunk: Bytes,
        retry_after: Duration,
    ) -> Result<u64, SpoolError> {
        let compressed = match &mut self.gzip {
            Some(gzip) => {
                gzip.encoder.write_all(&chunk).map_err(SpoolError::Gzip)?;
                std::mem::take(gzip.encoder.get_mut())
            }
            None => Vec::new(),
        };
        let added = chunk.len() as u64 + compressed.len() as u64;
        spool.reserve(added, retry_after).await?;
        self.plain_sha.update(&chunk);
        self.plain_bytes += chunk.len() as u64;
        self.plain.put(chunk).await.map_err(SpoolError::store("write"))?;
        if let Some(gzip) = &mut self.gzip {
            gzip.put(compressed).await?;
        }
        Ok(added)
    }

    /// Bytes of the plain copy so far.
    pub fn plain_bytes(&self) -> u64 {
        self.plain_bytes
    }

    /// Completes the copies; their sizes and hashes.
    pub async fn finish(mut self) -> Result<(Representation, Option<Representation>), SpoolError> {
        let gzip = match self.gzip.take() {
            Some(mut gzip) => {
                let encoder =
                    std::mem::replace(&mut gzip.encoder, GzEncoder::new(Vec::new(), Compression::fast()));
                let tail = encoder.finish().map_err(SpoolError::Gzip)?;
                gzip.put(tail).await?;
                gzip.writer.shutdown().await.map_err(|source| SpoolError::Io { action: "write", source })?;
                Some(Representation { bytes: gzip.bytes, sha256: hex::encode(gzip.sha.finalize_reset()) })
            }
            None => None,
        };
        self.plain.shutdown().await.map_err(|source| SpoolError::Io { action: "write", source })?;
        let plain =
            Representation { bytes: self.plain_bytes, sha256: hex::encode(self.plain_sha.finalize_reset()) };
        Ok((plain, gzip))
    }

    /// Abandons the copies: nothing of them stays.
    pub async fn abort(mut self) {
        let _ = self.plain.abort().await;
        if let Some(gzip) = &mut self.gzip {
            let _ = gzip.writer.abort().await;
        }
    }
}
