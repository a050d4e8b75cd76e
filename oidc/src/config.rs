//! What the hub accepts from its OIDC issuer: the `--oidc-*` flags, as kube-apiserver names
//! them, checked all at once.

use jsonwebtoken::Algorithm;
use std::path::PathBuf;
use std::time::Duration;

/// The signing algorithms kube-apiserver allows for `--oidc-signing-algs` that this hub can
/// verify (kube-apiserver also allows ES512, which the verifier does not implement). Never
/// `none`, never `HS*`: a hub holding only public keys must not accept a symmetric signature.
pub const ALLOWED: [Algorithm; 8] = [
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::ES256,
    Algorithm::ES384,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
];

/// The default clock skew allowed on `exp`, `nbf` and `iat`.
pub const DEFAULT_CLOCK_SKEW: Duration = Duration::from_secs(60);

/// How long the last good key set is used while the issuer cannot be reached.
pub const DEFAULT_JWKS_STALE_MAX: Duration = Duration::from_secs(24 * 3600);

/// What is prepended to a claim's value.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Prefix {
    /// kube-apiserver's default: for the username, the issuer URL and `#` unless the claim is
    /// `email`; for groups, nothing.
    #[default]
    Default,
    /// No prefix (`-` on the command line).
    None,
    /// This text.
    Text(String),
}

impl Prefix {
    /// A flag's value: absent → [`Prefix::Default`], `-` → [`Prefix::None`], else the text.
    pub fn parse(flag: Option<&str>) -> Self {
        match flag {
            None => Prefix::Default,
            Some("-") => Prefix::None,
            Some(text) => Prefix::Text(text.into()),
        }
    }
}

/// The issuer the hub trusts and how its tokens' claims become a user and groups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// The issuer URL: must equal the tokens' `iss` and the discovery document's `issuer`
    /// byte for byte (`--oidc-issuer-url`).
    pub issuer: String,
    /// The client ids accepted as `aud` (`--oidc-client-id`, repeatable).
    pub audiences: Vec<String>,
    /// The claim naming the user (`--oidc-username-claim`, default `sub`).
    pub username_claim: String,
    /// Prepended to the username (`--oidc-username-prefix`).
    pub username_prefix: Prefix,
    /// The claim listing the groups, a string or an array of strings (`--oidc-groups-claim`);
    /// none: no groups.
    pub groups_claim: Option<String>,
    /// Prepended to every group (`--oidc-groups-prefix`).
    pub groups_prefix: String,
    /// Claims that must be present with these values (`--oidc-required-claim KEY=VALUE`).
    pub required_claims: Vec<(String, String)>,
    /// The signing algorithms accepted (`--oidc-signing-algs`, default `RS256`).
    pub algorithms: Vec<Algorithm>,
    /// Clock skew allowed on `exp`, `nbf` and `iat` (`--oidc-clock-skew`, default 60 s).
    pub clock_skew: Duration,
    /// A PEM file of the CAs the issuer's certificate must chain to (`--oidc-ca-file`); none:
    /// the system's roots.
    pub ca_file: Option<PathBuf>,
    /// How long the last good key set is used while the issuer cannot be reached
    /// (`--oidc-jwks-stale-max`, default 24 h).
    pub jwks_stale_max: Duration,
}

/// One thing wrong with the OIDC flags.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// The issuer URL does not parse or has a query or fragment.
    #[error("--oidc-issuer-url {url:?}: {why}")]
    Issuer {
        /// The flag's value.
        url: String,
        /// What is wrong.
        why: &'static str,
    },
    /// An issuer without a client id.
    #[error("--oidc-client-id is required with --oidc-issuer-url (the audience tokens must name)")]
    NoAudience,
    /// An empty client id or claim name.
    #[error("{flag} must not be empty")]
    Empty {
        /// The flag.
        flag: &'static str,
    },
    /// An algorithm outside the allow-list.
    #[error(
        "--oidc-signing-algs: {alg:?} is not supported (want some of RS256, RS384, RS512, \
         ES256, ES384, PS256, PS384, PS512)"
    )]
    Algorithm {
        /// The value.
        alg: String,
    },
    /// A required claim that is not `KEY=VALUE`.
    #[error("--oidc-required-claim {0:?} is not KEY=VALUE")]
    RequiredClaim(String),
}

impl Config {
    /// The configuration for `issuer` and `audiences` with kube-apiserver's defaults.
    pub fn new(issuer: &str, audiences: &[&str]) -> Self {
        Self {
            issuer: issuer.into(),
            audiences: audiences.iter().map(|a| a.to_string()).collect(),
            username_claim: "sub".into(),
            username_prefix: Prefix::Default,
            groups_claim: None,
            groups_prefix: String::new(),
            required_claims: Vec::new(),
            algorithms: vec![Algorithm::RS256],
            clock_skew: DEFAULT_CLOCK_SKEW,
            ca_file: None,
            jwks_stale_max: DEFAULT_JWKS_STALE_MAX,
        }
    }

    /// Parses `--oidc-signing-algs` (comma-separated) and `--oidc-required-claim` values into
    /// this configuration, and checks the whole of it: every error at once.
    pub fn parse_lists(
        mut self,
        algorithms: &[String],
        required: &[String],
    ) -> Result<Self, Vec<ConfigError>> {
        let mut errors = Vec::new();
        if !algorithms.is_empty() {
            self.algorithms.clear();
            for alg in algorithms.iter().flat_map(|a| a.split(',')).map(str::trim) {
                match parse_algorithm(alg) {
                    Some(a) if !self.algorithms.contains(&a) => self.algorithms.push(a),
                    Some(_) => {}
                    None => errors.push(ConfigError::Algorithm { alg: alg.into() }),
                }
            }
        }
        for claim in required {
            match claim.split_once('=') {
                Some((k, v)) if !k.trim().is_empty() => {
                    self.required_claims.push((k.trim().into(), v.into()))
                }
                _ => errors.push(ConfigError::RequiredClaim(claim.clone())),
            }
        }
        errors.extend(self.check());
        if errors.is_empty() {
            Ok(self)
        } else {
            Err(errors)
        }
    }

    /// Everything wrong with this configuration.
    pub fn check(&self) -> Vec<ConfigError> {
        let mut errors = Vec::new();
        let issuer_query = self
            .issuer
            .contains('?')
            .then_some("an issuer URL must not have a query");
        if let Some(why) = check_url(&self.issuer).err().or(issuer_query) {
            errors.push(ConfigError::Issuer {
                url: self.issuer.clone(),
                why,
            });
        }
        if self.audiences.is_empty() {
            errors.push(ConfigError::NoAudience);
        }
        if self.audiences.iter().any(|a| a.is_empty()) {
            errors.push(ConfigError::Empty {
                flag: "--oidc-client-id",
            });
        }
        if self.username_claim.is_empty() {
            errors.push(ConfigError::Empty {
                flag: "--oidc-username-claim",
            });
        }
        if self.groups_claim.as_deref() == Some("") {
            errors.push(ConfigError::Empty {
                flag: "--oidc-groups-claim",
            });
        }
        if self.algorithms.is_empty() {
            errors.push(ConfigError::Empty {
                flag: "--oidc-signing-algs",
            });
        }
        for alg in &self.algorithms {
            if !ALLOWED.contains(alg) {
                errors.push(ConfigError::Algorithm {
                    alg: format!("{alg:?}"),
                });
            }
        }
        errors
    }

    /// The username prefix in force: kube-apiserver's default is the issuer URL and `#` for
    /// any claim but `email`.
    pub fn username_prefix(&self) -> String {
        match &self.username_prefix {
            Prefix::Default if self.username_claim == "email" => String::new(),
            Prefix::Default => format!("{}#", self.issuer),
            Prefix::None => String::new(),
            Prefix::Text(text) => text.clone(),
        }
    }

    /// The discovery document's URL: the issuer and `/.well-known/openid-configuration`.
    pub fn discovery_url(&self) -> String {
        format!(
            "{}/.well-known/openid-configuration",
            self.issuer.trim_end_matches('/')
        )
    }
}

/// An algorithm by its JOSE name, if this hub may accept it.
pub fn parse_algorithm(name: &str) -> Option<Algorithm> {
    let alg: Algorithm = name.parse().ok()?;
    ALLOWED.contains(&alg).then_some(alg)
}

/// Whether `url` may be fetched or trusted: `https://`, or `http://` to a loopback address (the
/// test issuer); no fragment.
pub fn check_url(url: &str) -> Result<(), &'static str> {
    if url.contains('#') {
        return Err("a URL must not have a fragment");
    }
    let uri: http::Uri = url.parse().map_err(|_| "not a URL")?;
    let host = uri.host().ok_or("a URL needs a host")?;
    match uri.scheme_str() {
        Some("https") => Ok(()),
        Some("http") if is_loopback(host) => Ok(()),
        Some("http") => Err("plain http is allowed only to a loopback address; use https"),
        _ => Err("want an https:// URL"),
    }
}

fn is_loopback(host: &str) -> bool {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}
