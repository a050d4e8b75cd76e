//! Who is looking: the API's tokens ([`crate::grpc::auth::Tokens`]), sent as
//! `Authorization: Bearer` (scripts, curl) or exchanged once at the sign-in form for a session
//! cookie (browsers cannot send a bearer header when they follow a link).
//!
//! - The cookie holds a random session id, never the token: `HttpOnly` (no script reads it),
//!   `SameSite=Strict` (no other site's page sends it), `Secure` over TLS, `Path=/`. Sessions
//!   live in the hub's memory, bounded in number and age; signing out or a hub restart ends
//!   them.
//! - Every state-changing form (`POST`) carries a CSRF token that a page of another origin
//!   cannot read: the session's own, or — on an open hub (no token file, loopback only) — one
//!   the process drew at start. A POST whose `Sec-Fetch-Site` or `Origin` says it came from
//!   another site is refused too. A bearer-header request needs neither: no browser adds the
//!   header to a cross-site request.
//! - What an identity may do is the API's access table ([`crate::grpc::auth::Identity::may_call`]):
//!   a read-only token sees every view and changes nothing.
//! - What it sees is its grants' [`Visibility`] (issue 48), computed for every request under the
//!   grants in force: a fleet role sees the whole fleet; a team member its sets' clusters and
//!   their works, and its namespaces' placements, rollouts and policies.

use crate::grpc::auth::{Identity, Tokens};
use crate::grpc::guard::{Teams, Visibility};
use http::HeaderMap;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The session cookie's name.
pub const COOKIE: &str = "flotilla_dashboard";

/// How sessions are bounded.
#[derive(Debug, Clone)]
pub struct SessionConfig {
    /// How long a session lasts after sign-in (default 12 h).
    pub ttl: Duration,
    /// Sessions kept at once; past it the oldest goes (default 10,000).
    pub max: usize,
}

impl Default for SessionConfig {
    fn default() -> Self {
        Self {
            ttl: Duration::from_secs(12 * 3600),
            max: 10_000,
        }
    }
}

/// One signed-in browser.
#[derive(Debug, Clone)]
struct Session {
    identity: Identity,
    csrf: String,
    expires: Instant,
}

/// How the viewer proved who it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Via {
    /// A session cookie (its id).
    Session(String),
    /// An `Authorization: Bearer` header.
    Bearer,
    /// Nobody needs to: an open hub (no token file).
    Open,
}

/// Who is looking, and the CSRF token their forms carry.
#[derive(Debug, Clone)]
pub struct Viewer {
    /// The identity of the token.
    pub identity: Identity,
    /// The token every POST form of this viewer carries.
    pub csrf: String,
    /// How it was authenticated.
    pub via: Via,
    /// The API's access table (the tokens').
    pub access: std::sync::Arc<crate::grpc::access::Table>,
    /// What every page says on top while it is so (a recovery window is open).
    pub banner: Option<String>,
    /// The grants it is checked by (none on an open hub), for its live stream.
    pub teams: Teams,
    /// What it may see, under the grants in force when the request came.
    pub sees: Visibility,
}

impl Viewer {
    /// Whether this viewer may call the API method `path` (the API's access table).
    pub fn may(&self, path: &str) -> Result<(), String> {
        // By its fleet role: the dashboard's actions do not check each object's grants yet.
        self.identity.may_call_by_role(&self.access, path)
    }
}

/// Why a request is not let in.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// No bearer header, no session cookie.
    #[error("sign in: no bearer token and no session")]
    NoCredentials,
    /// A bearer token the hub does not know.
    #[error("the bearer token is not known to this hub")]
    UnknownToken,
    /// A session cookie the hub does not know (expired, signed out, hub restarted).
    #[error("the session has ended; sign in again")]
    SessionEnded,
}

/// A viewer `identity`, under the grants in force now (a reloaded file applies to the next
/// page).
fn viewer(identity: &Identity, tokens: &Tokens, csrf: String, via: Via) -> Viewer {
    let identity = identity.clone().scoped(tokens.live());
    let teams = Teams::new(Some(tokens.live().clone()));
    Viewer {
        sees: teams.visibility(Some(&identity)),
        identity,
        csrf,
        via,
        access: tokens.access().clone(),
        banner: None,
        teams,
    }
}

/// The sessions and the open hub's CSRF token.
pub struct Sessions {
    tokens: Option<Tokens>,
    config: SessionConfig,
    sessions: Mutex<HashMap<String, Session>>,
    open_csrf: String,
}

/// A random string of 244 bits (two v4 UUIDs, drawn from the OS's generator).
fn random() -> String {
    format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

impl Sessions {
    /// Sessions for the API's tokens (`None`: an open hub, everyone an admin).
    pub fn new(tokens: Option<Tokens>, config: SessionConfig) -> Self {
        Self {
            tokens,
            config,
            sessions: Mutex::new(HashMap::new()),
            open_csrf: random(),
        }
    }

    /// Whether the hub has tokens (else it is open).
    pub fn guarded(&self) -> bool {
        self.tokens.is_some()
    }

    /// Who sent these headers: a bearer token first, then the session cookie.
    pub fn authenticate(&self, headers: &HeaderMap) -> Result<Viewer, Refusal> {
        let Some(tokens) = &self.tokens else {
            return Ok(Viewer {
                identity: Identity::open(),
                csrf: self.open_csrf.clone(),
                via: Via::Open,
                access: Default::default(),
                banner: None,
                teams: Teams::default(),
                sees: Visibility::All,
            });
        };
        if let Some(h) = headers
            .get(http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
        {
            let token = h.strip_prefix("Bearer ").map(str::trim).unwrap_or_default();
            let identity = tokens.identify(token).ok_or(Refusal::UnknownToken)?;
            return Ok(viewer(&identity, tokens, String::new(), Via::Bearer));
        }
        let id = cookie(headers, COOKIE).ok_or(Refusal::NoCredentials)?;
        let mut sessions = self.sessions.lock().expect("sessions lock");
        let now = Instant::now();
        match sessions.get(&id) {
            Some(s) if s.expires > now => Ok(viewer(
                &s.identity,
                tokens,
                s.csrf.clone(),
                Via::Session(id),
            )),
            Some(_) => {
                sessions.remove(&id);
                Err(Refusal::SessionEnded)
            }
            None => Err(Refusal::SessionEnded),
        }
    }

    /// Signs in with `token` at the form: a new session's id, or `None` for a token the hub
    /// does not know (audited either way). An issuer's ID token pasted here makes a session
    /// that ends when the token expires, if that is sooner than the sessions' TTL: the hub did
    /// not run this sign-in, so it does not outlast the credential it was made from.
    pub fn sign_in(&self, token: &str) -> Option<String> {
        let tokens = self.tokens.as_ref()?;
        match tokens.authenticate(token.trim()) {
            Ok(identity) => {
                let until = match identity.principal.via {
                    crate::grants::Via::Oidc { expires, .. } => Some(expires),
                    _ => None,
                };
                Some(self.start_session(identity, until, "token form"))
            }
            Err(why) => {
                crate::grpc::auth::audit_unauthenticated(
                    None,
                    "dashboard sign-in (token form)",
                    &why,
                );
                None
            }
        }
    }

    /// A new session of `identity` (a new random id, never one the browser brought), ending
    /// after the TTL or at `until` (Unix seconds) if sooner; `how` names the sign-in in the
    /// audit line.
    pub fn start_session(&self, identity: Identity, until: Option<u64>, how: &str) -> String {
        let mut ttl = self.config.ttl;
        if let Some(until) = until {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs());
            ttl = ttl.min(Duration::from_secs(until.saturating_sub(now)));
        }
        crate::grpc::guard::audit_line(
            &identity.principal,
            &format!("dashboard sign-in ({how})"),
            crate::grpc::guard::Outcome::Allowed(&format!("a session of {}s", ttl.as_secs())),
        );
        let id = random();
        let now = Instant::now();
        let mut sessions = self.sessions.lock().expect("sessions lock");
        sessions.retain(|_, s| s.expires > now);
        while sessions.len() >= self.config.max.max(1) {
            let oldest = sessions
                .iter()
                .min_by_key(|(_, s)| s.expires)
                .map(|(k, _)| k.clone());
            match oldest {
                Some(k) => sessions.remove(&k),
                None => break,
            };
        }
        tracing::info!(caller = %identity.name(), role = %identity.role(), via = %identity.principal.via, "dashboard sign-in");
        sessions.insert(
            id.clone(),
            Session {
                identity,
                csrf: random(),
                expires: now + ttl,
            },
        );
        id
    }

    /// The API's tokens (`None` on an open hub).
    pub fn tokens(&self) -> Option<&Tokens> {
        self.tokens.as_ref()
    }

    /// Ends a session.
    pub fn sign_out(&self, id: &str) {
        self.sessions.lock().expect("sessions lock").remove(id);
    }

    /// Sessions kept now.
    pub fn len(&self) -> usize {
        self.sessions.lock().expect("sessions lock").len()
    }

    /// Whether no session is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How long a session lasts.
    pub fn ttl(&self) -> Duration {
        self.config.ttl
    }
}

/// The value of cookie `name` in the request's `Cookie` headers.
pub fn cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(http::header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.to_string())
}

/// The `Set-Cookie` value of a session (`None`: clear it).
pub fn set_cookie(id: Option<&str>, secure: bool, ttl: Duration) -> String {
    let secure = if secure { "; Secure" } else { "" };
    match id {
        Some(id) => format!(
            "{COOKIE}={id}; Path=/; HttpOnly; SameSite=Strict; Max-Age={}{secure}",
            ttl.as_secs()
        ),
        None => format!("{COOKIE}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0{secure}"),
    }
}

/// Whether a browser says the request came from another site (`Sec-Fetch-Site`, else an
/// `Origin` that is not the `Host`). Requests without either (old browsers, curl) pass: the
/// CSRF token still guards them.
pub fn cross_site(headers: &HeaderMap) -> bool {
    let header = |n: http::header::HeaderName| headers.get(n).and_then(|v| v.to_str().ok());
    if let Some(site) = header(http::header::HeaderName::from_static("sec-fetch-site")) {
        return !matches!(site, "same-origin" | "none");
    }
    match (header(http::header::ORIGIN), header(http::header::HOST)) {
        (Some("null"), _) => true,
        (Some(origin), Some(host)) => {
            let origin_host = origin.split_once("://").map_or(origin, |(_, h)| h);
            origin_host != host
        }
        _ => false,
    }
}

/// Whether a POST from `viewer` with the form's `csrf` field may act: a bearer request always
/// may; a browser's must carry its CSRF token and not come from another site.
pub fn check_post(
    viewer: &Viewer,
    form_csrf: Option<&str>,
    headers: &HeaderMap,
) -> Result<(), String> {
    if viewer.via == Via::Bearer {
        return Ok(());
    }
    if cross_site(headers) {
        return Err("refused: the form was sent from another site".into());
    }
    match form_csrf {
        Some(t) if !viewer.csrf.is_empty() && constant_eq(t.as_bytes(), viewer.csrf.as_bytes()) => {
            Ok(())
        }
        _ => Err("refused: the form's CSRF token is missing or stale; reload the page".into()),
    }
}

/// Compares without stopping at the first difference.
pub(crate) fn constant_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Where to go after signing in: a path on this server only (`/…`, never `//host` or a
/// scheme), else the overview.
pub fn safe_next(next: Option<&str>) -> &str {
    match next {
        Some(n)
            if n.starts_with('/')
                && !n.starts_with("//")
                && !n.starts_with("/\\")
                && !n.chars().any(|c| c.is_control()) =>
        {
            n
        }
        _ => "/",
    }
}
