//! Through real haproxy (the repository's `deploy/haproxy.cfg`, `option forwardfor`), with a
//! replica that trusts it (`--trusted-proxies 127.0.0.1`) and accepts the JWTs of a real
//! OpenID provider: a client that guesses tokens is refused (429) however it spoofs
//! `X-Forwarded-For`, while another client behind the same balancer goes on, with a token of
//! the tokens file or a JWT; the replica's access log shows each client's own address.
//! Clients connect from 127.0.0.2 and 127.0.0.3 (Linux routes all of 127/8 to the machine);
//! haproxy reaches the replica from 127.0.0.1.

mod common;

use std::net::IpAddr;

use common::*;
use logs_testkit::cluster::{Cluster, ClusterOptions};
use logs_testkit::oidc::{Client, OidcProvider, ProviderConfig};
use serde_json::json;

const AUDIENCE: &str = "https://logs.example/api";
const TOKEN: &str = "failed-auth-test-token-5e1c9a";
const EXPORT: &str = "/logs/v1/export/errors.csv?application_id=1001&date_since=2026-10-01&\
                      date_until=2026-10-02&fields=error_id&limit=3";

fn client_from(address: &str) -> reqwest::Client {
    logs_server::install_tls_provider();
    reqwest::Client::builder().local_address(address.parse::<IpAddr>().unwrap()).build().unwrap()
}

async fn status(client: &reqwest::Client, cluster: &Cluster, token: &str, spoof: Option<&str>) -> u16 {
    let mut request = client.get(format!("{}{EXPORT}", cluster.url())).bearer_auth(token);
    if let Some(value) = spoof {
        request = request.header("X-Forwarded-For", value);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    response.bytes().await.unwrap();
    status
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guessing_client_behind_haproxy_is_refused_however_it_spoofs_and_others_go_on() {
    let key = OidcProvider::genkey("ES256", "ec-1");
    let loader = Client {
        client_id: "loader".into(),
        client_secret: "loader-secret".into(),
        scope: "service:read".into(),
        applications: json!([1001]),
        alg: "ES256".into(),
    };
    let provider =
        OidcProvider::start(ProviderConfig::new(vec![key], vec![loader], AUDIENCE, "https://x.example"));
    let data = generated(5_000, 3);
    let folder = tempfile::tempdir().unwrap();
    let mut options = ClusterOptions::new(LOGS, data.path(), folder.path());
    options.replicas = 1;
    options.tokens = vec![("good".to_owned(), TOKEN.to_owned())];
    let issuer = provider.issuer();
    options.flags = ["--auth-failure-limit", "4", "--oidc-issuer", &issuer, "--oidc-audience", AUDIENCE]
        .map(str::to_owned)
        .into();
    let cluster = Cluster::start(options);
    let (guesser, other) = (client_from("127.0.0.2"), client_from("127.0.0.3"));

    for i in 0..4 {
        let spoof = format!("10.0.{i}.1");
        assert_eq!(status(&guesser, &cluster, &format!("guess-{i}"), Some(&spoof)).await, 401, "guess {i}");
    }
    // Over the limit: refused whatever it claims to be, and whatever token it sends.
    for spoof in [Some("10.9.9.9"), Some("127.0.0.3"), None] {
        assert_eq!(status(&guesser, &cluster, "guess-more", spoof).await, 429, "{spoof:?}");
        assert_eq!(status(&guesser, &cluster, TOKEN, spoof).await, 429, "{spoof:?}");
    }
    // Another client behind the same balancer: its tokens work, a JWT of the provider too.
    let jwt =
        tokio::task::block_in_place(|| provider.token("loader", Some(AUDIENCE), "service:read")).unwrap();
    assert_eq!(status(&other, &cluster, TOKEN, None).await, 200);
    assert_eq!(status(&other, &cluster, &jwt, Some("127.0.0.2")).await, 200);

    let log = cluster.replica(0).log();
    let access: Vec<&str> = log.lines().filter(|l| l.contains("logs_server::access")).collect();
    let from = |client: &str, code: u16| {
        access
            .iter()
            .filter(|l| l.contains(&format!("client={client} ")) && l.contains(&format!("status={code}")))
            .count()
    };
    assert_eq!(from("127.0.0.2", 401), 4, "{access:#?}");
    assert_eq!(from("127.0.0.2", 429), 6, "{access:#?}");
    assert_eq!(from("127.0.0.3", 200), 2, "{access:#?}");
    assert!(!access.iter().any(|l| l.contains("client=10.")), "a spoofed address was believed: {access:#?}");
}
