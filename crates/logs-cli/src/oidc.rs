//! `logs serve`'s flags for JWT access tokens of an OpenID provider.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use logs_server::auth::OidcConfig;
use logs_server::service::OidcFiles;

use crate::units::parse_duration;

#[derive(Debug, Args)]
pub struct OidcArgs {
    /// The OpenID provider's issuer, exactly as its tokens' `iss` writes it
    /// (`https://idp.example/realms/mobile`): JWT access tokens (RFC 9068) are then checked
    /// with the keys its discovery document names. https, or http on a loopback address.
    #[arg(long, env = "LOGS_OIDC_ISSUER", requires = "oidc_audience", value_name = "URL")]
    oidc_issuer: Option<String>,
    /// The audience a token's `aud` must contain: this service's resource indicator or
    /// client id at the provider.
    #[arg(long, env = "LOGS_OIDC_AUDIENCE", requires = "oidc_issuer", value_name = "AUD")]
    oidc_audience: Option<String>,
    /// The claim listing the applications a token may read (ids, or "*" for all).
    #[arg(long, env = "LOGS_OIDC_APPLICATIONS_CLAIM", default_value = "applications", value_name = "NAME")]
    oidc_applications_claim: String,
    /// A TOML file granting applications by `client_id` or `sub`, for tokens without the claim
    /// (the format of --introspection-grants).
    #[arg(long, env = "LOGS_OIDC_GRANTS", requires = "oidc_issuer", value_name = "FILE")]
    oidc_grants: Option<PathBuf>,
    /// The claim naming a token's field policy in --field-policies (a token without it gets
    /// the policy of its scopes, else the default; one naming an undefined policy exports
    /// nothing).
    #[arg(long, env = "LOGS_OIDC_POLICY_CLAIM", requires = "oidc_issuer", value_name = "NAME")]
    oidc_policy_claim: Option<String>,
    /// The accepted `typ` headers, separated by commas (some providers write `JWT`).
    #[arg(
        long,
        env = "LOGS_OIDC_TOKEN_TYPES",
        default_value = "at+jwt",
        value_delimiter = ',',
        value_name = "LIST"
    )]
    oidc_token_types: Vec<String>,
    /// Clock skew allowed on `exp`, `nbf` and `iat`.
    #[arg(long, env = "LOGS_OIDC_LEEWAY", default_value = "30s", value_parser = parse_duration)]
    oidc_leeway: Duration,
    /// The longest the provider's keys are used before they are fetched again (sooner if its
    /// answer's Cache-Control says so).
    #[arg(long, env = "LOGS_OIDC_JWKS_MAX_AGE", default_value = "5m", value_parser = parse_duration)]
    oidc_jwks_max_age: Duration,
    /// The shortest time between two fetches of the keys (a token with an unknown `kid` makes
    /// one at most this often).
    #[arg(long, env = "LOGS_OIDC_JWKS_MIN_INTERVAL", default_value = "10s", value_parser = parse_duration)]
    oidc_jwks_min_interval: Duration,
    /// The longest wait for the provider's discovery document or keys.
    #[arg(long, env = "LOGS_OIDC_TIMEOUT", default_value = "2s", value_parser = parse_duration)]
    oidc_timeout: Duration,
}

impl OidcArgs {
    pub fn issuer(&self) -> Option<&str> {
        self.oidc_issuer.as_deref()
    }

    /// The service's settings, if an issuer is given.
    pub fn files(&self) -> Option<OidcFiles> {
        let (issuer, audience) = (self.oidc_issuer.as_ref()?, self.oidc_audience.as_ref()?);
        let settings = OidcConfig {
            applications_claim: self.oidc_applications_claim.clone(),
            policy_claim: self.oidc_policy_claim.clone(),
            token_types: self.oidc_token_types.iter().map(|t| t.trim().to_owned()).collect(),
            leeway: self.oidc_leeway,
            jwks_max_age: self.oidc_jwks_max_age,
            jwks_min_interval: self.oidc_jwks_min_interval,
            timeout: self.oidc_timeout,
            ..OidcConfig::new(issuer.clone(), audience.clone())
        };
        Some(OidcFiles { settings, grants: self.oidc_grants.clone() })
    }
}
