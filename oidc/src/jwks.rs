//! The issuer's published keys (a JWKS), as the verifier uses them: only signature keys of the
//! algorithms the hub accepts, RSA keys of 2048 bits or more, bounded in size and number.

use jsonwebtoken::jwk::{AlgorithmParameters, Jwk, PublicKeyUse};
use jsonwebtoken::{Algorithm, AlgorithmFamily, DecodingKey};

/// Largest JWKS document read.
pub const MAX_BYTES: usize = 256 * 1024;
/// Most keys in one set.
pub const MAX_KEYS: usize = 100;
/// Smallest RSA modulus accepted.
pub const MIN_RSA_BITS: usize = 2048;

/// One usable key.
#[derive(Clone)]
pub struct Key {
    /// Its `kid`.
    pub kid: Option<String>,
    /// The algorithm the JWK states, if it states one.
    pub alg: Option<Algorithm>,
    /// The family of algorithms its type is for.
    pub family: AlgorithmFamily,
    decoding: DecodingKey,
}

impl Key {
    /// The key the signature is checked with.
    pub fn decoding(&self) -> &DecodingKey {
        &self.decoding
    }
}

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Key")
            .field("kid", &self.kid)
            .field("alg", &self.alg)
            .field("family", &self.family)
            .finish()
    }
}

/// The usable keys of one JWKS document.
#[derive(Debug, Clone, Default)]
pub struct KeySet {
    keys: Vec<Key>,
    generation: u64,
    /// SHA-256 over the usable keys as published, in order: an unchanged fetch has the same.
    fingerprint: [u8; 32],
}

/// A JWKS document the hub cannot use.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JwksError {
    /// Over [`MAX_BYTES`].
    #[error("the JWKS is {0} bytes; at most {MAX_BYTES} are read")]
    TooLarge(usize),
    /// Not `{"keys": [...]}`.
    #[error("the JWKS is not a JSON object with a \"keys\" array: {0}")]
    Shape(String),
    /// Over [`MAX_KEYS`].
    #[error("the JWKS has {0} keys; at most {MAX_KEYS} are accepted")]
    TooMany(usize),
    /// No key is usable.
    #[error("the JWKS has no signature key for {algorithms} ({skipped})")]
    NoUsableKey {
        /// The accepted algorithms.
        algorithms: String,
        /// Why each key was skipped.
        skipped: String,
    },
}

impl KeySet {
    /// The usable keys of a JWKS document for the `allowed` algorithms; keys of other types,
    /// uses or algorithms are skipped (an issuer may publish encryption keys too), but a set with
    /// none left is an error naming why each was skipped.
    pub fn from_json(bytes: &[u8], allowed: &[Algorithm]) -> Result<Self, JwksError> {
        if bytes.len() > MAX_BYTES {
            return Err(JwksError::TooLarge(bytes.len()));
        }
        #[derive(serde::Deserialize)]
        struct Document {
            keys: Vec<serde_json::Value>,
        }
        let document: Document =
            serde_json::from_slice(bytes).map_err(|e| JwksError::Shape(e.to_string()))?;
        if document.keys.len() > MAX_KEYS {
            return Err(JwksError::TooMany(document.keys.len()));
        }
        let mut keys = Vec::new();
        let mut skipped = Vec::new();
        let mut fingerprint = sha2::Sha256::default();
        for (i, value) in document.keys.into_iter().enumerate() {
            let text = value.to_string();
            match usable(value, allowed) {
                Ok(key) => {
                    sha2::Digest::update(&mut fingerprint, text.as_bytes());
                    sha2::Digest::update(&mut fingerprint, b"\n");
                    keys.push(key);
                }
                Err(why) => skipped.push(format!("key {i}: {why}")),
            }
        }
        // A key without a kid is only unambiguous alone.
        if keys.len() > 1 && keys.iter().any(|k| k.kid.is_none()) {
            keys.retain(|k| k.kid.is_some());
            skipped.push("keys without a kid among several: skipped".into());
        }
        if keys.is_empty() {
            return Err(JwksError::NoUsableKey {
                algorithms: names(allowed),
                skipped: if skipped.is_empty() {
                    "it lists none".into()
                } else {
                    skipped.join("; ")
                },
            });
        }
        Ok(Self {
            keys,
            generation: 0,
            fingerprint: sha2::Digest::finalize(fingerprint).into(),
        })
    }

    /// The key a token names by `kid` (a token without one: the only key) that fits `alg`.
    pub fn find(&self, kid: Option<&str>, alg: Algorithm) -> Option<&Key> {
        let fits = |k: &&Key| k.family == alg.family() && k.alg.is_none_or(|a| a == alg);
        match kid {
            Some(kid) => self
                .keys
                .iter()
                .filter(|k| k.kid.as_deref() == Some(kid))
                .find(fits),
            None if self.keys.len() == 1 => self.keys.iter().find(fits),
            None => None,
        }
    }

    /// The same set numbered `generation` (the keys task numbers each set it fetches, so
    /// what was verified under one set is known not to be under another).
    pub fn numbered(self, generation: u64) -> Self {
        Self { generation, ..self }
    }

    /// Whether `other` holds the same keys as published (whatever their numbers).
    pub fn same_keys(&self, other: &KeySet) -> bool {
        self.fingerprint == other.fingerprint
    }

    /// Its number.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// How many keys are usable.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Whether no key is usable (never true of a parsed set).
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The kids of the usable keys.
    pub fn kids(&self) -> Vec<&str> {
        self.keys.iter().filter_map(|k| k.kid.as_deref()).collect()
    }
}

/// `RS256, ES256`: algorithm names for messages.
pub fn names(algorithms: &[Algorithm]) -> String {
    algorithms
        .iter()
        .map(|a| format!("{a:?}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn usable(value: serde_json::Value, allowed: &[Algorithm]) -> Result<Key, String> {
    let jwk: Jwk = serde_json::from_value(value).map_err(|e| format!("not a JWK: {e}"))?;
    if let Some(usage) = &jwk.common.public_key_use
        && *usage != PublicKeyUse::Signature
    {
        return Err("not a signature key (use is not \"sig\")".into());
    }
    let alg = match jwk.common.key_algorithm {
        None => None,
        Some(a) => Some(
            Algorithm::try_from(a).map_err(|_| format!("algorithm {a} is not a JWS algorithm"))?,
        ),
    };
    let family = match &jwk.algorithm {
        AlgorithmParameters::RSA(rsa) => {
            let bits = modulus_bits(&rsa.n)?;
            if bits < MIN_RSA_BITS {
                return Err(format!(
                    "an RSA key of {bits} bits (at least {MIN_RSA_BITS} are accepted)"
                ));
            }
            AlgorithmFamily::Rsa
        }
        AlgorithmParameters::EllipticCurve(_) => AlgorithmFamily::Ec,
        AlgorithmParameters::OctetKeyPair(_) => AlgorithmFamily::Ed,
        AlgorithmParameters::OctetKey(_) => return Err("a symmetric key (kty oct)".into()),
        _ => return Err("an unknown key type".into()),
    };
    if let Some(alg) = alg
        && !allowed.contains(&alg)
    {
        return Err(format!("for {alg:?}, which this hub does not accept"));
    }
    if !allowed.iter().any(|a| a.family() == family) {
        return Err(format!(
            "a {family:?} key; this hub accepts {}",
            names(allowed)
        ));
    }
    let decoding = DecodingKey::from_jwk(&jwk).map_err(|e| format!("unusable: {e}"))?;
    Ok(Key {
        kid: jwk.common.key_id,
        alg,
        family,
        decoding,
    })
}

/// The size of a base64url-encoded RSA modulus in bits.
fn modulus_bits(n: &str) -> Result<usize, String> {
    let bytes = data_encoding::BASE64URL_NOPAD
        .decode(n.trim_end_matches('=').as_bytes())
        .map_err(|_| "an RSA modulus that is not base64url".to_string())?;
    let first = bytes
        .iter()
        .position(|b| *b != 0)
        .ok_or("an RSA modulus of zero")?;
    let significant = &bytes[first..];
    Ok(significant.len() * 8 - significant[0].leading_zeros() as usize)
}
