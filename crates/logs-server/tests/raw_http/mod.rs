//! Raw HTTP/1.1 over TCP for the hostile-input tests: requests are written byte for byte as
//! given (no client library to tidy them up), and the answers are parsed by hand.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// One parsed response.
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: u16,
    pub headers: Vec<(String, Vec<u8>)>,
    /// The status line and headers as received.
    pub head: Vec<u8>,
    /// The body, de-chunked.
    pub body: Vec<u8>,
}

impl Answer {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| std::str::from_utf8(v).expect("a header value in UTF-8"))
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }

    /// The `error_type` of a JSON error body.
    pub fn error_type(&self) -> String {
        self.json()["errors"][0]["error_type"].as_str().unwrap_or_default().to_owned()
    }
}

/// Sends `request` exactly as given on a new connection, then reads until the server closes
/// it (at most 10 s), and parses every response in what arrived. Write and read errors (the
/// server may close or reset a connection whose request it refused) end the exchange; what
/// arrived until then counts.
pub async fn exchange(addr: SocketAddr, request: &[u8]) -> Vec<Answer> {
    let mut stream = TcpStream::connect(addr).await.expect("connect to the test server");
    let _ = stream.write_all(request).await;
    let mut received = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        match tokio::time::timeout_at(deadline, stream.read(&mut buf)).await {
            Err(_) => panic!(
                "no end of the answer within 10 s to {:?}; got {:?}",
                String::from_utf8_lossy(&request[..request.len().min(200)]),
                String::from_utf8_lossy(&received)
            ),
            Ok(Ok(0)) | Ok(Err(_)) => break,
            Ok(Ok(n)) => received.extend_from_slice(&buf[..n]),
        }
    }
    parse_answers(&received)
}

/// The one answer to `request`, which must end with the connection closed after it.
pub async fn exchange_one(addr: SocketAddr, request: &[u8]) -> Option<Answer> {
    let mut answers = exchange(addr, request).await;
    assert!(answers.len() <= 1, "more than one answer: {answers:?}");
    answers.pop()
}

/// A GET of `target` with the given extra header lines (each without CRLF) and
/// `Connection: close`.
pub fn get_request(target: &str, host: &str, headers: &[&str]) -> Vec<u8> {
    let mut request = format!("GET {target} HTTP/1.1\r\nHost: {host}\r\n");
    for header in headers {
        request.push_str(header);
        request.push_str("\r\n");
    }
    request.push_str("Connection: close\r\n\r\n");
    request.into_bytes()
}

pub fn parse_answers(mut bytes: &[u8]) -> Vec<Answer> {
    let mut answers = Vec::new();
    while let Some(head_end) = bytes.windows(4).position(|w| w == b"\r\n\r\n") {
        let head = &bytes[..head_end];
        let text = String::from_utf8_lossy(head);
        let mut lines = text.split("\r\n");
        let status_line = lines.next().unwrap_or_default();
        let status = status_line
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("not a status line: {status_line:?}"));
        let headers: Vec<(String, Vec<u8>)> = head
            .split(|&b| b == b'\n')
            .skip(1)
            .filter_map(|line| {
                let line = line.strip_suffix(b"\r").unwrap_or(line);
                let colon = line.iter().position(|&b| b == b':')?;
                let value = line[colon + 1..].trim_ascii().to_vec();
                Some((String::from_utf8_lossy(&line[..colon]).into_owned(), value))
            })
            .collect();
        let mut answer = Answer { status, headers, head: head.to_vec(), body: Vec::new() };
        let rest = &bytes[head_end + 4..];
        let chunked = answer.header("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked"));
        let consumed = if chunked {
            let (body, used) = dechunk(rest);
            answer.body = body;
            used
        } else {
            let length: usize = answer.header("content-length").map_or(0, |v| v.parse().unwrap());
            let length = length.min(rest.len());
            answer.body = rest[..length].to_vec();
            length
        };
        answers.push(answer);
        bytes = &rest[consumed..];
    }
    answers
}

/// The body of a chunked transfer and the bytes it took (all of them if it is cut short).
fn dechunk(mut rest: &[u8]) -> (Vec<u8>, usize) {
    let total = rest.len();
    let mut body = Vec::new();
    loop {
        let Some(line_end) = rest.windows(2).position(|w| w == b"\r\n") else { return (body, total) };
        let size = std::str::from_utf8(&rest[..line_end])
            .ok()
            .and_then(|s| usize::from_str_radix(s.trim(), 16).ok());
        let Some(size) = size else { return (body, total) };
        rest = &rest[line_end + 2..];
        if size == 0 {
            // The empty trailer.
            let after = rest.strip_prefix(b"\r\n").unwrap_or(rest);
            return (body, total - after.len());
        }
        let Some(chunk) = rest.get(..size) else { return (body, total) };
        body.extend_from_slice(chunk);
        rest = rest.get(size + 2..).unwrap_or_default();
    }
}
