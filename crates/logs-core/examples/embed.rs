//! Embedding the engine: one export of the bundled testdata, as CSV on stdout.
//!
//! cargo run -p logs-core --example embed -- 'application_id=1001&date_since=2026-10-01&date_until=2026-10-07&fields=error_id,os_name&os_name=ios&limit=5'

use futures::StreamExt;
use logs_core::{Engine, EngineConfig};
use logs_format::{Encoder, EncoderOptions, Format};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let query = std::env::args().nth(1).unwrap_or_else(|| {
        "application_id=1001&date_since=2026-10-01&date_until=2026-10-07&fields=error_id,os_name&os_name=ios&limit=5"
            .into()
    });
    let engine = Engine::open("testdata/dataset", EngineConfig::default())?;
    let request = engine.parse_request(&query)?;
    let mut export = engine.export(&request).await?; // unreadable files are found here
    let options = EncoderOptions::default().with_bom(request.use_utf8_bom());
    let mut encoder = Encoder::new(Format::Csv, std::io::stdout(), &export.schema(), options)?;
    while let Some(batch) = export.next().await {
        encoder.write_batch(&batch?)?; // one batch at a time: memory stays bounded
    }
    encoder.finish()?;
    Ok(())
}
