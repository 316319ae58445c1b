//! The client's address: the connection's peer, unless the peer is one of the operator's
//! trusted proxies (`--trusted-proxies`), whose forwarding header then names the client.
//!
//! Only the header the proxy writes is read (`--forwarded-header`: `X-Forwarded-For`, as
//! haproxy's `option forwardfor` appends it, or RFC 7239 `Forwarded`): a proxy passes the
//! other one along as the client sent it, lies included. Its values (every header line, in
//! order) are walked from the right, past the trusted proxies; the first other address is
//! the client. A value that is not an address ends the walk at the hop that wrote it, so a
//! malformed or obfuscated entry never becomes a client address. The result goes into the
//! request as `ClientAddr`, for the access log and the failed-authentication limit.

use std::net::{IpAddr, SocketAddr};
use std::str::FromStr;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use http::HeaderMap;
use ipnet::IpNet;

use super::failures::FailureLimit;
use crate::config::ConfigError;
use crate::log::{ClientAddr, PeerAddr};

/// The header a trusted proxy writes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ForwardedHeader {
    /// `X-Forwarded-For: client, proxy1, …`.
    #[default]
    XForwardedFor,
    /// RFC 7239: `Forwarded: for=client;proto=https, for="[2001:db8::1]:443"`.
    Forwarded,
}

impl FromStr for ForwardedHeader {
    type Err = ConfigError;

    fn from_str(name: &str) -> Result<ForwardedHeader, ConfigError> {
        match name.trim().to_ascii_lowercase().as_str() {
            "x-forwarded-for" => Ok(ForwardedHeader::XForwardedFor),
            "forwarded" => Ok(ForwardedHeader::Forwarded),
            _ => Err(ConfigError::Invalid(format!(
                "--forwarded-header must be `x-forwarded-for` or `forwarded`, not `{name}`"
            ))),
        }
    }
}

/// The proxies whose forwarding header is believed (none by default).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrustedProxies {
    nets: Vec<IpNet>,
    header: ForwardedHeader,
}

impl TrustedProxies {
    /// A list of addresses or CIDR blocks separated by commas (`127.0.0.1, 10.0.0.0/8, ::1`).
    pub fn parse(list: &str, header: ForwardedHeader) -> Result<TrustedProxies, ConfigError> {
        let nets = list
            .split(',')
            .map(str::trim)
            .filter(|item| !item.is_empty())
            .map(|item| {
                item.parse::<IpNet>().or_else(|_| item.parse::<IpAddr>().map(IpNet::from)).map_err(|_| {
                    ConfigError::Invalid(format!(
                        "--trusted-proxies: `{item}` is not an IP address or CIDR block (such as 10.0.0.0/8)"
                    ))
                })
            })
            .collect::<Result<_, _>>()?;
        Ok(TrustedProxies { nets, header })
    }

    pub fn is_empty(&self) -> bool {
        self.nets.is_empty()
    }

    fn trusts(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        self.nets.iter().any(|net| net.contains(&ip))
    }

    /// The client's address for a connection from `peer` with these headers.
    pub fn client(&self, peer: IpAddr, headers: &HeaderMap) -> IpAddr {
        let mut client = peer.to_canonical();
        if !self.trusts(client) {
            return client;
        }
        let values = match self.header {
            ForwardedHeader::XForwardedFor => hops(headers, "x-forwarded-for", xff_hop),
            ForwardedHeader::Forwarded => hops(headers, "forwarded", forwarded_hop),
        };
        for hop in values.into_iter().rev() {
            let Some(ip) = hop else { return client };
            client = ip.to_canonical();
            if !self.trusts(client) {
                return client;
            }
        }
        client
    }
}

/// Every hop named by the header's lines, in order; `None` for one that is not an address.
fn hops(headers: &HeaderMap, name: &str, hop: fn(&str) -> Option<IpAddr>) -> Vec<Option<IpAddr>> {
    headers
        .get_all(name)
        .iter()
        .flat_map(|value| {
            let text = value.to_str().unwrap_or("\u{0}");
            text.split(',').map(|item| hop(item.trim())).collect::<Vec<_>>()
        })
        .collect()
}

/// `192.0.2.1`, `2001:db8::1`, `[2001:db8::1]`, `192.0.2.1:443`, `[2001:db8::1]:443`.
fn xff_hop(item: &str) -> Option<IpAddr> {
    item.parse::<IpAddr>()
        .ok()
        .or_else(|| item.parse::<SocketAddr>().ok().map(|s| s.ip()))
        .or_else(|| item.strip_prefix('[')?.strip_suffix(']')?.parse().ok())
}

/// The `for=` of one RFC 7239 element (`for=192.0.2.1;proto=https`, `for="[2001:db8::1]:80"`).
fn forwarded_hop(element: &str) -> Option<IpAddr> {
    let value = element.split(';').find_map(|pair| {
        let (name, value) = pair.split_once('=')?;
        name.trim().eq_ignore_ascii_case("for").then(|| value.trim().trim_matches('"'))
    })?;
    xff_hop(value)
}

/// What the middlewares need to know about clients: whose forwarding headers to believe, and
/// the failed-authentication limit.
#[derive(Debug)]
pub struct ClientGate {
    proxies: TrustedProxies,
    failures: FailureLimit,
}

impl ClientGate {
    pub fn new(proxies: TrustedProxies, failures: FailureLimit) -> ClientGate {
        ClientGate { proxies, failures }
    }

    pub fn proxies(&self) -> &TrustedProxies {
        &self.proxies
    }

    pub fn failures(&self) -> &FailureLimit {
        &self.failures
    }
}

/// The middleware that puts `ClientAddr` into each request that came over a connection.
pub(crate) async fn resolve_client(
    State(gate): State<Arc<ClientGate>>,
    mut request: Request,
    next: Next,
) -> Response {
    if let Some(PeerAddr(peer)) = request.extensions().get::<PeerAddr>().copied() {
        let client = gate.proxies().client(peer.ip(), request.headers());
        request.extensions_mut().insert(ClientAddr(client));
    }
    next.run(request).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn headers(name: &'static str, values: &[&str]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for v in values {
            h.append(name, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn a_peer_that_is_no_proxy_is_the_client_whatever_it_says() {
        let proxies = TrustedProxies::parse("10.0.0.0/8", ForwardedHeader::XForwardedFor).unwrap();
        let h = headers("x-forwarded-for", &["1.2.3.4"]);
        assert_eq!(proxies.client(ip("192.0.2.9"), &h), ip("192.0.2.9"));
        assert_eq!(TrustedProxies::default().client(ip("10.0.0.1"), &h), ip("10.0.0.1"));
    }

    #[test]
    fn the_first_untrusted_hop_from_the_right_is_the_client() {
        let proxies = TrustedProxies::parse("127.0.0.1, 10.0.0.0/8", ForwardedHeader::XForwardedFor).unwrap();
        // The client's own lie on the left, what haproxy appended on the right.
        let h = headers("x-forwarded-for", &["6.6.6.6, 198.51.100.7"]);
        assert_eq!(proxies.client(ip("127.0.0.1"), &h), ip("198.51.100.7"));
        // Two proxies, the header on two lines.
        let h = headers("x-forwarded-for", &["6.6.6.6", "198.51.100.7, 10.1.2.3"]);
        assert_eq!(proxies.client(ip("10.0.0.5"), &h), ip("198.51.100.7"));
        // Every hop trusted: the leftmost.
        let h = headers("x-forwarded-for", &["10.9.9.9, 10.1.2.3"]);
        assert_eq!(proxies.client(ip("127.0.0.1"), &h), ip("10.9.9.9"));
        // No header: the proxy itself.
        assert_eq!(proxies.client(ip("127.0.0.1"), &HeaderMap::new()), ip("127.0.0.1"));
        // Ports, brackets, IPv6, IPv4-mapped peers.
        let h = headers("x-forwarded-for", &["[2001:db8::7]:4711"]);
        assert_eq!(proxies.client(ip("::ffff:127.0.0.1"), &h), ip("2001:db8::7"));
        let h = headers("x-forwarded-for", &["192.0.2.1:443"]);
        assert_eq!(proxies.client(ip("127.0.0.1"), &h), ip("192.0.2.1"));
    }

    #[test]
    fn malformed_hops_end_the_walk_at_the_hop_that_wrote_them() {
        let proxies = TrustedProxies::parse("127.0.0.1,10.0.0.0/8", ForwardedHeader::XForwardedFor).unwrap();
        let h = headers("x-forwarded-for", &["198.51.100.7, garbage"]);
        assert_eq!(proxies.client(ip("127.0.0.1"), &h), ip("127.0.0.1"));
        let h = headers("x-forwarded-for", &["garbage, 10.1.2.3"]);
        assert_eq!(proxies.client(ip("127.0.0.1"), &h), ip("10.1.2.3"));
        let h = headers("x-forwarded-for", &["unknown"]);
        assert_eq!(proxies.client(ip("127.0.0.1"), &h), ip("127.0.0.1"));
    }

    #[test]
    fn forwarded_is_read_only_when_chosen() {
        let xff = TrustedProxies::parse("127.0.0.1", ForwardedHeader::XForwardedFor).unwrap();
        let fwd = TrustedProxies::parse("127.0.0.1", ForwardedHeader::Forwarded).unwrap();
        let h = headers("forwarded", &["for=6.6.6.6, for=\"[2001:db8::1]:80\";proto=https"]);
        assert_eq!(xff.client(ip("127.0.0.1"), &h), ip("127.0.0.1"), "the client's own Forwarded is ignored");
        assert_eq!(fwd.client(ip("127.0.0.1"), &h), ip("2001:db8::1"));
        let h = headers("forwarded", &["for=_hidden;by=x"]);
        assert_eq!(fwd.client(ip("127.0.0.1"), &h), ip("127.0.0.1"), "an obfuscated identifier");
        let h = headers("forwarded", &["proto=https;For=192.0.2.60"]);
        assert_eq!(fwd.client(ip("127.0.0.1"), &h), ip("192.0.2.60"));
    }

    #[test]
    fn bad_lists_are_refused_naming_the_flag() {
        let e = TrustedProxies::parse("10.0.0.0/8, proxy.local", ForwardedHeader::XForwardedFor).unwrap_err();
        assert!(e.to_string().contains("--trusted-proxies") && e.to_string().contains("proxy.local"), "{e}");
        assert!(TrustedProxies::parse("10.0.0.0/33", ForwardedHeader::XForwardedFor).is_err());
        assert!("via".parse::<ForwardedHeader>().unwrap_err().to_string().contains("--forwarded-header"));
        assert_eq!("Forwarded".parse::<ForwardedHeader>().unwrap(), ForwardedHeader::Forwarded);
        assert!(TrustedProxies::parse("", ForwardedHeader::XForwardedFor).unwrap().is_empty());
    }
}
