//! An order-independent digest of an export body, computed while it streams.
//!
//! Rows come in no guaranteed order with more than one partition, so a body is compared with
//! the expected one as a multiset of records: its length, its number of records, and two
//! wrapping sums of a 64-bit hash of each record. A CSV record ends at a line feed outside
//! double quotes (RFC 4180 quoting, as the encoder writes it); a JSON record is a line (the
//! encoder writes one record per line), without the comma that separates it from the next.
//! Nothing of the body is kept, so checking a body costs no memory.

use std::io::{self, Write};

use logs_format::Format;

/// What a body is compared by.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BodyDigest {
    pub bytes: u64,
    pub records: u64,
    sum: u64,
    mixed_sum: u64,
}

/// A [`Write`] that digests what is written to it.
#[derive(Debug)]
pub struct DigestWriter {
    format: Format,
    in_quotes: bool,
    /// A JSON comma not yet hashed: dropped if the line ends right after it.
    pending_comma: bool,
    hash: u64,
    record_open: bool,
    digest: BodyDigest,
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

impl DigestWriter {
    pub fn new(format: Format) -> DigestWriter {
        DigestWriter {
            format,
            in_quotes: false,
            pending_comma: false,
            hash: FNV_OFFSET,
            record_open: false,
            digest: BodyDigest::default(),
        }
    }

    /// Feeds `bytes` of the body.
    pub fn update(&mut self, bytes: &[u8]) {
        self.digest.bytes += bytes.len() as u64;
        for &b in bytes {
            let ends_record = b == b'\n' && !self.in_quotes;
            if ends_record {
                self.pending_comma = false;
                self.end_record();
                continue;
            }
            match self.format {
                Format::Csv => {
                    if b == b'"' {
                        self.in_quotes = !self.in_quotes;
                    }
                }
                Format::Json => {
                    if self.pending_comma {
                        self.pending_comma = false;
                        self.hash_byte(b',');
                    }
                    if b == b',' {
                        self.pending_comma = true;
                        self.record_open = true;
                        continue;
                    }
                }
                // A record per line, no quoting to follow (NDJSON escapes every line break
                // inside a value); the binary formats are no workload's and split anywhere.
                Format::Ndjson | Format::Parquet | Format::Arrow => {}
            }
            self.hash_byte(b);
        }
    }

    fn hash_byte(&mut self, b: u8) {
        self.record_open = true;
        self.hash = (self.hash ^ u64::from(b)).wrapping_mul(FNV_PRIME);
    }

    fn end_record(&mut self) {
        let h = self.hash;
        self.digest.records += 1;
        self.digest.sum = self.digest.sum.wrapping_add(h);
        // A second, differently mixed sum: two records swapping hash contributions between
        // them cannot keep both sums equal.
        self.digest.mixed_sum = self.digest.mixed_sum.wrapping_add(splitmix(h));
        self.hash = FNV_OFFSET;
        self.record_open = false;
    }

    /// The digest of everything fed; an unterminated last record counts as one.
    pub fn finish(mut self) -> BodyDigest {
        if self.pending_comma {
            self.hash_byte(b',');
        }
        if self.record_open {
            self.end_record();
        }
        self.digest
    }
}

impl Write for DigestWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.update(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn splitmix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The digest of a whole body at once.
#[cfg(test)]
fn digest_of(format: Format, body: &[u8]) -> BodyDigest {
    let mut writer = DigestWriter::new(format);
    writer.update(body);
    writer.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_records_in_any_order_and_any_chunking_are_equal() {
        let a = b"id,error\n1,\"multi\nline, with \"\"quotes\"\"\"\n2,plain\n";
        let b = b"id,error\n2,plain\n1,\"multi\nline, with \"\"quotes\"\"\"\n";
        assert_eq!(digest_of(Format::Csv, a), digest_of(Format::Csv, b));
        let mut chunked = DigestWriter::new(Format::Csv);
        for chunk in b.chunks(3) {
            chunked.update(chunk);
        }
        let d = chunked.finish();
        assert_eq!(d, digest_of(Format::Csv, a));
        assert_eq!(d.records, 3);
        assert_ne!(digest_of(Format::Csv, a), digest_of(Format::Csv, b"id,error\n2,plain\n1,x\n"));
        // A short body differs.
        assert_ne!(digest_of(Format::Csv, a), digest_of(Format::Csv, &a[..a.len() - 1]));
    }

    #[test]
    fn json_records_in_any_order_are_equal_whatever_the_last_comma() {
        let a = b"{\"data\":[\n{\"a\":1,\"b\":\"x,y\"},\n{\"a\":2,\"b\":null}\n]}\n";
        let b = b"{\"data\":[\n{\"a\":2,\"b\":null},\n{\"a\":1,\"b\":\"x,y\"}\n]}\n";
        assert_eq!(digest_of(Format::Json, a), digest_of(Format::Json, b));
        assert_eq!(digest_of(Format::Json, a).records, 4);
        let c = b"{\"data\":[\n{\"a\":2,\"b\":null},\n{\"a\":1,\"b\":\"xy\"}\n]}\n";
        assert_ne!(digest_of(Format::Json, a), digest_of(Format::Json, c));
    }
}
