use super::*;
use crate::grpc::auth::{BearerVerifier, Role, Verified};
use http::Method;
use std::sync::atomic::{AtomicBool, Ordering};

const ID_TOKEN: &str = "eyJhbGciOiJSUzI1NiJ9.id-token.signature";
const ISSUER: &str = "https://issuer.example";

/// The hub's OIDC issuer as its verifier answers: `ana`'s ID token, valid until `expires`
/// (Unix seconds) unless its key was `retired`.
struct Issuer {
    expires: u64,
    retired: AtomicBool,
}

impl BearerVerifier for Issuer {
    fn verify(&self, token: &str) -> Verified {
        if token != ID_TOKEN {
            return Verified::NotMine;
        }
        if self.retired.load(Ordering::SeqCst) {
            return Verified::Refused(
                "the bearer token is signed with key \"k1\", which the issuer no longer publishes"
                    .into(),
            );
        }
        Verified::Principal(Principal::user(
            &format!("{ISSUER}#ana"),
            Via::Oidc {
                issuer: ISSUER.into(),
                expires: self.expires,
            },
        ))
    }
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// Tokens with the file's `ops` (admin) and an issuer whose token expires in `secs`.
fn tokens(secs: u64) -> (Tokens, Arc<Issuer>) {
    let issuer = Arc::new(Issuer {
        expires: unix_now() + secs,
        retired: AtomicBool::new(false),
    });
    let tokens = Tokens::parse("tokens.csv", "ops-token-0123456789,ops,admin\n")
        .unwrap()
        .with_bearer(issuer.clone());
    (tokens, issuer)
}

fn exec() -> RequestInfo {
    RequestInfo::parse(&Method::GET, "/api/v1/namespaces/d/pods/web/exec", "")
}

fn credential(tokens: &Tokens, token: &str, every: Duration) -> Option<Credential> {
    let identity = tokens.authenticate(token).expect("authenticated");
    Credential::api(&identity, tokens, token, ("a1", &exec()), every)
}

#[tokio::test(start_paused = true)]
async fn an_issuers_token_ends_its_session_at_its_exp() {
    let (tokens, _) = tokens(5);
    let credential = credential(&tokens, ID_TOKEN, DEFAULT_RECHECK).expect("it expires");
    let started = tokio::time::Instant::now();
    let why = credential.ended().await;
    let took = started.elapsed();
    // exp is in whole seconds: 4 to 5 s from now.
    assert!(
        took > Duration::from_secs(3) && took <= Duration::from_secs(5),
        "{took:?}"
    );
    assert!(
        why.starts_with(&format!("{ISSUER}#ana's token expired at ")),
        "{why}"
    );
    assert!(why.contains("sign in again"), "{why}");
}

#[tokio::test(start_paused = true)]
async fn a_token_the_issuer_no_longer_accepts_ends_its_session_at_the_next_check() {
    let (tokens, issuer) = tokens(3600);
    let every = Duration::from_secs(30);
    let credential = credential(&tokens, ID_TOKEN, every).expect("it expires");
    let ended = tokio::spawn(async move { credential.ended().await });
    tokio::time::sleep(every * 3).await;
    assert!(!ended.is_finished(), "a token still accepted ended it");
    issuer.retired.store(true, Ordering::SeqCst);
    let started = tokio::time::Instant::now();
    let why = ended.await.unwrap();
    assert!(started.elapsed() <= every, "{:?}", started.elapsed());
    assert_eq!(
        why,
        format!(
            "{ISSUER}#ana's token is no longer accepted: the bearer token is signed with key \
             \"k1\", which the issuer no longer publishes"
        )
    );
}

#[test]
fn a_token_files_token_is_not_watched_and_an_expired_one_is_ended_at_once() {
    let (tokens, _) = tokens(60);
    assert!(
        credential(&tokens, "ops-token-0123456789", DEFAULT_RECHECK).is_none(),
        "nothing ends a token of the file while the hub runs"
    );
    let credential = credential(&tokens, ID_TOKEN, DEFAULT_RECHECK).unwrap();
    let now = SystemTime::now();
    assert_eq!(credential.expired_at(now), None);
    // Within the verifier's clock skew a token past its exp still authenticates: a session
    // asked with it is refused, not opened to be cut at once.
    let why = credential
        .expired_at(now + Duration::from_secs(61))
        .expect("expired");
    assert!(why.contains("'s token expired at "), "{why}");
}

#[test]
fn a_vouched_for_callers_token_expires_with_the_first_hubs_verdict() {
    let first = Via::Oidc {
        issuer: ISSUER.into(),
        expires: 1_900_000_000,
    };
    let vouched = Via::Vouched {
        by_hub: "hub-2".into(),
        first: Box::new(first),
    };
    assert_eq!(
        expiry(&vouched),
        Some(UNIX_EPOCH + Duration::from_secs(1_900_000_000))
    );
    assert_eq!(expiry(&Via::Token), None);
    let mut identity = Identity::token("ops", Role::Admin, Vec::new());
    identity.principal.via = vouched;
    let (tokens, _) = tokens(60);
    let credential = Credential::api(&identity, &tokens, "x", ("a1", &exec()), DEFAULT_RECHECK)
        .expect("it expires");
    assert!(
        credential.check.is_none(),
        "another hub's caller is not verified here"
    );
}
