//! The issuer's discovery document (`/.well-known/openid-configuration`): where its keys and
//! endpoints are. Its `issuer` must be the configured one byte for byte, and every URL in it
//! https (or loopback), so a document cannot send the hub elsewhere.

use crate::config::check_url;

/// What the hub reads of a discovery document.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
pub struct ProviderMetadata {
    /// The issuer.
    pub issuer: String,
    /// Where the keys are.
    pub jwks_uri: String,
    /// Where a browser signs in (the code flow).
    #[serde(default)]
    pub authorization_endpoint: Option<String>,
    /// Where a code is exchanged for tokens.
    #[serde(default)]
    pub token_endpoint: Option<String>,
    /// PKCE methods the issuer supports.
    #[serde(default)]
    pub code_challenge_methods_supported: Vec<String>,
}

/// A discovery document the hub cannot use.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DiscoveryError {
    /// Not JSON of the right shape.
    #[error("the discovery document does not parse: {0}")]
    Shape(String),
    /// Another issuer.
    #[error(
        "the discovery document names issuer {advertised:?}, not the configured {configured:?}"
    )]
    IssuerMismatch {
        /// `--oidc-issuer-url`.
        configured: String,
        /// The document's `issuer`.
        advertised: String,
    },
    /// A URL that is not https (or loopback).
    #[error("the discovery document's {field} {url:?}: {why}")]
    Url {
        /// The field.
        field: &'static str,
        /// Its value.
        url: String,
        /// What is wrong.
        why: &'static str,
    },
}

impl ProviderMetadata {
    /// Parses and checks a discovery document for `issuer`.
    pub fn parse(bytes: &[u8], issuer: &str) -> Result<Self, DiscoveryError> {
        let metadata: Self =
            serde_json::from_slice(bytes).map_err(|e| DiscoveryError::Shape(e.to_string()))?;
        if metadata.issuer != issuer {
            return Err(DiscoveryError::IssuerMismatch {
                configured: issuer.into(),
                advertised: metadata.issuer,
            });
        }
        let urls = [
            ("jwks_uri", Some(&metadata.jwks_uri)),
            (
                "authorization_endpoint",
                metadata.authorization_endpoint.as_ref(),
            ),
            ("token_endpoint", metadata.token_endpoint.as_ref()),
        ];
        // Plain http only when the issuer itself is on loopback (a test issuer): an https
        // issuer's document cannot aim the hub's requests — and the code flow's client secret —
        // at a plain-http service, the hub host's own loopback ones included.
        let issuer_plain = issuer.starts_with("http://");
        for (field, url) in urls {
            if let Some(url) = url {
                check_url(url)
                    .and_then(|()| {
                        (issuer_plain || !url.starts_with("http://"))
                            .then_some(())
                            .ok_or(
                                "plain http is allowed only when the issuer itself is http on \
                             loopback; use https",
                            )
                    })
                    .map_err(|why| DiscoveryError::Url {
                        field,
                        url: url.clone(),
                        why,
                    })?;
            }
        }
        Ok(metadata)
    }
}
