//! The OpenID provider harness (`logs_testkit::oidc`) against the real provider: what its
//! tokens hold, introspection of opaque ones, the JWKS and its Cache-Control, key rotation by
//! a restart on the same port, and stopping.

use logs_testkit::oidc::{Client, KeyPair, OidcProvider, ProviderConfig};
use serde_json::{Value, json};

const AUDIENCE: &str = "https://logs.example/api";
const OTHER_AUDIENCE: &str = "https://other.example/api";
const ALGS: [&str; 4] = ["RS256", "PS256", "ES256", "EdDSA"];

fn client(client_id: &str, alg: &str, scope: &str, applications: Value) -> Client {
    Client {
        client_id: client_id.into(),
        client_secret: format!("secret-{client_id}"),
        scope: scope.into(),
        applications,
        alg: alg.into(),
    }
}

fn keys() -> Vec<KeyPair> {
    ALGS.iter().map(|alg| OidcProvider::genkey(alg, &format!("key-{alg}"))).collect()
}

fn clients() -> Vec<Client> {
    let mut clients: Vec<Client> = ALGS
        .iter()
        .map(|alg| client(&format!("client-{alg}"), alg, "service:read service:write", json!([1001, 1002])))
        .collect();
    clients.push(client("everything", "RS256", "service:read service:write", json!("*")));
    clients.push(client("reader", "ES256", "service:read", json!([7])));
    clients
}

/// The header and claims of a JWT, without checking its signature.
fn jwt_parts(token: &str) -> Option<(Value, Value)> {
    use base64::Engine as _;
    let parts: Vec<&str> = token.split('.').collect();
    let &[header, claims, _signature] = parts.as_slice() else { return None };
    let decode = |part: &str| -> Option<Value> {
        serde_json::from_slice(&base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(part).ok()?).ok()
    };
    Some((decode(header)?, decode(claims)?))
}

fn kids(provider: &OidcProvider) -> Vec<String> {
    let (jwks, _) = provider.jwks();
    jwks["keys"].as_array().unwrap().iter().map(|k| k["kid"].as_str().unwrap().to_owned()).collect()
}

#[test]
fn jwt_access_tokens_of_every_algorithm() {
    let keys = keys();
    let provider =
        OidcProvider::start(ProviderConfig::new(keys.clone(), clients(), AUDIENCE, OTHER_AUDIENCE));
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
        assert_eq!(claims["exp"].as_u64().unwrap() - claims["iat"].as_u64().unwrap(), 300);
    }

    let both = provider.token("everything", Some(AUDIENCE), "service:read service:write").unwrap();
    let (_, claims) = jwt_parts(&both).unwrap();
    assert_eq!(claims["scope"], "service:read service:write");
    assert_eq!(claims["applications"], "*");
    let other = provider.token("client-ES256", Some(OTHER_AUDIENCE), "service:read").unwrap();
    assert_eq!(jwt_parts(&other).unwrap().1["aud"], OTHER_AUDIENCE);

    let refused = provider.token("reader", Some(AUDIENCE), "service:write").unwrap_err();
    assert!(refused.contains("invalid_scope"), "{refused}");
    assert!(provider.token("reader", Some("https://unknown.example/api"), "service:read").is_err());
}

#[test]
fn a_token_without_a_resource_is_opaque_and_introspected() {
    let mut config = ProviderConfig::new(keys(), clients(), AUDIENCE, OTHER_AUDIENCE);
    config.applications_claim = "apps".to_owned();
    config.access_token_ttl = std::time::Duration::from_secs(120);
    let provider = OidcProvider::start(config);
    let token = provider.token("client-PS256", None, "service:read service:write").unwrap();
    assert!(jwt_parts(&token).is_none() && !token.contains('.'), "opaque");

    // Asked by the token's own client and by another one (as logs-export would be).
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

    let jwt = provider.token("client-PS256", Some(AUDIENCE), "service:read").unwrap();
    assert_eq!(jwt_parts(&jwt).unwrap().1["apps"], json!([1001, 1002]), "the configured claim");
}

#[test]
fn restart_rotates_keys_on_the_same_port_and_stop_closes_it() {
    let old = OidcProvider::genkey("RS256", "old");
    let new = OidcProvider::genkey("RS256", "new");
    let clients = vec![client("rotating", "RS256", "service:read", json!([1]))];
    let config = |keys: Vec<KeyPair>| ProviderConfig::new(keys, clients.clone(), AUDIENCE, OTHER_AUDIENCE);
    let mut provider = OidcProvider::start(config(vec![old.clone()]));
    let issuer = provider.issuer();
    assert_eq!(provider.jwks().1, None, "oidc-provider sends no Cache-Control of its own on its JWKS");
    assert_eq!(kids(&provider), ["old"]);
    let kid = |p: &OidcProvider| {
        let token = p.token("rotating", Some(AUDIENCE), "service:read").unwrap();
        jwt_parts(&token).unwrap().0["kid"].as_str().unwrap().to_owned()
    };
    assert_eq!(kid(&provider), "old");

    let mut rotating = config(vec![new.clone(), old]);
    rotating.jwks_cache_control = Some("public, max-age=60".to_owned());
    provider.restart(rotating);
    assert_eq!(provider.issuer(), issuer, "the same port");
    assert_eq!(kids(&provider), ["new", "old"]);
    assert_eq!(provider.jwks().1.as_deref(), Some("public, max-age=60"));
    assert_eq!(kid(&provider), "new", "signed with the first key of the algorithm");

    provider.restart(config(vec![new]));
    assert_eq!(kids(&provider), ["new"]);

    provider.stop();
    assert!(std::net::TcpStream::connect(provider.address()).is_err(), "the port is closed");
    assert!(provider.token("rotating", Some(AUDIENCE), "service:read").is_err());
}
