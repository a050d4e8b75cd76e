//! The authorization-code flow with PKCE (the dashboard's sign-in), over the `oauth2` crate:
//! [`Login::begin`] makes the issuer's authorization URL with a random `state`, a `nonce` and
//! an S256 PKCE challenge, and the [`Pending`] sign-in to keep (by `state`) until the browser
//! comes back; [`Login::finish`] exchanges the code at the token endpoint with the verifier
//! (and the client secret of a confidential client) and verifies the ID token it gets — with
//! the bearer tokens' verifier, plus the `nonce`. The token itself is never kept: the caller
//! keeps the [`Subject`].

use crate::fetch::{FetchError, Fetcher};
use crate::{Authenticator, Refusal, Subject};
use oauth2::basic::{
    BasicErrorResponse, BasicRevocationErrorResponse, BasicTokenIntrospectionResponse,
    BasicTokenType,
};
use oauth2::{
    AuthUrl, AuthorizationCode, ClientId, ClientSecret, CsrfToken, EndpointNotSet, EndpointSet,
    ExtraTokenFields, PkceCodeChallenge, PkceCodeVerifier, RedirectUrl, Scope,
    StandardRevocableToken, StandardTokenResponse, TokenUrl,
};

/// The token endpoint's answer: OAuth's, plus OIDC's `id_token`.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct IdTokenField {
    /// The ID token.
    pub id_token: String,
}

impl ExtraTokenFields for IdTokenField {}

type Client = oauth2::Client<
    BasicErrorResponse,
    StandardTokenResponse<IdTokenField, BasicTokenType>,
    BasicTokenIntrospectionResponse,
    StandardRevocableToken,
    BasicRevocationErrorResponse,
    EndpointSet,
    EndpointNotSet,
    EndpointNotSet,
    EndpointNotSet,
    EndpointSet,
>;

/// A sign-in under way: what to keep by its `state` until the browser comes back.
#[derive(Debug)]
pub struct Pending {
    /// The `state` sent to the issuer (the key to keep this by, and the login cookie's value).
    pub state: String,
    /// The `nonce` the ID token must carry.
    pub nonce: String,
    verifier: PkceCodeVerifier,
}

/// Why a sign-in failed.
#[derive(Debug, thiserror::Error)]
pub enum LoginError {
    /// The issuer's discovery document has no authorization or token endpoint.
    #[error("the issuer's discovery document has no {0}")]
    NoEndpoint(&'static str),
    /// A URL that does not parse.
    #[error("{what} {url:?} is not a URL: {source}")]
    Url {
        /// Which URL.
        what: &'static str,
        /// It.
        url: String,
        /// Why.
        #[source]
        source: oauth2::url::ParseError,
    },
    /// The code exchange failed (the issuer refused it, or could not be reached).
    #[error("the issuer refused the sign-in code: {0}")]
    Exchange(String),
    /// The ID token did not verify.
    #[error("the issuer's ID token was refused: {0}")]
    IdToken(#[from] Refusal),
    /// The ID token's nonce is not this sign-in's.
    #[error("the issuer's ID token is not for this sign-in (nonce)")]
    Nonce,
    /// The ID token was issued to another client (OIDC Core §3.1.3.7: `aud` must list this
    /// client, and `azp` — required with several audiences — be it).
    #[error("the issuer's ID token was issued to another client ({claim})")]
    Client {
        /// `aud` or `azp`.
        claim: &'static str,
    },
    /// The ID token lists an audience that is none of the hub's client ids (OIDC Core
    /// §3.1.3.7: "or if it contains additional audiences not trusted by the Client").
    #[error("the issuer's ID token is also for {0:?}, which is not a client id of this hub")]
    Untrusted(String),
}

/// The code flow for one client of the issuer.
pub struct Login {
    client: Client,
    client_id: String,
    scopes: Vec<String>,
    fetcher: Fetcher,
    authenticator: Authenticator,
}

impl std::fmt::Debug for Login {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Login")
            .field("scopes", &self.scopes)
            .finish()
    }
}

impl Login {
    /// The flow for `client_id` (a public client unless `client_secret` is given), coming
    /// back to `redirect_uri`, asking `scopes`, at the endpoints `authenticator`'s keys task
    /// read from the discovery document.
    pub fn new(
        authenticator: Authenticator,
        fetcher: Fetcher,
        client_id: &str,
        client_secret: Option<String>,
        redirect_uri: &str,
        scopes: Vec<String>,
    ) -> Result<Self, LoginError> {
        let metadata = authenticator
            .keys()
            .status()
            .metadata
            .ok_or(LoginError::NoEndpoint("discovery document yet"))?;
        let url = |what, url: Option<&String>| {
            let url = url.ok_or(LoginError::NoEndpoint(what))?;
            oauth2::url::Url::parse(url).map_err(|source| LoginError::Url {
                what,
                url: url.clone(),
                source,
            })
        };
        let auth = AuthUrl::from_url(url(
            "authorization_endpoint",
            metadata.authorization_endpoint.as_ref(),
        )?);
        let token = TokenUrl::from_url(url("token_endpoint", metadata.token_endpoint.as_ref())?);
        let redirect = RedirectUrl::from_url(url("redirect URI", Some(&redirect_uri.to_string()))?);
        let mut client = oauth2::Client::new(ClientId::new(client_id.into()))
            .set_auth_uri(auth)
            .set_token_uri(token)
            .set_redirect_uri(redirect);
        if let Some(secret) = client_secret {
            client = client.set_client_secret(ClientSecret::new(secret));
        }
        Ok(Self {
            client,
            client_id: client_id.into(),
            scopes,
            fetcher,
            authenticator,
        })
    }

    /// The URL to send the browser to, and the sign-in to keep.
    pub fn begin(&self) -> (String, Pending) {
        let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
        let nonce = CsrfToken::new_random().secret().clone();
        let mut request = self
            .client
            .authorize_url(CsrfToken::new_random)
            .set_pkce_challenge(challenge)
            .add_extra_param("nonce", nonce.clone());
        for scope in &self.scopes {
            request = request.add_scope(Scope::new(scope.clone()));
        }
        let (url, state) = request.url();
        (
            url.to_string(),
            Pending {
                state: state.secret().clone(),
                nonce,
                verifier,
            },
        )
    }

    /// Exchanges `code` for an ID token and verifies it (with `pending`'s nonce): who signed in.
    pub async fn finish(&self, pending: Pending, code: &str) -> Result<Subject, LoginError> {
        let fetcher = self.fetcher.clone();
        let http = move |request: oauth2::HttpRequest| {
            let fetcher = fetcher.clone();
            async move { fetcher.exchange(request).await }
        };
        let answer = self
            .client
            .exchange_code(AuthorizationCode::new(code.into()))
            .set_pkce_verifier(pending.verifier)
            .request_async(&http)
            .await
            .map_err(|e| LoginError::Exchange(describe(&e)))?;
        let (subject, claims) = self
            .authenticator
            .verify_id_token(&answer.extra_fields().id_token)?;
        if claims.get("nonce").and_then(|n| n.as_str()) != Some(pending.nonce.as_str()) {
            return Err(LoginError::Nonce);
        }
        issued_to(
            &claims,
            &self.client_id,
            &self.authenticator.config().audiences,
        )?;
        Ok(subject)
    }
}

/// OpenID Connect Core 1.0 §3.1.3.7 (3–5) for the ID token of this client's sign-in: `aud`
/// lists `client_id` and no audience the hub does not trust (`trusted`: its client ids), and a
/// token of several audiences names this client as the party it was issued to (`azp`); an
/// `azp` is this client whenever present. (The bearer verifier, which takes any of the hub's
/// client ids, has already checked the signature, issuer, times and the bearer's `azp` rule.)
pub fn issued_to(
    claims: &crate::verify::Claims,
    client_id: &str,
    trusted: &[String],
) -> Result<(), LoginError> {
    let audiences = match claims.get("aud") {
        Some(serde_json::Value::Array(auds)) => auds.iter().map(|a| a.as_str()).collect(),
        Some(aud) => vec![aud.as_str()],
        None => Vec::new(),
    };
    if !audiences.contains(&Some(client_id)) {
        return Err(LoginError::Client { claim: "aud" });
    }
    if let Some(other) =
        (audiences.iter()).find(|a| !a.is_some_and(|a| trusted.iter().any(|t| t == a)))
    {
        return Err(LoginError::Untrusted(
            other.unwrap_or("(not a string)").to_string(),
        ));
    }
    match claims.get("azp").map(|azp| azp.as_str()) {
        None if audiences.len() > 1 => Err(LoginError::Client { claim: "azp" }),
        Some(azp) if azp != Some(client_id) => Err(LoginError::Client { claim: "azp" }),
        _ => Ok(()),
    }
}

/// The exchange's failure in one line (the issuer's `error` when it answered one).
fn describe(e: &oauth2::RequestTokenError<FetchError, BasicErrorResponse>) -> String {
    match e {
        oauth2::RequestTokenError::ServerResponse(r) => r.to_string(),
        oauth2::RequestTokenError::Request(e) => e.to_string(),
        oauth2::RequestTokenError::Parse(e, _) => format!("its answer does not parse: {e}"),
        oauth2::RequestTokenError::Other(e) => e.clone(),
    }
}
