//! The dashboard's sign-in with the OIDC issuer (issue 48, docs/notes/issue-48-design.md §7.1):
//! the authorization-code flow with PKCE, run by the hub for the browser.
//!
//! - `GET /oidc/start?next=/page`: draws `state`, `nonce` and a PKCE verifier
//!   ([`flotilla_oidc::login::Login::begin`]), keeps them by `state` here (at most
//!   [`SignInConfig::pending_max`], for [`SignInConfig::pending_ttl`]), sets the login cookie
//!   [`LOGIN_COOKIE`] to the `state` (`HttpOnly`, `SameSite=Lax` — the issuer's redirect back is
//!   a cross-site navigation a `Strict` cookie would miss — `Path=/oidc`, `Secure` over TLS or
//!   behind an `https` external URL) and sends the browser to the issuer.
//! - `GET /oidc/callback?code&state`: the `state` must be the login cookie's and still kept;
//!   it is taken out before the code is exchanged, so a callback replays nothing. The code is
//!   exchanged with the verifier (and the client secret of a confidential client); the ID token
//!   must verify as a bearer token would, carry the sign-in's `nonce` and name this client. The
//!   session is new (a random id, never a cookie the browser brought) and keeps the user and
//!   groups, never the token; its grants are evaluated on every request, like a token's. An
//!   `error=` from the issuer is shown escaped.
//! - Signing out (`POST /logout`) ends the session here; the issuer's own session is left as
//!   it is (no RP-initiated logout).
//!
//! The redirect URI is `--dashboard-external-url` + `/oidc/callback`, never built from a
//! request's `Host`. Every sign-in and failed sign-in is an audit line.

use super::auth::{self, Sessions};
use super::html;
use super::server::Deps;
use crate::grpc::auth::audit_unauthenticated;
use axum::body::Body;
use axum::extract::State;
use axum::response::Response;
use flotilla_auth::secret::Secret;
use flotilla_oidc::Authenticator;
use flotilla_oidc::fetch::Fetcher;
use flotilla_oidc::login::{Login, LoginError, Pending};
use http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The login cookie: the `state` of the sign-in under way in this browser.
pub const LOGIN_COOKIE: &str = "flotilla_login";

/// The dashboard's OIDC sign-in flags.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct SignInArgs {
    /// Offer "Sign in with <issuer>" on the dashboard (authorization code + PKCE against
    /// --oidc-issuer-url) as this client id — one of --oidc-client-id, whose ID tokens the hub
    /// accepts. Needs --dashboard-external-url.
    #[arg(long, env = "FLOTILLA_DASHBOARD_OIDC_CLIENT_ID")]
    pub dashboard_oidc_client_id: Option<String>,
    /// A file holding the client's secret (a confidential client); without it the dashboard is
    /// a public client and PKCE alone binds the code to the sign-in.
    #[arg(long, env = "FLOTILLA_DASHBOARD_OIDC_CLIENT_SECRET_FILE")]
    pub dashboard_oidc_client_secret_file: Option<PathBuf>,
    /// The dashboard's URL as browsers reach it (e.g. https://hub.example.com:8443); the
    /// issuer sends them back to <url>/oidc/callback, which must be registered with it.
    #[arg(long, env = "FLOTILLA_DASHBOARD_EXTERNAL_URL")]
    pub dashboard_external_url: Option<String>,
    /// The scopes asked for, space- or comma-separated (add `groups` for issuers such as Dex
    /// that put groups in the ID token only when asked).
    #[arg(
        long,
        env = "FLOTILLA_DASHBOARD_OIDC_SCOPES",
        default_value = "openid profile email",
        value_delimiter = ','
    )]
    pub dashboard_oidc_scopes: Vec<String>,
}

impl SignInArgs {
    /// The sign-in's settings, when asked for; every problem pushed to `errors`.
    pub fn config(
        &self,
        issuer: Option<&flotilla_oidc::Config>,
        errors: &mut Vec<String>,
    ) -> Option<SignInConfig> {
        let Some(client_id) = self.dashboard_oidc_client_id.clone() else {
            if self.dashboard_oidc_client_secret_file.is_some() {
                errors.push(
                    "--dashboard-oidc-client-secret-file needs --dashboard-oidc-client-id".into(),
                );
            }
            return None;
        };
        let before = errors.len();
        match issuer {
            None => errors.push("--dashboard-oidc-client-id needs --oidc-issuer-url".into()),
            Some(issuer) if !issuer.audiences.contains(&client_id) => errors.push(format!(
                "--dashboard-oidc-client-id {client_id:?} must be one of --oidc-client-id ({}): \
                 the hub accepts only those audiences' ID tokens",
                issuer.audiences.join(", ")
            )),
            Some(_) => {}
        }
        let external_url = match self.dashboard_external_url.as_deref() {
            None => {
                errors.push(
                    "--dashboard-oidc-client-id needs --dashboard-external-url (the issuer sends \
                     browsers back to <url>/oidc/callback)"
                        .into(),
                );
                None
            }
            Some(url) => external_url(url).map_err(|e| errors.push(e)).ok(),
        };
        let scopes: Vec<String> = (self.dashboard_oidc_scopes.iter())
            .flat_map(|s| s.split_whitespace())
            .map(str::to_string)
            .collect();
        if !scopes.iter().any(|s| s == "openid") {
            errors.push("--dashboard-oidc-scopes must include openid".into());
        }
        let client_secret = self
            .dashboard_oidc_client_secret_file
            .as_ref()
            .and_then(|p| match std::fs::read_to_string(p) {
                Ok(s) if !s.trim().is_empty() => Some(Secret::new(s.trim())),
                Ok(_) => {
                    errors.push(format!(
                        "--dashboard-oidc-client-secret-file {}: the file is empty",
                        p.display()
                    ));
                    None
                }
                Err(e) => {
                    errors.push(format!(
                        "--dashboard-oidc-client-secret-file {}: {e}",
                        p.display()
                    ));
                    None
                }
            });
        (errors.len() == before).then(|| SignInConfig {
            client_id,
            client_secret,
            external_url: external_url.unwrap_or_default(),
            scopes,
            ..SignInConfig::default()
        })
    }
}

/// `url` as the dashboard's external URL: `https://`, or `http://` on loopback; no path
/// beyond `/`, no query, fragment or credentials; without its trailing slash.
pub fn external_url(url: &str) -> Result<String, String> {
    let bad = |why: &str| format!("--dashboard-external-url {url:?}: {why}");
    if url.contains('#') || url.contains('?') {
        return Err(bad(
            "must be the dashboard's root: no path, query or fragment",
        ));
    }
    let parsed: http::Uri = url.parse().map_err(|e| bad(&format!("{e}")))?;
    let Some(authority) = parsed.authority() else {
        return Err(bad("is not an absolute URL"));
    };
    if authority.as_str().contains('@') {
        return Err(bad("must not carry credentials"));
    }
    let host = authority
        .host()
        .trim_start_matches('[')
        .trim_end_matches(']');
    let loopback = host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    match parsed.scheme_str() {
        Some("https") => {}
        Some("http") if loopback => {}
        _ => return Err(bad("must be https (or http on loopback)")),
    }
    if !matches!(parsed.path(), "" | "/") {
        return Err(bad(
            "must be the dashboard's root: no path, query or fragment",
        ));
    }
    Ok(url.trim_end_matches('/').to_string())
}

/// The dashboard's OIDC sign-in settings.
#[derive(Debug, Clone)]
pub struct SignInConfig {
    /// The client id the dashboard signs in as.
    pub client_id: String,
    /// A confidential client's secret.
    pub client_secret: Option<Secret>,
    /// The dashboard's URL as browsers reach it, without a trailing slash.
    pub external_url: String,
    /// The scopes asked for (`openid` among them).
    pub scopes: Vec<String>,
    /// Sign-ins under way kept at once; past it the oldest is dropped (default 1,000).
    pub pending_max: usize,
    /// How long a sign-in may take at the issuer (default 10 min).
    pub pending_ttl: Duration,
}

impl Default for SignInConfig {
    fn default() -> Self {
        Self {
            client_id: String::new(),
            client_secret: None,
            external_url: String::new(),
            scopes: vec!["openid".into(), "profile".into(), "email".into()],
            pending_max: 1_000,
            pending_ttl: Duration::from_secs(600),
        }
    }
}

/// A sign-in under way, kept by its `state`: what it needs at the callback (`T`: the
/// verifier and nonce), where to go after, and when it started.
#[derive(Debug)]
struct Waiting<T> {
    pending: T,
    return_to: String,
    started: Instant,
}

/// Why a callback is refused (the text is shown, escaped, on the sign-in page).
#[derive(Debug, thiserror::Error)]
pub enum CallbackError {
    /// No such sign-in kept, or not this browser's, or too old.
    #[error("this sign-in was not started here or has expired; start again")]
    Unknown,
    /// The issuer answered with an error.
    #[error("the issuer refused the sign-in: {0}")]
    Issuer(String),
    /// The issuer's answer lacks the code.
    #[error("the issuer's answer carries no code")]
    NoCode,
    /// The code exchange or the ID token failed.
    #[error(transparent)]
    Login(#[from] LoginError),
    /// The issuer's user may not use this hub.
    #[error("{0}")]
    Refused(String),
}

/// The sign-ins under way and the code flow they run.
pub struct SignIn {
    config: SignInConfig,
    authenticator: Authenticator,
    fetcher: Fetcher,
    /// Built at the first sign-in: it needs the issuer's discovery document, which the keys
    /// task may not have fetched yet when the hub starts.
    login: Mutex<Option<Arc<Login>>>,
    pending: Mutex<HashMap<String, Waiting<Pending>>>,
}

impl std::fmt::Debug for SignIn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SignIn")
            .field("client_id", &self.config.client_id)
            .finish()
    }
}

impl SignIn {
    /// The sign-in of `config` against `authenticator`'s issuer.
    pub fn new(
        config: SignInConfig,
        authenticator: Authenticator,
    ) -> Result<Self, flotilla_oidc::fetch::FetchError> {
        let fetcher = Fetcher::new(authenticator.config().ca_file.as_deref())?;
        Ok(Self {
            config,
            authenticator,
            fetcher,
            login: Mutex::new(None),
            pending: Mutex::new(HashMap::new()),
        })
    }

    /// The issuer's host, for the sign-in link.
    pub fn issuer_host(&self) -> String {
        let issuer = self.authenticator.config().issuer.to_string();
        issuer
            .parse::<http::Uri>()
            .ok()
            .and_then(|u| u.host().map(str::to_string))
            .unwrap_or(issuer)
    }

    /// Whether the login cookie must be `Secure` (besides a dashboard served over TLS).
    pub fn secure(&self) -> bool {
        self.config.external_url.starts_with("https://")
    }

    /// Where the issuer sends the browser back.
    fn redirect_uri(&self) -> String {
        format!("{}/oidc/callback", self.config.external_url)
    }

    fn login(&self) -> Result<Arc<Login>, LoginError> {
        let mut login = self.login.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(login) = &*login {
            return Ok(login.clone());
        }
        let made = Arc::new(Login::new(
            self.authenticator.clone(),
            self.fetcher.clone(),
            &self.config.client_id,
            self.config
                .client_secret
                .as_ref()
                .map(|s| s.expose().to_string()),
            &self.redirect_uri(),
            self.config.scopes.clone(),
        )?);
        *login = Some(made.clone());
        Ok(made)
    }

    /// A sign-in started for a browser that wants `return_to` (a path of this dashboard): the
    /// issuer's URL to send it to and the `state` for its login cookie.
    pub fn start(&self, return_to: &str) -> Result<(String, String), LoginError> {
        let (url, pending) = self.login()?.begin();
        let state = pending.state.clone();
        let waiting = Waiting {
            pending,
            return_to: auth::safe_next(Some(return_to)).to_string(),
            started: Instant::now(),
        };
        let mut kept = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        keep(&mut kept, state.clone(), waiting, &self.config);
        Ok((url, state))
    }

    /// Finishes the sign-in the issuer sent the browser back with (`query`: the callback's
    /// parameters; `cookie`: its login cookie): a new session's id and where to go.
    pub async fn finish(
        &self,
        sessions: &Sessions,
        query: &[(String, String)],
        cookie: Option<&str>,
    ) -> Result<(String, String), CallbackError> {
        let result = self.finish_inner(sessions, query, cookie).await;
        if let Err(e) = &result {
            audit_unauthenticated(None, "dashboard sign-in (oidc)", &e.to_string());
        }
        result
    }

    async fn finish_inner(
        &self,
        sessions: &Sessions,
        query: &[(String, String)],
        cookie: Option<&str>,
    ) -> Result<(String, String), CallbackError> {
        let param = |k: &str| super::route::param(query, k);
        let state = param("state").unwrap_or_default();
        let waiting = {
            let mut kept = self.pending.lock().unwrap_or_else(|e| e.into_inner());
            take(
                &mut kept,
                state,
                cookie,
                self.config.pending_ttl,
                Instant::now(),
            )?
        };
        if let Some(error) = param("error") {
            let described = match param("error_description") {
                Some(d) => format!("{error}: {d}"),
                None => error.to_string(),
            };
            return Err(CallbackError::Issuer(described));
        }
        let code = param("code")
            .filter(|c| !c.is_empty())
            .ok_or(CallbackError::NoCode)?;
        let subject = self.login()?.finish(waiting.pending, code).await?;
        let tokens = sessions
            .tokens()
            .ok_or_else(|| CallbackError::Refused("this hub has no identities".into()))?;
        let identity = tokens
            .issuers(crate::oidc::principal(subject))
            .map_err(CallbackError::Refused)?;
        let id = sessions.start_session(identity, None, "oidc");
        Ok((id, waiting.return_to))
    }

    /// Sign-ins under way now.
    pub fn pending(&self) -> usize {
        self.pending.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

/// Keeps `waiting` by `state`, dropping the expired ones and, past the bound, the oldest: a
/// flood of unauthenticated starts evicts, it does not grow.
fn keep<T>(
    kept: &mut HashMap<String, Waiting<T>>,
    state: String,
    waiting: Waiting<T>,
    config: &SignInConfig,
) {
    let now = waiting.started;
    kept.retain(|_, w| now.duration_since(w.started) < config.pending_ttl);
    while kept.len() >= config.pending_max.max(1) {
        let oldest = kept
            .iter()
            .min_by_key(|(_, w)| w.started)
            .map(|(k, _)| k.clone());
        match oldest {
            Some(k) => kept.remove(&k),
            None => break,
        };
    }
    kept.insert(state, waiting);
}

/// The sign-in kept by `state`, taken out (once: a replayed callback finds nothing) when the
/// browser's login `cookie` is that `state` and it started less than `ttl` before `now`.
fn take<T>(
    kept: &mut HashMap<String, Waiting<T>>,
    state: &str,
    cookie: Option<&str>,
    ttl: Duration,
    now: Instant,
) -> Result<Waiting<T>, CallbackError> {
    let ours = cookie
        .is_some_and(|c| !state.is_empty() && auth::constant_eq(c.as_bytes(), state.as_bytes()));
    if !ours {
        return Err(CallbackError::Unknown);
    }
    let waiting = kept.remove(state).ok_or(CallbackError::Unknown)?;
    if now.duration_since(waiting.started) >= ttl {
        return Err(CallbackError::Unknown);
    }
    Ok(waiting)
}

/// The login cookie's `Set-Cookie` value (`None`: clear it).
pub fn login_cookie(state: Option<&str>, secure: bool, ttl: Duration) -> String {
    let secure = if secure { "; Secure" } else { "" };
    match state {
        Some(state) => format!(
            "{LOGIN_COOKIE}={state}; Path=/oidc; HttpOnly; SameSite=Lax; Max-Age={}{secure}",
            ttl.as_secs()
        ),
        None => format!("{LOGIN_COOKIE}=; Path=/oidc; HttpOnly; SameSite=Lax; Max-Age=0{secure}"),
    }
}

/// `GET /oidc/start?next=/page`: sends the browser to the issuer with a new sign-in.
pub(super) async fn start_route(State(d): State<Arc<Deps>>, uri: Uri) -> Response {
    let Some(sign_in) = &d.sign_in else {
        return message(StatusCode::NOT_FOUND, "No such page.", false);
    };
    let query = super::route::query(uri.query());
    let next = super::route::param(&query, "next").unwrap_or("/");
    match sign_in.start(next) {
        Ok((url, state)) => {
            let secure = d.tls || sign_in.secure();
            let cookie = login_cookie(Some(&state), secure, sign_in.config.pending_ttl);
            see_other(&url, &[cookie])
        }
        Err(e) => {
            tracing::warn!(error = %e, "dashboard: the OIDC sign-in cannot start");
            message(
                StatusCode::SERVICE_UNAVAILABLE,
                &format!(
                    "The sign-in with {} cannot start now ({e}); try again shortly, or sign in \
                     with a token.",
                    sign_in.issuer_host()
                ),
                true,
            )
        }
    }
}

/// `GET /oidc/callback?code&state` (or `?error&error_description&state`): the issuer's answer.
pub(super) async fn callback_route(
    State(d): State<Arc<Deps>>,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    let Some(sign_in) = &d.sign_in else {
        return message(StatusCode::NOT_FOUND, "No such page.", false);
    };
    let query = super::route::query(uri.query());
    let cookie = auth::cookie(&headers, LOGIN_COOKIE);
    let secure = d.tls || sign_in.secure();
    let clear = login_cookie(None, secure, Duration::ZERO);
    match sign_in.finish(&d.sessions, &query, cookie.as_deref()).await {
        Ok((id, next)) => {
            let session = auth::set_cookie(Some(&id), secure, d.sessions.ttl());
            see_other(&next, &[session, clear])
        }
        Err(e) => {
            let status = match e {
                CallbackError::Unknown | CallbackError::NoCode => StatusCode::BAD_REQUEST,
                _ => StatusCode::UNAUTHORIZED,
            };
            let mut resp = message(status, &format!("Sign-in failed: {e}."), true);
            if let Ok(v) = HeaderValue::from_str(&clear) {
                resp.headers_mut().append(header::SET_COOKIE, v);
            }
            resp
        }
    }
}

/// A 303 to `to` setting `cookies`.
fn see_other(to: &str, cookies: &[String]) -> Response {
    let mut resp = Response::new(Body::empty());
    *resp.status_mut() = StatusCode::SEE_OTHER;
    let h = resp.headers_mut();
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    if let Ok(v) = HeaderValue::from_str(to) {
        h.insert(header::LOCATION, v);
    }
    for cookie in cookies {
        if let Ok(v) = HeaderValue::from_str(cookie) {
            h.append(header::SET_COOKIE, v);
        }
    }
    resp
}

/// A page saying `text` (escaped), with a link to sign in again when `again`.
fn message(status: StatusCode, text: &str, again: bool) -> Response {
    let frame = html::Frame {
        who: None,
        csrf: "",
        session: false,
        banner: None,
    };
    let body = maud::html! {
        h1 { "Sign in" }
        p.error id="sign-in-error" { (text) }
        @if again { p { a href="/login" { "Sign in again" } } }
    };
    let page = html::page("Sign in", html::Nav::None, &frame, body);
    let mut resp = Response::new(Body::from(page.into_string()));
    *resp.status_mut() = status;
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    resp
}

#[cfg(test)]
mod tests;
