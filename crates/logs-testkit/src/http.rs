//! One HTTP/1.1 request over a fresh loopback connection, for the servers' own control
//! endpoints (moto's bucket calls, haproxy's statistics, a replica's `/readyz`); the tests
//! themselves speak to the service with a real client.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// Sends `method target` with an empty body; the response's status and body (unchunked).
pub fn request(addr: SocketAddr, method: &str, target: &str) -> std::io::Result<(u16, String)> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(1))?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(
        stream,
        "{method} {target} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response)?;
    let text = String::from_utf8_lossy(&response);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("no HTTP status from {addr}")))?;
    let chunked = head.to_ascii_lowercase().contains("\r\ntransfer-encoding: chunked");
    Ok((status, if chunked { dechunk(body) } else { body.to_owned() }))
}

/// The data of a chunked body.
fn dechunk(mut body: &str) -> String {
    let mut data = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let Ok(size) = usize::from_str_radix(size.split(';').next().unwrap_or("").trim(), 16) else { break };
        if size == 0 || rest.len() < size {
            break;
        }
        data.push_str(&rest[..size]);
        body = rest[size..].strip_prefix("\r\n").unwrap_or(&rest[size..]);
    }
    data
}

#[cfg(test)]
mod tests {
    #[test]
    fn dechunks() {
        assert_eq!(super::dechunk("5\r\nhello\r\n7;x=y\r\n, world\r\n0\r\n\r\n"), "hello, world");
        assert_eq!(super::dechunk("5\r\nhel"), "");
    }
}
