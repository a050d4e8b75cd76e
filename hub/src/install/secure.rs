//! The secure directory (`flotilla-hub init --dir DIR --tls`) as Kubernetes objects, split by
//! who needs what, and the NATS cluster's configuration.
//!
//! | file | where |
//! |---|---|
//! | `keys/operator.nk`, `keys/system.nk`, `tls/ca-key.pem` | nowhere: the operator identity signs only the operator JWT, the system account's identity only its JWT, and the CA key issues certificates — offline acts |
//! | `tls/server.pem`, `tls/server-key.pem`, `tls/ca.pem`, the rendered `nats.conf` (it holds the routes password) | Secret `flotilla-nats` (NATS pods) |
//! | the hub's signing and account seeds, `hub.creds`, `sys.creds`, `bootstrap.creds`, `keys/sealing.xk`, `tls/ca.pem`, `tls/client*.pem`, the API tokens and TLS | Secret `flotilla-hub` (hub pods) |
//! | `operator.jwt`, `account.jwt`, `agents.jwt`, `system.jwt` | ConfigMap `flotilla-jwt` (public) |
//!
//! The hub's loader (`SecureDir::load`) still reads the two account identity seeds (for their
//! public keys) and wants `bootstrap.creds` present, so both go to the hub's Secret.

use super::{Plan, Problem, metadata};
use data_encoding::BASE64;
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;

/// Files the hub's Secret holds, by their path in the secure directory.
pub const HUB_FILES: &[&str] = &[
    "keys/operator-signing.nk",
    "keys/account.nk",
    "keys/account-signing.nk",
    "keys/agents.nk",
    "keys/agents-signing.nk",
    "keys/sealing.xk",
    "hub.creds",
    "sys.creds",
    "bootstrap.creds",
    "tls/ca.pem",
    "tls/client.pem",
    "tls/client-key.pem",
];
/// The public JWTs (a ConfigMap).
pub const JWT_FILES: &[&str] = &["operator.jwt", "account.jwt", "agents.jwt", "system.jwt"];
/// The NATS server's TLS files.
pub const NATS_TLS_FILES: &[&str] = &["tls/server.pem", "tls/server-key.pem", "tls/ca.pem"];
/// Files that never leave the operator's machine.
pub const OFFLINE_FILES: &[&str] = &["keys/operator.nk", "keys/system.nk", "tls/ca-key.pem"];
/// The server configuration `init` wrote (its accounts are read from it).
pub const SERVER_CONF: &str = "nats-server.conf";

/// Where the NATS pods mount their Secret, and the hubs their copy of the secure directory.
pub const NATS_CONFIG_DIR: &str = "/etc/nats-config";
/// Where the operator JWT is mounted in the NATS pods.
pub const NATS_JWT_DIR: &str = "/etc/nats-jwt";
/// The hub's secure directory (an in-memory copy the hub may write `revocations.json` to).
pub const HUB_SECURE_DIR: &str = "/etc/flotilla/secure";

/// The secure directory's files and the hub's API files, read by the command.
#[derive(Debug, Clone, Default)]
pub struct SecureFiles {
    /// Contents by path relative to the secure directory.
    pub files: BTreeMap<String, Vec<u8>>,
    /// The API tokens file (`--api-token-file`).
    pub api_tokens: Vec<u8>,
    /// The API's TLS certificate chain and key (`--grpc-tls-cert`, `--grpc-tls-key`).
    pub api_tls: Option<(Vec<u8>, Vec<u8>)>,
}

/// The accounts `init` wrote into its server configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Accounts {
    /// The system account's public key.
    pub system: String,
    /// Account public key → JWT, preloaded into the resolver.
    pub preload: Vec<(String, String)>,
    /// The server starts TLS before its INFO line (`init --tls-first`).
    pub tls_first: bool,
}

impl SecureFiles {
    /// Every file the install needs that is missing or is not what it should be.
    pub fn check(&self, plan: &Plan) -> Vec<Problem> {
        let mut problems = Vec::new();
        let needed = HUB_FILES.iter().chain(JWT_FILES).chain(NATS_TLS_FILES);
        for path in needed.chain(std::iter::once(&SERVER_CONF)) {
            if !self.files.contains_key(*path) {
                let fix = if path.starts_with("tls/") {
                    "the install needs TLS: write the directory with flotilla-hub init --tls \
                     (docs/install.md names the --tls-host values)"
                } else {
                    "run flotilla-hub init --dir DIR --tls"
                };
                problems.push(Problem(format!(
                    "secure directory: {path} is missing; {fix}"
                )));
            }
        }
        for path in JWT_FILES {
            if let Some(text) = self.files.get(*path)
                && !looks_like_jwt(text)
            {
                problems.push(Problem(format!(
                    "secure directory: {path} does not look like a JWT (it starts with {:?}): \
                     refusing to put it in a ConfigMap",
                    String::from_utf8_lossy(&text[..text.len().min(2)])
                )));
            }
        }
        if self.files.contains_key(SERVER_CONF)
            && let Err(problem) = self.accounts()
        {
            problems.push(problem);
        }
        if self.api_tokens.is_empty() {
            problems.push(Problem(
                "--api-token-file is needed: the hubs' API listens off loopback, and an API \
                 without tokens is open to anyone who reaches it"
                    .into(),
            ));
        }
        if self.api_tls.is_none() {
            problems.push(Problem(
                "--grpc-tls-cert and --grpc-tls-key are needed: the API's tokens must not cross \
                 the network in plaintext"
                    .into(),
            ));
        }
        if let Some(server) = self.files.get("tls/server.pem") {
            problems.extend(super::tls::check_names(server, plan));
        }
        problems
    }

    /// The system account and the preloaded accounts of `init`'s server configuration.
    pub fn accounts(&self) -> Result<Accounts, Problem> {
        let text = self
            .files
            .get(SERVER_CONF)
            .map(|b| String::from_utf8_lossy(b).into_owned())
            .unwrap_or_default();
        let bad = |what: &str| {
            Problem(format!(
                "secure directory: {SERVER_CONF} has no {what}; it was not written by \
                 flotilla-hub init (run it again with --force)"
            ))
        };
        let system = text
            .lines()
            .find_map(|l| l.trim().strip_prefix("system_account:"))
            .map(|k| k.trim().trim_matches('"').to_string())
            .filter(|k| is_account_key(k))
            .ok_or_else(|| bad("system_account"))?;
        let mut preload = Vec::new();
        let mut lines = text
            .lines()
            .skip_while(|l| !l.starts_with("resolver_preload"));
        lines.next().ok_or_else(|| bad("resolver_preload"))?;
        for line in lines.take_while(|l| l.trim() != "}") {
            let (key, jwt) = line
                .trim()
                .split_once(':')
                .ok_or_else(|| bad("preload line"))?;
            let jwt = jwt.trim().trim_matches('"');
            if !is_account_key(key.trim()) || !looks_like_jwt(jwt.as_bytes()) {
                return Err(bad("well-formed resolver_preload"));
            }
            preload.push((key.trim().to_string(), jwt.to_string()));
        }
        let tls_first = text.lines().any(|l| l.trim() == "handshake_first: true");
        Ok(Accounts {
            system,
            preload,
            tls_first,
        })
    }

    /// The password NATS servers authenticate each other's routes with: derived from the
    /// operator signing seed (one-way, so the password reveals nothing of the seed), so the
    /// same directory always renders the same manifests.
    pub fn routes_password(&self) -> String {
        let seed = self
            .files
            .get("keys/operator-signing.nk")
            .map(Vec::as_slice)
            .unwrap_or_default();
        let mut hash = Sha256::new();
        hash.update(b"flotilla nats routes password v1\0");
        hash.update(seed);
        data_encoding::HEXLOWER.encode(&hash.finalize())
    }
}

/// The Secret key of a file of the secure directory (keys cannot hold `/`).
pub fn secret_key(path: &str) -> String {
    path.replace('/', ".")
}

/// The two Secrets and the JWT ConfigMap.
pub fn objects(plan: &Plan, files: &SecureFiles) -> Vec<Value> {
    let accounts = files.accounts().expect("checked by render");
    let mut nats = Map::new();
    for path in NATS_TLS_FILES {
        nats.insert(secret_key(path), encode(&files.files[*path]));
    }
    let conf = super::nats::config(plan, &accounts, &files.routes_password());
    nats.insert("nats.conf".into(), encode(conf.as_bytes()));
    let mut hub = Map::new();
    for path in HUB_FILES {
        hub.insert(secret_key(path), encode(&files.files[*path]));
    }
    // The hub reads only whether the server starts TLS first from its copy.
    hub.insert(SERVER_CONF.into(), encode(conf.as_bytes()));
    hub.insert("api-tokens".into(), encode(&files.api_tokens));
    if let Some((cert, key)) = &files.api_tls {
        hub.insert("grpc-tls.crt".into(), encode(cert));
        hub.insert("grpc-tls.key".into(), encode(key));
    }
    let jwt: Map<String, Value> = JWT_FILES
        .iter()
        .map(|p| {
            let text = String::from_utf8_lossy(&files.files[*p]).trim().to_string();
            (p.to_string(), Value::String(text))
        })
        .collect();
    vec![
        secret(plan, "flotilla-nats", "nats", nats),
        secret(plan, "flotilla-hub", "flotilla-hub", hub),
        json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": metadata(plan, "flotilla-jwt", "flotilla"),
            "data": jwt,
        }),
    ]
}

fn secret(plan: &Plan, name: &str, app: &str, data: Map<String, Value>) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": metadata(plan, name, app),
        "type": "Opaque",
        "data": data,
    })
}

fn encode(bytes: &[u8]) -> Value {
    Value::String(BASE64.encode(bytes))
}

/// A JWT: three base64url parts (a seed, `SU…`, or a creds file is not).
fn looks_like_jwt(text: &[u8]) -> bool {
    let text = String::from_utf8_lossy(text);
    let parts: Vec<&str> = text.trim().split('.').collect();
    parts.len() == 3
        && text.trim().starts_with("eyJ")
        && parts.iter().all(|p| {
            !p.is_empty()
                && p.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        })
}

/// An account's public NKey (`A…`, 56 characters of base32).
fn is_account_key(key: &str) -> bool {
    key.len() == 56
        && key.starts_with('A')
        && key
            .bytes()
            .all(|b| b.is_ascii_uppercase() || (b'2'..=b'7').contains(&b))
}
