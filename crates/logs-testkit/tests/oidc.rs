//! The OpenID provider harness (`logs_testkit::oidc`) against the real provider: what its
//! tokens hold, introspection of opaque ones, key rotation by restart, and stopping.

use logs_testkit::oidc::{
    AUDIENCE, Applications, Client, KeyPair, OTHER_AUDIENCE, OidcProvider, ProviderConfig, genkey, jwt_parts,
};
use serde_json::{Value, json};

const ALGS: [&str; 4] = ["RS256", "PS256", "ES256", "EdDSA"];

fn keys() -> Vec<KeyPair> {
    ALGS.iter().map(|alg| genkey(alg, &format!("key-{alg}"))).collect()
}

fn clients() -> Vec<Client> {
    let mut clients: Vec<Client> = ALGS
        .iter()
        .map(|alg| Client::new(&format!("client-{alg}"), alg, Applications::Ids(vec![1001, 1002])))
        .collect();
    clients.push(Client::new("everything", "RS256", Applications::All));
    let mut reader = Client::new("reader", "ES256", Applications::Ids(vec![7]));
    reader.scope = "service:read".to_owned();
    clients.push(reader);
    clients
}

fn kids(provider: &OidcProvider) -> Vec<String> {
    let (jwks, _) = provider.jwks();
    jwks["keys"].as_array().unwrap().iter().map(|k| k["kid"].as_str().unwrap().to_owned()).collect()
}

#[test]
fn jwt_access_tokens_of_every_algorithm() {
    let keys = keys();
    let provider = OidcProvider::start(ProviderConfig::new(keys.clone(), clients()));
    assert_eq!(provider.audience(), AUDIENCE);
    assert_eq!(kids(&provider), ["key-RS256", "key-PS256", "key-ES256", "key-EdDSA"]);
    let (jwks, _) = provider.jwks();
    for (published, key) in jwks["keys"].as_array().unwrap().iter().zip(&keys) {
        let public: Value = serde_json::from_str(&key.public_jwk).unwrap();
        for member in ["kty", "kid", "alg", "use", "n", "e", "crv", "x", "y"] {
            assert_eq!(published[member], public[member], "{} {member}", key.kid);
        }
        assert!(published.get("d").is_none(), "no private part in the JWKS");
        assert!(key.private_pem.starts_with("-----BEGIN PRIVATE KEY-----"), "PKCS#8");
    }

    for alg in ALGS {
        let client = format!("client-{alg}");
        let token = provider.token(&client, Some(AUDIENCE), "service:read").unwrap();
        let (header, claims) = jwt_parts(&token).expect("a JWT");
        assert_eq!(header["typ"], "at+jwt", "{alg}");
        assert_eq!(header["alg"], alg);
        assert_eq!(header["kid"], format!("key-{alg}"));
        assert_eq!(claims["iss"], provider.issuer());
        assert_eq!(claims["aud"], AUDIENCE);
        assert_eq!(claims["client_id"], client.as_str());
        assert_eq!(claims["scope"], "service:read");
        assert_eq!(claims["applications"], json!([1001, 1002]));
        let (iat, exp) = (claims["iat"].as_u64().unwrap(), claims["exp"].as_u64().unwrap());
        assert_eq!(exp - iat, 300, "the default lifetime");
    }

    let both = provider.token("everything", Some(AUDIENCE), "service:read service:write").unwrap();
    let (_, claims) = jwt_parts(&both).unwrap();
    assert_eq!(claims["scope"], "service:read service:write");
    assert_eq!(claims["applications"], "*");

    let other = provider.token("client-ES256", Some(OTHER_AUDIENCE), "service:read").unwrap();
    assert_eq!(jwt_parts(&other).unwrap().1["aud"], OTHER_AUDIENCE);

    let refused = provider.token("reader", Some(AUDIENCE), "service:write").unwrap_err();
    assert!(refused.contains("invalid_scope"), "{refused}");
    let refused = provider.token("reader", Some("https://unknown.example/api"), "service:read").unwrap_err();
    assert!(refused.contains("invalid_target"), "{refused}");
}

#[test]
fn a_token_without_a_resource_is_opaque_and_introspected() {
    let mut config = ProviderConfig::new(keys(), clients());
    config.applications_claim = "apps".to_owned();
    config.access_token_ttl = std::time::Duration::from_secs(120);
    let provider = OidcProvider::start(config);
    let token = provider.token("client-PS256", None, "service:read service:write").unwrap();
    assert!(jwt_parts(&token).is_none(), "opaque");
    assert!(!token.contains('.'), "opaque");

    // Asked by the token's own client and by another client (as logs-export would be).
    for asker in ["client-PS256", "reader"] {
        let answer = provider.introspect(asker, &token).unwrap();
        assert_eq!(answer["active"], true, "{answer}");
        assert_eq!(answer["client_id"], "client-PS256");
        assert_eq!(answer["scope"], "service:read service:write");
        assert_eq!(answer["apps"], json!([1001, 1002]));
        assert_eq!(answer["iss"], provider.issuer());
        assert_eq!(answer["exp"].as_u64().unwrap() - answer["iat"].as_u64().unwrap(), 120);
        assert!(answer.get("aud").is_none(), "no audience without a resource: {answer}");
    }
    assert_eq!(provider.introspect("reader", "not-a-token-it-issued").unwrap()["active"], false);

    // A JWT names the applications under the configured claim too.
    let jwt = provider.token("client-PS256", Some(AUDIENCE), "service:read").unwrap();
    assert_eq!(jwt_parts(&jwt).unwrap().1["apps"], json!([1001, 1002]));
}

#[test]
fn restart_rotates_keys_on_the_same_port_and_stop_closes_it() {
    let old = genkey("RS256", "old");
    let new = genkey("RS256", "new");
    let clients = vec![Client::new("rotating", "RS256", Applications::Ids(vec![1]))];
    let mut provider = OidcProvider::start(ProviderConfig::new(vec![old.clone()], clients.clone()));
    let issuer = provider.issuer();
    let (_, cache_control) = provider.jwks();
    assert_eq!(cache_control, None, "oidc-provider sends no Cache-Control on its JWKS");
    assert_eq!(kids(&provider), ["old"]);
    let kid = |token: &str| jwt_parts(token).unwrap().0["kid"].as_str().unwrap().to_owned();
    assert_eq!(kid(&provider.token("rotating", Some(AUDIENCE), "service:read").unwrap()), "old");

    let mut rotating = ProviderConfig::new(vec![new.clone(), old], clients.clone());
    rotating.jwks_cache_control = Some("public, max-age=60".to_owned());
    provider.restart(rotating);
    assert_eq!(provider.issuer(), issuer, "the same port");
    assert_eq!(kids(&provider), ["new", "old"]);
    assert_eq!(provider.jwks().1.as_deref(), Some("public, max-age=60"));
    assert_eq!(kid(&provider.token("rotating", Some(AUDIENCE), "service:read").unwrap()), "new");

    provider.restart(ProviderConfig::new(vec![new], clients));
    assert_eq!(kids(&provider), ["new"]);

    let addr = provider.addr();
    provider.stop();
    assert!(std::net::TcpStream::connect(addr).is_err(), "the port is closed");
    assert!(provider.token("rotating", Some(AUDIENCE), "service:read").is_err());
}
