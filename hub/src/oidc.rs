//! Identities from the company's OIDC issuer (issue 48): the hub's `--oidc-*` flags, the keys
//! task started with the hub, and the [`BearerVerifier`] every surface (gRPC, the cluster
//! proxy, the dashboard) authenticates ID tokens with — a thin layer over `flotilla-oidc`,
//! mapping its subject to a [`Principal`] the grants file gives roles to.

use crate::grants::{Principal, Via};
use crate::grpc::auth::{BearerVerifier, Tokens, Verified};
use flotilla_oidc::{Authenticator, Outcome};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// The `--oidc-*` flags, as kube-apiserver's.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct OidcArgs {
    /// Accept ID tokens of this OIDC issuer as bearer tokens (its discovery document and keys
    /// are fetched from it; https, or http on loopback). Its users and groups get what the
    /// grants file (--grants-file) gives them.
    #[arg(long, env = "FLOTILLA_OIDC_ISSUER_URL")]
    pub oidc_issuer_url: Option<String>,
    /// The client id tokens must name in `aud` (repeatable: several audiences).
    #[arg(long, env = "FLOTILLA_OIDC_CLIENT_ID", value_delimiter = ',')]
    pub oidc_client_id: Vec<String>,
    /// The claim naming the user.
    #[arg(long, env = "FLOTILLA_OIDC_USERNAME_CLAIM", default_value = "sub")]
    pub oidc_username_claim: String,
    /// Prepended to the username; default: the issuer URL and `#` unless the claim is
    /// `email`; `-` for none.
    #[arg(
        long,
        env = "FLOTILLA_OIDC_USERNAME_PREFIX",
        allow_hyphen_values = true
    )]
    pub oidc_username_prefix: Option<String>,
    /// The claim listing the user's groups (a string or an array of strings).
    #[arg(long, env = "FLOTILLA_OIDC_GROUPS_CLAIM")]
    pub oidc_groups_claim: Option<String>,
    /// Prepended to every group (e.g. `oidc:`, so no group of the issuer can be a token
    /// file's name).
    #[arg(long, env = "FLOTILLA_OIDC_GROUPS_PREFIX", default_value = "")]
    pub oidc_groups_prefix: String,
    /// A claim that must be present with this value, KEY=VALUE (repeatable).
    #[arg(long, env = "FLOTILLA_OIDC_REQUIRED_CLAIM")]
    pub oidc_required_claim: Vec<String>,
    /// The signing algorithms accepted, comma-separated (RS256, RS384, RS512, ES256, ES384,
    /// PS256, PS384, PS512).
    #[arg(long, env = "FLOTILLA_OIDC_SIGNING_ALGS", default_value = "RS256")]
    pub oidc_signing_algs: Vec<String>,
    /// PEM CA certificates the issuer's certificate must chain to (default: the system's).
    #[arg(long, env = "FLOTILLA_OIDC_CA_FILE")]
    pub oidc_ca_file: Option<PathBuf>,
    /// Clock skew allowed on exp, nbf and iat (e.g. 60s, 2m).
    #[arg(long, env = "FLOTILLA_OIDC_CLOCK_SKEW", default_value = "60s", value_parser = humantime::parse_duration)]
    pub oidc_clock_skew: Duration,
    /// How long the last keys fetched are used while the issuer cannot be reached.
    #[arg(long, env = "FLOTILLA_OIDC_JWKS_STALE_MAX", default_value = "24h", value_parser = humantime::parse_duration)]
    pub oidc_jwks_stale_max: Duration,
}

impl OidcArgs {
    /// The issuer's configuration, if one is given; every problem pushed to `errors`.
    pub fn config(&self, errors: &mut Vec<String>) -> Option<flotilla_oidc::Config> {
        let Some(issuer) = &self.oidc_issuer_url else {
            if !self.oidc_client_id.is_empty() {
                errors.push("--oidc-client-id needs --oidc-issuer-url".into());
            }
            return None;
        };
        let audiences: Vec<&str> = self.oidc_client_id.iter().map(String::as_str).collect();
        let mut config = flotilla_oidc::Config::new(issuer, &audiences);
        config.username_claim = self.oidc_username_claim.clone();
        config.username_prefix = flotilla_oidc::Prefix::parse(self.oidc_username_prefix.as_deref());
        config.groups_claim = self.oidc_groups_claim.clone();
        config.groups_prefix = self.oidc_groups_prefix.clone();
        config.ca_file = self.oidc_ca_file.clone();
        config.clock_skew = self.oidc_clock_skew;
        config.jwks_stale_max = self.oidc_jwks_stale_max;
        match config.parse_lists(&self.oidc_signing_algs, &self.oidc_required_claim) {
            Ok(config) => Some(config),
            Err(problems) => {
                errors.extend(problems.iter().map(ToString::to_string));
                None
            }
        }
    }
}

/// Why the OIDC issuer cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum OidcError {
    /// The HTTP client (its CA file) cannot be made.
    #[error("--oidc-issuer-url: {0}")]
    Client(#[from] flotilla_oidc::fetch::FetchError),
}

/// The API's tokens with an issuer configured: the token file's (or none) and the issuer's.
/// Called before the access table is handed to the tokens, so an OIDC-only hub has tokens.
pub fn prepare(tokens: Option<Tokens>, oidc: Option<&flotilla_oidc::Config>) -> Option<Tokens> {
    match (tokens, oidc) {
        (None, Some(_)) => Some(Tokens::default()),
        (tokens, _) => tokens,
    }
}

/// Starts the keys task of `config`'s issuer (stopped with the hub) and gives `tokens` its
/// verifier. The hub does not wait for the issuer: until the keys are fetched, its tokens are
/// refused with the reason.
pub fn start(
    config: flotilla_oidc::Config,
    tokens: Tokens,
    shutdown: &watch::Receiver<bool>,
) -> Result<(Tokens, Authenticator, JoinHandle<()>), OidcError> {
    let fetcher = flotilla_oidc::fetch::Fetcher::new(config.ca_file.as_deref())?;
    let mut stop = shutdown.clone();
    let (keys, task) = flotilla_oidc::Keys::spawn(config.clone(), fetcher, async move {
        let _ = stop.wait_for(|s| *s).await;
    });
    tracing::info!(issuer = %config.issuer, audiences = ?config.audiences, "oidc: accepting the issuer's ID tokens");
    let authenticator = Authenticator::new(flotilla_oidc::Verifier::new(config), keys);
    let bearer = Arc::new(Bearer(authenticator.clone()));
    Ok((tokens.with_bearer(bearer), authenticator, task))
}

/// The issuer's tokens as the core's [`BearerVerifier`].
#[derive(Debug, Clone)]
pub struct Bearer(pub Authenticator);

impl BearerVerifier for Bearer {
    fn verify(&self, token: &str) -> Verified {
        match self.0.authenticate(token) {
            Outcome::NotMine => Verified::NotMine,
            Outcome::Accepted(subject) => Verified::Principal(principal(subject)),
            Outcome::Refused(refusal) => {
                tracing::debug!(reason = %refusal, "oidc: bearer token refused");
                Verified::Refused(refusal.to_string())
            }
        }
    }
}

/// The principal a verified subject is.
pub fn principal(subject: flotilla_oidc::Subject) -> Principal {
    Principal::user(
        &subject.username,
        Via::Oidc {
            issuer: subject.issuer.into(),
            expires: subject.expires,
        },
    )
    .with_groups(subject.groups)
}
