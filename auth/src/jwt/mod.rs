//! NATS v2 JWTs: `base64url(header).base64url(claims).base64url(ed25519 signature)`, the
//! header `{"typ":"JWT","alg":"ed25519-nkey"}`, the claims' `jti` the base32 SHA-256 of the
//! claims without it, as nats-io/jwt v2 writes them. Only the fields Flotilla uses are modelled;
//! decoding keeps unknown fields out and verifies the signature against `iss`.

use data_encoding::{BASE32_NOPAD, BASE64URL_NOPAD};
use nkeys::KeyPair;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;

const HEADER: &str = r#"{"typ":"JWT","alg":"ed25519-nkey"}"#;

/// What a JWT could not be.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum JwtError {
    /// Not three base64url parts.
    #[error("not a JWT: {0}")]
    Malformed(String),
    /// The header names another algorithm.
    #[error("unsupported JWT algorithm {0:?} (want ed25519-nkey)")]
    Algorithm(String),
    /// The claims are not the expected kind.
    #[error("JWT claims: {0}")]
    Claims(String),
    /// The signature does not verify against the issuer's key.
    #[error("JWT signature does not verify against its issuer {0}")]
    Signature(String),
    /// Signing failed (the key has no seed).
    #[error("cannot sign: {0}")]
    Sign(String),
    /// The JWT verifies, but was signed by a key that may not issue it.
    #[error(
        "JWT about {sub} is issued by {got}, which is not one of its expected issuers {want:?}"
    )]
    Issuer {
        /// The JWT's subject.
        sub: String,
        /// Who signed it.
        got: String,
        /// Who may sign it.
        want: Vec<String>,
    },
    /// A user JWT signed by an account signing key names another account (or none).
    #[error("user JWT about {sub} has issuer_account {got:?}, want {want:?}")]
    IssuerAccount {
        /// The JWT's subject.
        sub: String,
        /// Its `issuer_account`.
        got: String,
        /// The account.
        want: String,
    },
    /// The JWT has expired.
    #[error("JWT about {sub} expired at {exp} (now {now})")]
    Expired {
        /// The JWT's subject.
        sub: String,
        /// Its expiry (Unix seconds).
        exp: i64,
        /// The time it was checked at.
        now: i64,
    },
}

/// The registered claims every NATS JWT has, and its NATS-specific part `N`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Claims<N> {
    /// Unique id: base32 SHA-256 of the claims without it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub jti: String,
    /// Issued at (Unix seconds).
    pub iat: i64,
    /// Issuer: the public key that signed.
    pub iss: String,
    /// Human-readable name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// Subject: the public key the JWT is about.
    pub sub: String,
    /// Expiry (Unix seconds), when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exp: Option<i64>,
    /// The NATS part.
    pub nats: N,
}

/// An operator's NATS claims.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Operator {
    /// Keys that may sign account JWTs besides the operator's own.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub signing_keys: Vec<String>,
    /// The system account's public key.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub system_account: String,
    /// `operator`.
    #[serde(rename = "type")]
    pub kind: String,
    /// 2.
    pub version: u8,
}

/// An account's limits; -1 is unlimited. Non-zero storage enables JetStream for the account.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AccountLimits {
    /// Subscriptions.
    pub subs: i64,
    /// Bytes.
    pub data: i64,
    /// Message payload size.
    pub payload: i64,
    /// Imports.
    pub imports: i64,
    /// Exports.
    pub exports: i64,
    /// Wildcard exports allowed.
    pub wildcards: bool,
    /// Client connections.
    pub conn: i64,
    /// Leaf node connections.
    pub leaf: i64,
    /// JetStream memory storage.
    pub mem_storage: i64,
    /// JetStream file storage.
    pub disk_storage: i64,
    /// JetStream streams.
    pub streams: i64,
    /// JetStream consumers.
    pub consumer: i64,
}

impl AccountLimits {
    /// Everything unlimited, JetStream enabled.
    pub fn unlimited_with_jetstream() -> Self {
        Self {
            subs: -1,
            data: -1,
            payload: -1,
            imports: -1,
            exports: -1,
            wildcards: true,
            conn: -1,
            leaf: -1,
            mem_storage: -1,
            disk_storage: -1,
            streams: -1,
            consumer: -1,
        }
    }

    /// Everything unlimited, no JetStream (the system account).
    pub fn unlimited() -> Self {
        Self {
            mem_storage: 0,
            disk_storage: 0,
            streams: 0,
            consumer: 0,
            ..Self::unlimited_with_jetstream()
        }
    }
}

/// An account's NATS claims.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Account {
    /// Limits.
    pub limits: AccountLimits,
    /// Keys that may sign user JWTs of this account besides the account's own.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub signing_keys: Vec<String>,
    /// Revoked user keys: JWTs of that user issued at or before the time are refused.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub revocations: BTreeMap<String, i64>,
    /// Subjects other accounts may import from this one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exports: Vec<Export>,
    /// Subjects this account takes from other accounts' exports.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub imports: Vec<Import>,
    /// `account`.
    #[serde(rename = "type")]
    pub kind: String,
    /// 2.
    pub version: u8,
}

/// Whether an export or import carries a stream (one-way messages) or a service
/// (request/reply: the server remaps the requester's reply subject into the exporting account).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ExportKind {
    /// Messages published in the exporting account reach the importer's subscribers.
    Stream,
    /// The importer's requests reach the exporter's subscribers; answers go back through a
    /// reply subject the server makes (`_R_.…`), never through one the requester chose.
    Service,
}

/// Subjects an account offers to others.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Export {
    /// Shown by tools.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// The exported subject (wildcards allowed).
    pub subject: String,
    /// Stream or service.
    #[serde(rename = "type")]
    pub kind: ExportKind,
    /// Services: `Singleton` (one answer per request) or `Stream`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub response_type: String,
}

/// Subjects an account takes from another account's export.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Import {
    /// Shown by tools.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// The subject, as the exporter names it.
    pub subject: String,
    /// The exporting account's public key.
    pub account: String,
    /// Stream or service.
    #[serde(rename = "type")]
    pub kind: ExportKind,
    /// Services: the server adds a `Nats-Request-Info` header naming the requesting account and
    /// user to each request (and replaces any such header the requester set).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub share: bool,
}

/// Subjects a user may or may not use.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Permission {
    /// Allowed subjects (wildcards allowed); empty with an empty deny list allows everything.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow: Vec<String>,
    /// Denied subjects.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deny: Vec<String>,
}

/// Replies a user may publish to requests it received, without publish permission on them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResponsePermission {
    /// Replies per request.
    pub max: i64,
    /// How long the permission lasts (nanoseconds; 0 = until the reply).
    pub ttl: i64,
}

/// A user's NATS claims.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct User {
    /// Publish permissions.
    #[serde(rename = "pub", default)]
    pub publish: Permission,
    /// Subscribe permissions.
    #[serde(rename = "sub", default)]
    pub subscribe: Permission,
    /// Reply permissions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resp: Option<ResponsePermission>,
    /// Subscriptions (-1 unlimited).
    pub subs: i64,
    /// Bytes (-1 unlimited).
    pub data: i64,
    /// Payload size (-1 unlimited).
    pub payload: i64,
    /// The account, when the JWT is signed by one of its signing keys.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub issuer_account: String,
    /// `user`.
    #[serde(rename = "type")]
    pub kind: String,
    /// 2.
    pub version: u8,
}

impl User {
    /// A user with these permissions and no limits.
    pub fn new(publish: Permission, subscribe: Permission) -> Self {
        Self {
            publish,
            subscribe,
            resp: None,
            subs: -1,
            data: -1,
            payload: -1,
            issuer_account: String::new(),
            kind: "user".into(),
            version: 2,
        }
    }
}

impl Operator {
    /// Operator claims.
    pub fn new(signing_keys: Vec<String>, system_account: String) -> Self {
        Self {
            signing_keys,
            system_account,
            kind: "operator".into(),
            version: 2,
        }
    }
}

impl Account {
    /// Account claims.
    pub fn new(limits: AccountLimits, signing_keys: Vec<String>) -> Self {
        Self {
            limits,
            signing_keys,
            revocations: BTreeMap::new(),
            exports: Vec::new(),
            imports: Vec::new(),
            kind: "account".into(),
            version: 2,
        }
    }
}

/// Kinds of NATS claims, for decoding.
pub trait Kind: Serialize + DeserializeOwned {
    /// The `type` field's value.
    const KIND: &'static str;
    /// The `type` field of this value.
    fn kind(&self) -> &str;
}

impl Kind for Operator {
    const KIND: &'static str = "operator";
    fn kind(&self) -> &str {
        &self.kind
    }
}

impl Kind for Account {
    const KIND: &'static str = "account";
    fn kind(&self) -> &str {
        &self.kind
    }
}

impl Kind for User {
    const KIND: &'static str = "user";
    fn kind(&self) -> &str {
        &self.kind
    }
}

impl<N: Kind> Claims<N> {
    /// Claims issued at `iat` about `sub`, signed later by [`Claims::encode`].
    pub fn new(name: impl Into<String>, sub: impl Into<String>, iat: i64, nats: N) -> Self {
        Self {
            jti: String::new(),
            iat,
            iss: String::new(),
            name: name.into(),
            sub: sub.into(),
            exp: None,
            nats,
        }
    }

    /// Signs the claims with `signer` (which becomes `iss`) and returns the JWT.
    pub fn encode(mut self, signer: &KeyPair) -> Result<String, JwtError> {
        self.iss = signer.public_key();
        self.jti = String::new();
        let without_id = serde_json::to_vec(&self).map_err(|e| JwtError::Claims(e.to_string()))?;
        self.jti = BASE32_NOPAD.encode(&Sha256::digest(&without_id));
        let claims = serde_json::to_vec(&self).map_err(|e| JwtError::Claims(e.to_string()))?;
        let input = format!(
            "{}.{}",
            BASE64URL_NOPAD.encode(HEADER.as_bytes()),
            BASE64URL_NOPAD.encode(&claims)
        );
        let signature = signer
            .sign(input.as_bytes())
            .map_err(|e| JwtError::Sign(e.to_string()))?;
        Ok(format!("{input}.{}", BASE64URL_NOPAD.encode(&signature)))
    }

    /// Decodes a JWT of this kind and verifies its signature against its `iss`.
    pub fn decode(jwt: &str) -> Result<Self, JwtError> {
        let mut parts = jwt.trim().split('.');
        let (Some(h), Some(c), Some(s), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(JwtError::Malformed("want three dot-separated parts".into()));
        };
        let b64 = |part: &str, what: &str| {
            BASE64URL_NOPAD
                .decode(part.trim_end_matches('=').as_bytes())
                .map_err(|e| JwtError::Malformed(format!("{what}: {e}")))
        };
        let header: serde_json::Value = serde_json::from_slice(&b64(h, "header")?)
            .map_err(|e| JwtError::Malformed(format!("header: {e}")))?;
        let alg = header["alg"].as_str().unwrap_or_default();
        if alg != "ed25519-nkey" && alg != "ed25519" {
            return Err(JwtError::Algorithm(alg.to_string()));
        }
        let value: serde_json::Value = serde_json::from_slice(&b64(c, "claims")?)
            .map_err(|e| JwtError::Claims(e.to_string()))?;
        let kind = value["nats"]["type"].as_str().unwrap_or_default();
        if kind != N::KIND {
            return Err(JwtError::Claims(format!(
                "type {kind:?}, want {:?}",
                N::KIND
            )));
        }
        let claims: Self =
            serde_json::from_value(value).map_err(|e| JwtError::Claims(e.to_string()))?;
        let issuer = KeyPair::from_public_key(&claims.iss)
            .map_err(|e| JwtError::Claims(format!("iss {:?}: {e}", claims.iss)))?;
        let signature = b64(s, "signature")?;
        issuer
            .verify(format!("{h}.{c}").as_bytes(), &signature)
            .map_err(|_| JwtError::Signature(claims.iss.clone()))?;
        Ok(claims)
    }

    /// Decodes a JWT of this kind, verifies its signature and that one of `issuers` signed it.
    pub fn decode_from(jwt: &str, issuers: &[&str]) -> Result<Self, JwtError> {
        let claims = Self::decode(jwt)?;
        if !issuers.contains(&claims.iss.as_str()) {
            return Err(JwtError::Issuer {
                sub: claims.sub,
                got: claims.iss,
                want: issuers.iter().map(|s| s.to_string()).collect(),
            });
        }
        Ok(claims)
    }

    /// Whether the claims have expired at `now` (Unix seconds); a JWT without `exp` never does.
    pub fn check_expiry(&self, now: i64) -> Result<(), JwtError> {
        match self.exp {
            Some(exp) if exp <= now => Err(JwtError::Expired {
                sub: self.sub.clone(),
                exp,
                now,
            }),
            _ => Ok(()),
        }
    }
}

impl Claims<User> {
    /// Decodes a user JWT of `account` as a NATS server would accept it: signed by the account
    /// itself, or by one of `signing_keys` (the account JWT's) with `issuer_account` naming the
    /// account; and not expired at `now`.
    pub fn decode_user(
        jwt: &str,
        account: &str,
        signing_keys: &[String],
        now: i64,
    ) -> Result<Self, JwtError> {
        let issuers: Vec<&str> = std::iter::once(account)
            .chain(signing_keys.iter().map(String::as_str))
            .collect();
        let claims = Self::decode_from(jwt, &issuers)?;
        let by_account = claims.iss == account && claims.nats.issuer_account.is_empty();
        if !by_account && claims.nats.issuer_account != account {
            return Err(JwtError::IssuerAccount {
                sub: claims.sub,
                got: claims.nats.issuer_account,
                want: account.to_string(),
            });
        }
        claims.check_expiry(now)?;
        Ok(claims)
    }
}

impl Claims<Operator> {
    /// Decodes an operator JWT, which its operator signs itself.
    pub fn decode_operator(jwt: &str) -> Result<Self, JwtError> {
        let claims = Self::decode(jwt)?;
        if claims.iss != claims.sub {
            return Err(JwtError::Issuer {
                sub: claims.sub.clone(),
                got: claims.iss,
                want: vec![claims.sub],
            });
        }
        Ok(claims)
    }
}

impl Claims<Account> {
    /// Decodes an account JWT signed by the operator or one of its signing keys (from the
    /// operator JWT).
    pub fn decode_account(jwt: &str, operator: &Claims<Operator>) -> Result<Self, JwtError> {
        let issuers: Vec<&str> = std::iter::once(operator.sub.as_str())
            .chain(operator.nats.signing_keys.iter().map(String::as_str))
            .collect();
        Self::decode_from(jwt, &issuers)
    }
}

#[cfg(test)]
mod tests;
