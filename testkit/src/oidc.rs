//! A small OIDC issuer for tests, on a free loopback port over real HTTP: the discovery
//! document, a JWKS whose keys rotate on demand, tokens minted with any claims, and an
//! authorization endpoint and token endpoint enough for the authorization-code flow with PKCE
//! (it approves the configured user at once, as a signed-in browser session at an IdP would).
//!
//! Keys: three RSA 2048 keys made once with openssl (`oidc/README.md`; generating RSA keys in a
//! debug build takes seconds) and a 1024-bit one the hub must refuse.

use axum::Router;
use axum::body::Bytes;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use tokio::task::JoinHandle;

/// The client id (audience) tokens are minted for unless told otherwise.
pub const CLIENT_ID: &str = "flotilla";

const RSA_KEYS: [&str; 3] = [
    include_str!("oidc/rsa-a.pem"),
    include_str!("oidc/rsa-b.pem"),
    include_str!("oidc/rsa-c.pem"),
];
const RSA_1024: &str = include_str!("oidc/rsa-1024.pem");

/// One signing key and its public JWK.
#[derive(Clone)]
struct SigningKey {
    kid: String,
    alg: Algorithm,
    encoding: EncodingKey,
    jwk: Value,
}

impl SigningKey {
    fn rsa(kid: &str, pem: &str) -> Self {
        let encoding = EncodingKey::from_rsa_pem(pem.as_bytes()).expect("a fixture RSA key");
        let mut jwk = serde_json::to_value(
            jsonwebtoken::jwk::Jwk::from_encoding_key(&encoding, Algorithm::RS256)
                .expect("its public JWK"),
        )
        .expect("JWK as JSON");
        jwk["kid"] = kid.into();
        jwk["use"] = "sig".into();
        Self {
            kid: kid.into(),
            alg: Algorithm::RS256,
            encoding,
            jwk,
        }
    }
}

/// A user the authorization endpoint signs in.
#[derive(Debug, Clone)]
struct Login {
    sub: String,
    groups: Vec<String>,
}

/// A code handed out by the authorization endpoint, not yet exchanged.
#[derive(Debug, Clone)]
struct Pending {
    client_id: String,
    redirect_uri: String,
    challenge: String,
    nonce: Option<String>,
    login: Login,
}

struct Inner {
    url: String,
    keys: Vec<SigningKey>,
    signer: String,
    next_fixture: usize,
    max_age: Option<u64>,
    down: bool,
    jwks_fetches: u64,
    login: Login,
    codes: HashMap<String, Pending>,
    ttl: u64,
    /// Claims the token endpoint's ID tokens get beside (or instead of) their own.
    id_token_claims: Vec<(String, Value)>,
}

/// The test issuer; stopped when dropped.
pub struct TestIssuer {
    url: String,
    inner: Arc<Mutex<Inner>>,
    task: JoinHandle<()>,
}

/// Claims for [`TestIssuer::mint`]: what a token says, beside `iss` (the issuer's), `aud`
/// ([`CLIENT_ID`]), `iat`, `exp` (an hour from now) and `sub`.
#[derive(Debug, Clone)]
pub struct Claims {
    claims: serde_json::Map<String, Value>,
    kid: Option<String>,
    hmac: Option<Vec<u8>>,
}

impl Claims {
    /// A token for `sub`, in `groups`.
    pub fn user(sub: &str, groups: &[&str]) -> Self {
        let now = now();
        let mut claims = serde_json::Map::new();
        claims.insert("sub".into(), sub.into());
        claims.insert("groups".into(), json!(groups));
        claims.insert("aud".into(), CLIENT_ID.into());
        claims.insert("iat".into(), now.into());
        claims.insert("exp".into(), (now + 3600).into());
        Self {
            claims,
            kid: None,
            hmac: None,
        }
    }

    /// The same with `name` set to `value` (any claim, `iss` and `aud` included).
    pub fn with(mut self, name: &str, value: impl Into<Value>) -> Self {
        self.claims.insert(name.into(), value.into());
        self
    }

    /// The same without `name`.
    pub fn without(mut self, name: &str) -> Self {
        self.claims.remove(name);
        self
    }

    /// The same expiring `secs` seconds from now (negative: in the past).
    pub fn expires_in(self, secs: i64) -> Self {
        let exp = now() as i64 + secs;
        self.with("exp", exp)
    }

    /// The same signed with HS256 and `secret` (an alg-confusion forgery when the secret is the
    /// issuer's public key).
    pub fn hs256(mut self, secret: &[u8]) -> Self {
        self.hmac = Some(secret.to_vec());
        self
    }

    /// The same signed with the key `kid` (which may not be published).
    pub fn signed_by(mut self, kid: &str) -> Self {
        self.kid = Some(kid.into());
        self
    }
}

impl TestIssuer {
    /// An issuer on a free loopback port with one RSA key, signing in `ana` (groups
    /// `team-a-sre`) at its authorization endpoint.
    pub async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the test issuer");
        let addr: SocketAddr = listener.local_addr().expect("its address");
        let url = format!("http://{addr}");
        let first = SigningKey::rsa("key-1", RSA_KEYS[0]);
        let inner = Arc::new(Mutex::new(Inner {
            url: url.clone(),
            signer: first.kid.clone(),
            keys: vec![first],
            next_fixture: 1,
            max_age: None,
            down: false,
            jwks_fetches: 0,
            login: Login {
                sub: "ana".into(),
                groups: vec!["team-a-sre".into()],
            },
            codes: HashMap::new(),
            ttl: 3600,
            id_token_claims: Vec::new(),
        }));
        let app = Router::new()
            .route("/.well-known/openid-configuration", get(discovery))
            .route("/jwks", get(jwks))
            .route("/authorize", get(authorize))
            .route("/token", post(token))
            .with_state(inner.clone());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self { url, inner, task }
    }

    /// Its issuer URL (`http://127.0.0.1:PORT`), the `--oidc-issuer-url` of a hub trusting it.
    pub fn url(&self) -> &str {
        &self.url
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A token with `claims`, signed by the current key (or the one the claims name).
    pub fn mint(&self, claims: Claims) -> String {
        sign(&self.lock(), claims)
    }

    /// A token with `claims` and `alg: none` (no signature).
    pub fn unsigned(&self, claims: Claims) -> String {
        let mut body = claims.claims;
        body.entry("iss").or_insert_with(|| self.url.clone().into());
        let part = |v: &Value| data_encoding::BASE64URL_NOPAD.encode(v.to_string().as_bytes());
        let header = json!({"alg": "none", "typ": "JWT"});
        format!("{}.{}.", part(&header), part(&Value::Object(body)))
    }

    /// The current signing key's public JWK as JSON text (the secret of an alg-confusion
    /// forgery).
    pub fn public_jwk_text(&self) -> String {
        let inner = self.lock();
        inner
            .keys
            .iter()
            .find(|k| k.kid == inner.signer)
            .map(|k| k.jwk.to_string())
            .unwrap_or_default()
    }

    /// A token for `sub` in `groups`, valid for an hour.
    pub fn token(&self, sub: &str, groups: &[&str]) -> String {
        self.mint(Claims::user(sub, groups))
    }

    /// Adds a new key and signs with it from now on (the old one stays published, as an IdP
    /// does during a rotation); its kid.
    pub fn rotate(&self) -> String {
        let mut inner = self.lock();
        let i = inner.next_fixture;
        assert!(
            i < RSA_KEYS.len(),
            "the test issuer has {} keys",
            RSA_KEYS.len()
        );
        inner.next_fixture += 1;
        let key = SigningKey::rsa(&format!("key-{}", i + 1), RSA_KEYS[i]);
        inner.signer = key.kid.clone();
        inner.keys.push(key);
        inner.signer.clone()
    }

    /// Stops publishing the key `kid`.
    pub fn retire(&self, kid: &str) {
        self.lock().keys.retain(|k| k.kid != kid);
    }

    /// Publishes the 1024-bit key too (kid `small`; the hub must refuse it).
    pub fn publish_small_key(&self) {
        let key = SigningKey::rsa("small", RSA_1024);
        self.lock().keys.push(key);
    }

    /// The JWKS document it serves now.
    pub fn jwks_json(&self) -> String {
        let inner = self.lock();
        jwks_document(&inner).to_string()
    }

    /// Makes the JWKS answer `Cache-Control: max-age=secs`.
    pub fn set_max_age(&self, secs: Option<u64>) {
        self.lock().max_age = secs;
    }

    /// Makes the discovery and JWKS endpoints answer 503 (`true`) or serve again.
    pub fn set_down(&self, down: bool) {
        self.lock().down = down;
    }

    /// How many times the JWKS was fetched.
    pub fn jwks_fetches(&self) -> u64 {
        self.lock().jwks_fetches
    }

    /// Claims the token endpoint's ID tokens carry from now on, set over the ones it makes
    /// (`aud`, `azp`, …: an issuer minting the code flow's token for another client).
    pub fn set_id_token_claims(&self, claims: &[(&str, Value)]) {
        self.lock().id_token_claims = (claims.iter())
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect();
    }

    /// The user its authorization endpoint signs in from now on.
    pub fn set_login(&self, sub: &str, groups: &[&str]) {
        self.lock().login = Login {
            sub: sub.into(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
        };
    }
}

impl Drop for TestIssuer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Signs `claims` with the key they name, else the current signer; a kid the issuer does not
/// publish gets a key of its own (a forger's, or one not rotated in yet).
fn sign(inner: &Inner, claims: Claims) -> String {
    let mut body = claims.claims;
    body.entry("iss")
        .or_insert_with(|| inner.url.clone().into());
    let kid = claims.kid.unwrap_or_else(|| inner.signer.clone());
    if let Some(secret) = claims.hmac {
        let mut header = Header::new(Algorithm::HS256);
        header.kid = Some(kid);
        let key = EncodingKey::from_secret(&secret);
        return jsonwebtoken::encode(&header, &body, &key).expect("sign a token");
    }
    let key = match inner.keys.iter().find(|k| k.kid == kid) {
        Some(key) => key.clone(),
        None if kid == "small" => SigningKey::rsa("small", RSA_1024),
        None => SigningKey::rsa(&kid, RSA_KEYS[inner.next_fixture % RSA_KEYS.len()]),
    };
    let mut header = Header::new(key.alg);
    header.kid = Some(kid);
    jsonwebtoken::encode(&header, &body, &key.encoding).expect("sign a token")
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_secs()
}

fn jwks_document(inner: &Inner) -> Value {
    json!({ "keys": inner.keys.iter().map(|k| k.jwk.clone()).collect::<Vec<_>>() })
}

type Shared = State<Arc<Mutex<Inner>>>;

fn locked(state: &Arc<Mutex<Inner>>) -> std::sync::MutexGuard<'_, Inner> {
    state.lock().unwrap_or_else(|e| e.into_inner())
}

fn json_response(value: &Value) -> Response {
    (
        [(header::CONTENT_TYPE, "application/json")],
        value.to_string(),
    )
        .into_response()
}

async fn discovery(State(state): Shared) -> Response {
    let inner = locked(&state);
    if inner.down {
        return StatusCode::SERVICE_UNAVAILABLE.into_response();
    }
    let url = &inner.url;
    json_response(&json!({
        "issuer": url,
        "jwks_uri": format!("{url}/jwks"),
        "authorization_endpoint": format!("{url}/authorize"),
        "token_endpoint": format!("{url}/token"),
        "response_types_supported": ["code"],
        "subject_types_supported": ["public"],
        "id_token_signing_alg_values_supported": ["RS256"],
        "code_challenge_methods_supported": ["S256"],
    }))
}

async fn jwks(State(state): Shared) -> Response {
    let mut inner = locked(&state);
    if inner.down {
        return StatusCode::SERVICE_UNAVAILABLE.into_response();
    }
    inner.jwks_fetches += 1;
    let mut response = json_response(&jwks_document(&inner));
    if let Some(age) = inner.max_age {
        response.headers_mut().insert(
            header::CACHE_CONTROL,
            HeaderValue::from_str(&format!("max-age={age}")).expect("a header"),
        );
    }
    response
}

fn bad(why: &str) -> Response {
    (StatusCode::BAD_REQUEST, why.to_string()).into_response()
}

/// `GET /authorize`: approves the configured user at once and redirects back with a code.
async fn authorize(State(state): Shared, RawQuery(query): RawQuery) -> Response {
    let params: HashMap<String, String> =
        form_urlencoded::parse(query.unwrap_or_default().as_bytes())
            .into_owned()
            .collect();
    let param = |k: &str| params.get(k).cloned().unwrap_or_default();
    if param("response_type") != "code" {
        return bad("response_type must be code");
    }
    if param("code_challenge_method") != "S256" || param("code_challenge").is_empty() {
        return bad("PKCE with S256 is required");
    }
    let redirect_uri = param("redirect_uri");
    if redirect_uri.is_empty() || param("client_id").is_empty() {
        return bad("client_id and redirect_uri are required");
    }
    let code = random_token();
    let mut inner = locked(&state);
    let login = inner.login.clone();
    inner.codes.insert(
        code.clone(),
        Pending {
            client_id: param("client_id"),
            redirect_uri: redirect_uri.clone(),
            challenge: param("code_challenge"),
            nonce: params.get("nonce").cloned(),
            login,
        },
    );
    let back = form_urlencoded::Serializer::new(String::new())
        .append_pair("code", &code)
        .append_pair("state", &param("state"))
        .finish();
    let sep = if redirect_uri.contains('?') { '&' } else { '?' };
    let mut headers = HeaderMap::new();
    headers.insert(
        header::LOCATION,
        HeaderValue::from_str(&format!("{redirect_uri}{sep}{back}")).expect("a location"),
    );
    (StatusCode::FOUND, headers).into_response()
}

/// `POST /token`: exchanges a code for an ID token after checking the PKCE verifier.
async fn token(State(state): Shared, body: Bytes) -> Response {
    let form: HashMap<String, String> = form_urlencoded::parse(&body).into_owned().collect();
    let field = |k: &str| form.get(k).cloned().unwrap_or_default();
    let error = |code: &str| {
        (
            StatusCode::BAD_REQUEST,
            [(header::CONTENT_TYPE, "application/json")],
            json!({ "error": code }).to_string(),
        )
            .into_response()
    };
    if field("grant_type") != "authorization_code" {
        return error("unsupported_grant_type");
    }
    let pending = locked(&state).codes.remove(&field("code"));
    let Some(pending) = pending else {
        return error("invalid_grant");
    };
    let challenge =
        data_encoding::BASE64URL_NOPAD.encode(&Sha256::digest(field("code_verifier").as_bytes()));
    if challenge != pending.challenge
        || field("redirect_uri") != pending.redirect_uri
        || field("client_id") != pending.client_id
    {
        return error("invalid_grant");
    }
    let (url, ttl, extra) = {
        let inner = locked(&state);
        (inner.url.clone(), inner.ttl, inner.id_token_claims.clone())
    };
    let groups: Vec<&str> = pending.login.groups.iter().map(String::as_str).collect();
    let mut claims = Claims::user(&pending.login.sub, &groups)
        .with("aud", pending.client_id.clone())
        .with("iss", url);
    if let Some(nonce) = pending.nonce {
        claims = claims.with("nonce", nonce);
    }
    for (name, value) in extra {
        claims = claims.with(&name, value);
    }
    let id_token = sign(&locked(&state), claims);
    json_response(&json!({
        "access_token": random_token(),
        "token_type": "Bearer",
        "expires_in": ttl,
        "id_token": id_token,
    }))
}

fn random_token() -> String {
    let bytes: [u8; 24] = rand::random();
    data_encoding::BASE64URL_NOPAD.encode(&bytes)
}
