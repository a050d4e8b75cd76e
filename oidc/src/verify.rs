//! Verifying a bearer JWT: its issuer first (a token of another issuer is not ours to judge),
//! the algorithm against the allow-list, the key by `kid`, the signature (by `jsonwebtoken`),
//! then `iss`, `aud`, `azp`, `exp`, `nbf` and `iat` with the configured clock skew, each refusal
//! saying what was wrong in words the token's holder already knows.
//!
//! The time checks are ours, not the crate's, so that `now` is a parameter (tests) and the
//! messages carry the times; the crate checks the signature only.

use crate::config::Config;
use crate::jwks::{KeySet, names};
use jsonwebtoken::{Algorithm, Validation};
use serde_json::{Map, Value};
use std::time::Duration;

/// Largest bearer token looked at (a group-claim bomb is refused unparsed).
pub const MAX_TOKEN_BYTES: usize = 16 * 1024;

/// A token's claims.
pub type Claims = Map<String, Value>;

/// Why a bearer token was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerifyError {
    /// Over [`MAX_TOKEN_BYTES`].
    #[error("the bearer token is {0} bytes; at most {MAX_TOKEN_BYTES} are accepted")]
    TooLarge(usize),
    /// Not a compact JWS with a JSON header and payload.
    #[error("the bearer token is not a JWT: {0}")]
    Malformed(String),
    /// A token of another issuer (or none): not this hub's to judge.
    #[error("the bearer token's issuer is {got:?}, not {want:?}")]
    Issuer {
        /// The token's `iss` (empty when it has none).
        got: String,
        /// The configured issuer.
        want: String,
    },
    /// A header this hub does not understand (`crit`).
    #[error("the bearer token names critical header extensions ({0}); none are supported")]
    Critical(String),
    /// An algorithm outside `--oidc-signing-algs`.
    #[error("the bearer token is signed with {got}; this hub accepts {allowed}")]
    // `got` is the header's text, Debug-quoted unless it is a plain algorithm name: a forged
    // `alg` cannot write control characters into a message or a log line.
    Algorithm {
        /// The header's `alg`.
        got: String,
        /// The accepted ones.
        allowed: String,
    },
    /// No published key has the token's `kid` (and fits its algorithm).
    #[error("the bearer token is signed with a key the issuer does not publish (kid {0:?})")]
    UnknownKey(String),
    /// The signature does not verify.
    #[error("the bearer token's signature does not verify")]
    Signature,
    /// The token has expired.
    #[error("the bearer token expired at {at} (clock skew allowed {skew}s)")]
    Expired {
        /// Its `exp`, RFC 3339.
        at: String,
        /// The skew allowed, in seconds.
        skew: u64,
    },
    /// `nbf` is in the future.
    #[error("the bearer token is not valid before {at} (clock skew allowed {skew}s)")]
    NotYetValid {
        /// Its `nbf`, RFC 3339.
        at: String,
        /// The skew allowed, in seconds.
        skew: u64,
    },
    /// `iat` is in the future.
    #[error("the bearer token was issued in the future, at {at} (clock skew allowed {skew}s)")]
    IssuedInFuture {
        /// Its `iat`, RFC 3339.
        at: String,
        /// The skew allowed, in seconds.
        skew: u64,
    },
    /// `aud` names none of the hub's client ids.
    #[error("the bearer token's audience is {got}, not {want}")]
    Audience {
        /// The token's `aud`.
        got: String,
        /// The accepted audiences.
        want: String,
    },
    /// `azp` names another client (a token of several audiences).
    #[error("the bearer token was issued to {got:?} (azp), not to {want}")]
    AuthorizedParty {
        /// The token's `azp`.
        got: String,
        /// The accepted audiences.
        want: String,
    },
    /// A claim the verifier needs is absent or not of its type.
    #[error("the bearer token's {claim:?} claim is {why}")]
    Claim {
        /// The claim.
        claim: &'static str,
        /// `missing`, `not a string`, …
        why: &'static str,
    },
}

/// A verified token: its claims and when it expires.
#[derive(Debug, Clone, PartialEq)]
pub struct Verified {
    /// Its claims.
    pub claims: Claims,
    /// Its `exp`, in seconds since the Unix epoch.
    pub expires: u64,
}

/// Verifies tokens of one issuer.
#[derive(Debug, Clone)]
pub struct Verifier {
    config: Config,
}

impl Verifier {
    /// The verifier for `config`.
    pub fn new(config: Config) -> Self {
        install_provider();
        Self { config }
    }

    /// Its configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The issuer a token claims, unverified: whether it is this verifier's to judge at all.
    pub fn is_mine(&self, token: &str) -> bool {
        token.len() <= MAX_TOKEN_BYTES
            && parts(token)
                .ok()
                .and_then(|(_, payload)| payload.get("iss").cloned())
                .is_some_and(|iss| iss.as_str() == Some(self.config.issuer.as_str()))
    }

    /// Verifies `token` against `keys` at `now` (seconds since the Unix epoch).
    pub fn verify(&self, token: &str, keys: &KeySet, now: u64) -> Result<Verified, VerifyError> {
        if token.len() > MAX_TOKEN_BYTES {
            return Err(VerifyError::TooLarge(token.len()));
        }
        let (header, payload) = parts(token)?;
        let issuer = payload.get("iss").and_then(Value::as_str).unwrap_or("");
        if issuer != self.config.issuer {
            return Err(VerifyError::Issuer {
                got: issuer.into(),
                want: self.config.issuer.clone(),
            });
        }
        if let Some(crit) = header.get("crit") {
            return Err(VerifyError::Critical(crit.to_string()));
        }
        let alg_name = header.get("alg").and_then(Value::as_str).unwrap_or("");
        let alg = alg_name
            .parse::<Algorithm>()
            .ok()
            .filter(|a| self.config.algorithms.contains(a))
            .ok_or_else(|| VerifyError::Algorithm {
                got: if alg_name.is_empty() {
                    "no algorithm".into()
                } else if alg_name.len() <= 16
                    && alg_name.chars().all(|c| c.is_ascii_alphanumeric())
                {
                    alg_name.into()
                } else {
                    format!("{alg_name:?}")
                },
                allowed: names(&self.config.algorithms),
            })?;
        let kid = header.get("kid").and_then(Value::as_str);
        let key = keys
            .find(kid, alg)
            .ok_or_else(|| VerifyError::UnknownKey(kid.unwrap_or("").into()))?;
        // The crate checks the signature only; the claims are checked below with `now`.
        let mut validation = Validation::new(alg);
        validation.required_spec_claims.clear();
        validation.validate_exp = false;
        validation.validate_nbf = false;
        validation.validate_aud = false;
        let data = jsonwebtoken::decode::<Claims>(token, key.decoding(), &validation).map_err(
            |e| match e.kind() {
                jsonwebtoken::errors::ErrorKind::InvalidSignature => VerifyError::Signature,
                _ => VerifyError::Malformed(e.to_string()),
            },
        )?;
        let expires = check_claims(&self.config, &data.claims, now)?;
        Ok(Verified {
            claims: data.claims,
            expires,
        })
    }
}

/// The checks on a verified token's registered claims; its `exp` when they pass.
pub fn check_claims(config: &Config, claims: &Claims, now: u64) -> Result<u64, VerifyError> {
    let skew = config.clock_skew.as_secs();
    match claims.get("iss").map(Value::as_str) {
        Some(Some(iss)) if iss == config.issuer => {}
        Some(Some(iss)) => {
            return Err(VerifyError::Issuer {
                got: iss.into(),
                want: config.issuer.clone(),
            });
        }
        _ => return Err(claim("iss", claims)),
    }
    let audiences = string_or_array(claims.get("aud")).ok_or_else(|| claim("aud", claims))?;
    if !audiences.iter().any(|a| config.audiences.contains(a)) {
        return Err(VerifyError::Audience {
            got: format!("{audiences:?}"),
            want: want(&config.audiences),
        });
    }
    authorized_party(config, &audiences, claims)?;
    let exp = time_claim(claims, "exp")?.ok_or(VerifyError::Claim {
        claim: "exp",
        why: "missing",
    })?;
    if now > exp.saturating_add(skew) {
        return Err(VerifyError::Expired {
            at: rfc3339(exp),
            skew,
        });
    }
    if let Some(nbf) = time_claim(claims, "nbf")?
        && now.saturating_add(skew) < nbf
    {
        return Err(VerifyError::NotYetValid {
            at: rfc3339(nbf),
            skew,
        });
    }
    if let Some(iat) = time_claim(claims, "iat")?
        && iat > now.saturating_add(skew)
    {
        return Err(VerifyError::IssuedInFuture {
            at: rfc3339(iat),
            skew,
        });
    }
    match claims.get("sub") {
        Some(Value::String(s)) if !s.is_empty() => {}
        _ => return Err(claim("sub", claims)),
    }
    Ok(exp)
}

/// OpenID Connect Core 1.0 §3.1.3.7 (4, 5) for a token of several audiences: it must name
/// the party it was issued to (`azp`), and that party must be one of the hub's client ids — a
/// token issued to another client that also lists the hub is that client's credential, not one
/// for the hub. A token whose only audience is the hub's may name another party: the issuer
/// minted it for the hub on that party's request (Dex's cross-client trust: `aud` the hub's
/// client, `azp` the CLI's), as kube-apiserver accepts.
fn authorized_party(
    config: &Config,
    audiences: &[String],
    claims: &Claims,
) -> Result<(), VerifyError> {
    let azp = match claims.get("azp") {
        None if audiences.len() > 1 => {
            return Err(VerifyError::Claim {
                claim: "azp",
                why: "missing from a token of several audiences",
            });
        }
        None => return Ok(()),
        Some(azp) => azp.as_str().ok_or(VerifyError::Claim {
            claim: "azp",
            why: "not a string",
        })?,
    };
    if audiences.len() > 1 && !config.audiences.iter().any(|a| a == azp) {
        return Err(VerifyError::AuthorizedParty {
            got: azp.into(),
            want: want(&config.audiences),
        });
    }
    Ok(())
}

/// Seconds since the Unix epoch now.
pub fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
        .as_secs()
}

/// `2026-11-30T01:02:03Z`.
pub fn rfc3339(secs: u64) -> String {
    i64::try_from(secs)
        .ok()
        .and_then(|s| time::OffsetDateTime::from_unix_timestamp(s).ok())
        .and_then(|t| {
            t.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_else(|| format!("{secs} (seconds since 1970)"))
}

/// A string claim or an array of strings (`aud`, and groups).
pub(crate) fn string_or_array(value: Option<&Value>) -> Option<Vec<String>> {
    match value? {
        Value::String(s) => Some(vec![s.clone()]),
        Value::Array(items) => items
            .iter()
            .map(|v| v.as_str().map(str::to_string))
            .collect(),
        _ => None,
    }
}

fn want(audiences: &[String]) -> String {
    match audiences {
        [one] => format!("{one:?}"),
        many => format!("one of {many:?}"),
    }
}

fn claim(name: &'static str, claims: &Claims) -> VerifyError {
    VerifyError::Claim {
        claim: name,
        why: if claims.contains_key(name) {
            "not of the right type"
        } else {
            "missing"
        },
    }
}

/// A NumericDate claim (a JSON number, possibly fractional), if present.
fn time_claim(claims: &Claims, name: &'static str) -> Result<Option<u64>, VerifyError> {
    match claims.get(name) {
        None => Ok(None),
        Some(Value::Number(n)) => n
            .as_u64()
            .or_else(|| n.as_f64().filter(|f| *f >= 0.0).map(|f| f as u64))
            .map(Some)
            .ok_or(VerifyError::Claim {
                claim: name,
                why: "not a time in seconds since 1970",
            }),
        Some(_) => Err(VerifyError::Claim {
            claim: name,
            why: "not a number",
        }),
    }
}

/// The header and payload of a compact JWS, as JSON objects (nothing verified).
fn parts(token: &str) -> Result<(Claims, Claims), VerifyError> {
    let mut split = token.split('.');
    let (Some(header), Some(payload), Some(_), None) =
        (split.next(), split.next(), split.next(), split.next())
    else {
        return Err(VerifyError::Malformed(
            "want three base64url parts separated by dots".into(),
        ));
    };
    let json = |part: &str, what: &str| -> Result<Claims, VerifyError> {
        let bytes = data_encoding::BASE64URL_NOPAD
            .decode(part.as_bytes())
            .map_err(|_| VerifyError::Malformed(format!("its {what} is not base64url")))?;
        serde_json::from_slice(&bytes)
            .map_err(|_| VerifyError::Malformed(format!("its {what} is not a JSON object")))
    };
    Ok((json(header, "header")?, json(payload, "payload")?))
}

/// Selects the RustCrypto provider for `jsonwebtoken` (idempotent): with one backend feature
/// the crate infers it, but a second one enabled anywhere in the graph would leave it
/// panicking on first use.
fn install_provider() {
    let _already = jsonwebtoken::crypto::CryptoProvider::install_default(
        &jsonwebtoken::crypto::rust_crypto::DEFAULT_PROVIDER,
    );
}
