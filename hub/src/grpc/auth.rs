//! Who may call the gRPC API: bearer tokens with an `admin` or a `read-only` role.
//!
//! Tokens come from a file (`--api-token-file`), one per line, `TOKEN,NAME,ROLE`, in the manner of
//! Kubernetes' static token file: the hub keeps only each token's SHA-256, never logs one, and a
//! read-only identity may call `Get*`, `List*`, `Watch*` and `Debug*` methods, health and
//! reflection, and nothing that changes state. The read-only proxy to spokes is admin-only: it
//! can read any object of a spoke, Secrets included. Health checks need no token, so load
//! balancers and probes keep working.
//!
//! Without a token file the API is open — the default for the demo on loopback; the binary refuses
//! to serve it open on any other address unless told to (`--api-allow-unauthenticated`).

use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use thiserror::Error;

/// What an identity may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Read only: get, list, watch, debug.
    ReadOnly,
    /// Everything.
    Admin,
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Role::ReadOnly => "read-only",
            Role::Admin => "admin",
        })
    }
}

/// Who is calling (put in the request's extensions for the services).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// The name the token file gives it.
    pub name: String,
    /// Its role.
    pub role: Role,
}

/// What a method needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// No token (health checks).
    Open,
    /// Any identity.
    Read,
    /// An admin.
    Write,
}

/// The access a gRPC method path (`/package.Service/Method`) needs. Unknown methods need the
/// most.
pub fn access(path: &str) -> Access {
    let (service, method) = path
        .trim_start_matches('/')
        .split_once('/')
        .unwrap_or(("", ""));
    if service.starts_with("grpc.health.") {
        return Access::Open;
    }
    if service.starts_with("grpc.reflection.") {
        return Access::Read;
    }
    let reads = ["Get", "List", "Watch", "Debug"];
    if service.starts_with("flotilla.") && reads.iter().any(|r| method.starts_with(r)) {
        Access::Read
    } else {
        Access::Write
    }
}

/// A token file that cannot be used.
#[derive(Debug, Error)]
pub enum TokenFileError {
    /// It cannot be read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A line is wrong (the token itself is never shown).
    #[error("{path}:{line}: {reason}")]
    Line {
        /// The file.
        path: String,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        reason: String,
    },
}

/// Shortest accepted token: guessing one must be hopeless.
pub const MIN_TOKEN_LEN: usize = 16;

/// The known tokens, by SHA-256.
#[derive(Clone, Default)]
pub struct Tokens {
    by_hash: HashMap<[u8; 32], Identity>,
}

impl fmt::Debug for Tokens {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Tokens({} identities)", self.by_hash.len())
    }
}

fn hash(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

impl Tokens {
    /// Reads a token file: `TOKEN,NAME,ROLE` per line, `#` comments and blank lines allowed;
    /// ROLE is `admin` or `read-only`. Reports the first bad line by number.
    pub fn load(path: &Path) -> Result<Self, TokenFileError> {
        let text = std::fs::read_to_string(path).map_err(|source| TokenFileError::Io {
            path: path.display().to_string(),
            source,
        })?;
        Self::parse(&path.display().to_string(), &text)
    }

    /// Parses the text of a token file named `path` (for messages).
    pub fn parse(path: &str, text: &str) -> Result<Self, TokenFileError> {
        let mut tokens = Self::default();
        for (i, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let bad = |reason: String| TokenFileError::Line {
                path: path.to_string(),
                line: i + 1,
                reason,
            };
            let fields: Vec<&str> = line.split(',').map(str::trim).collect();
            let [token, name, role] = fields[..] else {
                return Err(bad(format!(
                    "want TOKEN,NAME,ROLE (3 fields), found {}",
                    fields.len()
                )));
            };
            if token.len() < MIN_TOKEN_LEN {
                return Err(bad(format!(
                    "the token of {name:?} is shorter than {MIN_TOKEN_LEN} characters"
                )));
            }
            if name.is_empty() {
                return Err(bad("NAME is empty".into()));
            }
            let role = match role {
                "admin" => Role::Admin,
                "read-only" => Role::ReadOnly,
                other => {
                    return Err(bad(format!("ROLE {other:?} is not admin or read-only")));
                }
            };
            let identity = Identity {
                name: name.to_string(),
                role,
            };
            if tokens.by_hash.insert(hash(token), identity).is_some() {
                return Err(bad(format!("the token of {name:?} is used twice")));
            }
        }
        if tokens.by_hash.is_empty() {
            return Err(TokenFileError::Line {
                path: path.to_string(),
                line: 0,
                reason: "no tokens: an empty file would lock everyone out".into(),
            });
        }
        Ok(tokens)
    }

    /// The identity a bearer token belongs to.
    pub fn identify(&self, token: &str) -> Option<&Identity> {
        self.by_hash.get(&hash(token))
    }

    /// The decision for a call to `path` with the `authorization` header value `header`.
    pub fn authorize(
        &self,
        path: &str,
        header: Option<&str>,
    ) -> Result<Option<Identity>, tonic::Status> {
        let need = access(path);
        if need == Access::Open {
            return Ok(None);
        }
        let token = header
            .and_then(|h| h.strip_prefix("Bearer "))
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .ok_or_else(|| {
                tonic::Status::unauthenticated(
                    "no bearer token: pass --token or set FLOTILLA_TOKEN",
                )
            })?;
        let identity = self.identify(token).ok_or_else(|| {
            tonic::Status::unauthenticated("the bearer token is not known to this hub")
        })?;
        if need == Access::Write && identity.role != Role::Admin {
            return Err(tonic::Status::permission_denied(format!(
                "{} ({}) may not call {path}: it changes state or reads spoke objects",
                identity.name, identity.role
            )));
        }
        Ok(Some(identity.clone()))
    }
}

/// A tower layer that authenticates and authorizes every call with [`Tokens`] (open when
/// `None`).
#[derive(Clone)]
pub struct Authenticate {
    tokens: Option<Arc<Tokens>>,
}

impl Authenticate {
    /// The layer.
    pub fn new(tokens: Option<Tokens>) -> Self {
        Self {
            tokens: tokens.map(Arc::new),
        }
    }
}

impl<S> tower::Layer<S> for Authenticate {
    type Service = Authenticated<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Authenticated {
            inner,
            tokens: self.tokens.clone(),
        }
    }
}

/// The service [`Authenticate`] wraps around the gRPC router.
#[derive(Clone)]
pub struct Authenticated<S> {
    inner: S,
    tokens: Option<Arc<Tokens>>,
}

impl<S, B, R> tower::Service<http::Request<B>> for Authenticated<S>
where
    S: tower::Service<http::Request<B>, Response = http::Response<R>>,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    R: Default + Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: http::Request<B>) -> Self::Future {
        if let Some(tokens) = &self.tokens {
            let header = req
                .headers()
                .get(http::header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok());
            match tokens.authorize(req.uri().path(), header) {
                Ok(Some(identity)) => {
                    if identity.role == Role::Admin && access(req.uri().path()) == Access::Write {
                        tracing::info!(caller = %identity.name, method = %req.uri().path(), "api call");
                    }
                    req.extensions_mut().insert(identity);
                }
                Ok(None) => {}
                Err(status) => {
                    tracing::debug!(method = %req.uri().path(), code = ?status.code(), "api call refused");
                    return Box::pin(std::future::ready(Ok(status.into_http())));
                }
            }
        }
        Box::pin(self.inner.call(req))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = "# operators\n\
        0123456789abcdef-admin,alice,admin\n\
        \n\
        0123456789abcdef-view,bob,read-only\n";

    #[test]
    fn methods_need_what_they_do() {
        assert_eq!(access("/grpc.health.v1.Health/Check"), Access::Open);
        assert_eq!(access("/flotilla.v1.WorkService/ListWorks"), Access::Read);
        assert_eq!(
            access("/flotilla.v1.ClusterService/WatchClusters"),
            Access::Read
        );
        assert_eq!(
            access("/flotilla.v1.PlacementService/DebugPlacement"),
            Access::Read
        );
        assert_eq!(access("/flotilla.v1.WorkService/ApplyWork"), Access::Write);
        assert_eq!(
            access("/flotilla.v1.ClusterService/AcceptClusters"),
            Access::Write
        );
        assert_eq!(access("/flotilla.v1.WorkService/Proxy"), Access::Write);
        assert_eq!(
            access("/grpc.reflection.v1.ServerReflection/ServerReflectionInfo"),
            Access::Read
        );
        assert_eq!(access("/evil"), Access::Write);
    }

    #[test]
    fn roles_are_enforced_and_unknown_tokens_refused() {
        let t = Tokens::parse("tokens.csv", FILE).unwrap();
        let write = "/flotilla.v1.WorkService/ApplyWork";
        let read = "/flotilla.v1.WorkService/ListWorks";
        assert_eq!(
            t.authorize(write, Some("Bearer 0123456789abcdef-admin"))
                .unwrap()
                .unwrap()
                .name,
            "alice"
        );
        assert!(
            t.authorize(read, Some("Bearer 0123456789abcdef-view"))
                .is_ok()
        );
        let denied = t
            .authorize(write, Some("Bearer 0123456789abcdef-view"))
            .unwrap_err();
        assert_eq!(denied.code(), tonic::Code::PermissionDenied);
        assert!(denied.message().contains("bob"), "{}", denied.message());
        for header in [
            None,
            Some("Bearer "),
            Some("Basic x"),
            Some("Bearer nope-nope-nope-nope"),
        ] {
            let e = t.authorize(read, header).unwrap_err();
            assert_eq!(e.code(), tonic::Code::Unauthenticated, "{header:?}");
        }
        assert!(t.authorize("/grpc.health.v1.Health/Check", None).is_ok());
    }

    #[test]
    fn bad_token_files_name_the_line_and_never_show_a_token() {
        for (text, line, what) in [
            ("abc,short,admin\n", 1, "shorter"),
            ("0123456789abcdef,x\n", 1, "3 fields"),
            ("#\n0123456789abcdef,x,root\n", 2, "ROLE"),
            (
                "0123456789abcdef,x,admin\n0123456789abcdef,y,admin\n",
                2,
                "twice",
            ),
            ("# nothing\n", 0, "no tokens"),
        ] {
            let e = Tokens::parse("t.csv", text).unwrap_err().to_string();
            assert!(e.starts_with(&format!("t.csv:{line}:")), "{e}");
            assert!(e.contains(what), "{e}");
            assert!(!e.contains("0123456789abcdef"), "a token leaked: {e}");
        }
        let t = Tokens::parse("t.csv", FILE).unwrap();
        assert!(!format!("{t:?}").contains("0123"));
    }
}
