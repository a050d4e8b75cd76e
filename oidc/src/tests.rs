use super::*;
use crate::config::{Config, Prefix};
use crate::jwks::{JwksError, KeySet};
use flotilla_testkit::oidc::{CLIENT_ID, Claims as Mint, TestIssuer};
use jsonwebtoken::Algorithm;
use std::time::Duration;

fn config(issuer: &TestIssuer) -> Config {
    let mut c = Config::new(issuer.url(), &[CLIENT_ID]);
    c.groups_claim = Some("groups".into());
    c
}

fn keys(issuer: &TestIssuer) -> KeySet {
    KeySet::from_json(issuer.jwks_json().as_bytes(), &[Algorithm::RS256]).unwrap()
}

fn verify(issuer: &TestIssuer, c: &Config, token: &str) -> Result<Subject, Refusal> {
    let verified = Verifier::new(c.clone()).verify(token, &keys(issuer), verify::now())?;
    Ok(claims::map(c, &verified)?)
}

#[tokio::test]
async fn a_token_of_the_issuer_names_its_user_with_the_issuer_prefix_and_its_groups() {
    let issuer = TestIssuer::start().await;
    let c = config(&issuer);
    let subject = verify(&issuer, &c, &issuer.token("ana", &["team-a-sre", "dev"])).unwrap();
    assert_eq!(subject.username, format!("{}#ana", issuer.url()));
    assert_eq!(subject.groups, ["team-a-sre", "dev"]);
    assert_eq!(subject.issuer, issuer.url());

    // Prefixes as kube-apiserver: `-` for none, a text, and none by default for `email`.
    let mut c = config(&issuer);
    c.username_prefix = Prefix::None;
    c.groups_prefix = "oidc:".into();
    let subject = verify(&issuer, &c, &issuer.token("ana", &["team-a-sre"])).unwrap();
    assert_eq!(
        (subject.username.as_str(), subject.groups.as_slice()),
        ("ana", ["oidc:team-a-sre".to_string()].as_slice())
    );
    c.username_claim = "email".into();
    c.username_prefix = Prefix::Default;
    let token = issuer.mint(Mint::user("ana", &[]).with("email", "ana@example.com"));
    assert_eq!(
        verify(&issuer, &c, &token).unwrap().username,
        "ana@example.com"
    );
    let unverified = issuer.mint(
        Mint::user("ana", &[])
            .with("email", "ana@example.com")
            .with("email_verified", false),
    );
    assert_eq!(
        verify(&issuer, &c, &unverified).unwrap_err().to_string(),
        "oidc: email not verified"
    );
    // A groups claim may be one string.
    let c = config(&issuer);
    let token = issuer.mint(Mint::user("ana", &[]).with("groups", "solo"));
    assert_eq!(verify(&issuer, &c, &token).unwrap().groups, ["solo"]);
    let token = issuer.mint(Mint::user("ana", &[]).with("groups", 7));
    assert_eq!(
        verify(&issuer, &c, &token).unwrap_err().to_string(),
        "oidc: claim \"groups\" is not a string or an array of strings"
    );
}

#[tokio::test]
async fn times_are_checked_with_the_clock_skew_and_refusals_say_when() {
    let issuer = TestIssuer::start().await;
    let c = config(&issuer);
    // Expired 30 s ago: within the 60 s skew.
    assert!(
        verify(
            &issuer,
            &c,
            &issuer.mint(Mint::user("ana", &[]).expires_in(-30))
        )
        .is_ok()
    );
    let expired = issuer.mint(Mint::user("ana", &[]).with("exp", 1_700_000_000));
    assert_eq!(
        verify(&issuer, &c, &expired).unwrap_err().to_string(),
        "the bearer token expired at 2023-11-14T22:13:20Z (clock skew allowed 60s)"
    );
    let later = verify::now() + 600;
    let not_yet = issuer.mint(Mint::user("ana", &[]).with("nbf", later));
    let e = verify(&issuer, &c, &not_yet).unwrap_err().to_string();
    assert!(
        e.starts_with("the bearer token is not valid before "),
        "{e}"
    );
    let future = issuer.mint(Mint::user("ana", &[]).with("iat", later));
    let e = verify(&issuer, &c, &future).unwrap_err().to_string();
    assert!(
        e.starts_with("the bearer token was issued in the future"),
        "{e}"
    );
    let no_exp = issuer.mint(Mint::user("ana", &[]).without("exp"));
    assert_eq!(
        verify(&issuer, &c, &no_exp).unwrap_err().to_string(),
        "the bearer token's \"exp\" claim is missing"
    );
    let text_exp = issuer.mint(Mint::user("ana", &[]).with("exp", "tomorrow"));
    assert!(verify(&issuer, &c, &text_exp).is_err());
}

#[tokio::test]
async fn foreign_audiences_issuers_algorithms_and_keys_are_refused_with_the_reason() {
    let issuer = TestIssuer::start().await;
    let c = config(&issuer);
    let other_app = issuer.mint(Mint::user("ana", &[]).with("aud", "grafana"));
    assert_eq!(
        verify(&issuer, &c, &other_app).unwrap_err().to_string(),
        "the bearer token's audience is [\"grafana\"], not \"flotilla\""
    );
    // OIDC Core §3.1.3.7: a token of several audiences names the party it was issued to, and
    // that party must be one of the hub's client ids.
    let several = |azp: Option<&str>| {
        let mut claims = Mint::user("ana", &[]).with("aud", serde_json::json!(["x", CLIENT_ID]));
        if let Some(azp) = azp {
            claims = claims.with("azp", azp);
        }
        issuer.mint(claims)
    };
    assert!(verify(&issuer, &c, &several(Some(CLIENT_ID))).is_ok());
    assert_eq!(
        verify(&issuer, &c, &several(None)).unwrap_err().to_string(),
        "the bearer token's \"azp\" claim is missing from a token of several audiences"
    );
    let e = verify(&issuer, &c, &several(Some("x")))
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "the bearer token was issued to \"x\" (azp), not to \"flotilla\""
    );
    // With several client ids the party may be any of them, never another.
    let mut two = c.clone();
    two.audiences.push("x".into());
    assert!(verify(&issuer, &two, &several(Some("x"))).is_ok());
    let e = verify(&issuer, &two, &several(Some("grafana")))
        .unwrap_err()
        .to_string();
    assert!(e.contains("issued to \"grafana\" (azp)"), "{e}");
    // A token of the hub's audience alone may name another party (Dex's cross-client trust).
    let cross = issuer.mint(Mint::user("ana", &[]).with("azp", "flotilla-cli"));
    assert!(verify(&issuer, &c, &cross).is_ok());
    assert!(verify(&issuer, &two, &cross).is_ok());

    let foreign = issuer.mint(Mint::user("ana", &[]).with("iss", "https://idp.example"));
    assert!(matches!(
        verify(&issuer, &c, &foreign).unwrap_err(),
        Refusal::Verify(VerifyError::Issuer { .. })
    ));
    let none = issuer.unsigned(Mint::user("ana", &[]));
    assert_eq!(
        verify(&issuer, &c, &none).unwrap_err().to_string(),
        "the bearer token is signed with none; this hub accepts RS256"
    );
    // A forged alg with a line break: quoted, so it cannot write a log line of its own.
    let mut parts: Vec<String> = none.split('.').map(str::to_string).collect();
    parts[0] = data_encoding::BASE64URL_NOPAD
        .encode(br#"{"alg":"RS256\nlevel=error forged","typ":"JWT"}"#);
    let odd = parts.join(".");
    assert_eq!(
        verify(&issuer, &c, &odd).unwrap_err().to_string(),
        "the bearer token is signed with \"RS256\\nlevel=error forged\"; this hub accepts RS256"
    );
    // HS256 keyed with the public key: refused before any key is looked at.
    let confused = issuer.mint(Mint::user("ana", &[]).hs256(issuer.public_jwk_text().as_bytes()));
    assert_eq!(
        verify(&issuer, &c, &confused).unwrap_err().to_string(),
        "the bearer token is signed with HS256; this hub accepts RS256"
    );
    let forged = issuer.mint(Mint::user("ana", &[]).signed_by("k9"));
    assert_eq!(
        verify(&issuer, &c, &forged).unwrap_err().to_string(),
        "the bearer token is signed with a key the issuer does not publish (kid \"k9\")"
    );
    // The published kid with another key's signature.
    let good = issuer.token("ana", &[]);
    let mut parts: Vec<&str> = good.split('.').collect();
    let other = issuer.mint(Mint::user("ben", &[]).signed_by("k9"));
    parts[2] = other.rsplit('.').next().unwrap();
    assert_eq!(
        verify(&issuer, &c, &parts.join("."))
            .unwrap_err()
            .to_string(),
        "the bearer token's signature does not verify"
    );
    // A token naming critical header extensions, and an oversized one.
    let big = "a".repeat(verify::MAX_TOKEN_BYTES + 1);
    assert!(matches!(
        verify(&issuer, &c, &big).unwrap_err(),
        Refusal::Verify(VerifyError::TooLarge(_))
    ));
    assert!(verify(&issuer, &c, "not-a-jwt").is_err());
}

#[tokio::test]
async fn required_claims_must_be_present_and_equal() {
    let issuer = TestIssuer::start().await;
    let c = config(&issuer)
        .parse_lists(&[], &["hd=example.com".into()])
        .unwrap();
    let token = issuer.mint(Mint::user("ana", &[]).with("hd", "example.com"));
    assert!(verify(&issuer, &c, &token).is_ok());
    let other = issuer.mint(Mint::user("ana", &[]).with("hd", "evil.com"));
    assert_eq!(
        verify(&issuer, &c, &other).unwrap_err().to_string(),
        "oidc: required claim hd value does not match. Got = evil.com, want = example.com"
    );
    assert_eq!(
        verify(&issuer, &c, &issuer.token("ana", &[]))
            .unwrap_err()
            .to_string(),
        "oidc: required claim hd not present in ID token"
    );
    let bomb: Vec<String> = (0..=claims::MAX_GROUPS).map(|i| format!("g{i}")).collect();
    let token = issuer.mint(Mint::user("ana", &[]).with("groups", serde_json::json!(bomb)));
    let e = verify(&issuer, &c, &token);
    assert!(e.is_err(), "{e:?}");
}

#[tokio::test]
async fn a_jwks_keeps_only_signature_keys_of_accepted_algorithms_and_sizes() {
    let issuer = TestIssuer::start().await;
    issuer.publish_small_key();
    let keys = KeySet::from_json(issuer.jwks_json().as_bytes(), &[Algorithm::RS256]).unwrap();
    assert_eq!(keys.kids(), ["key-1"], "the 1024-bit key is skipped");
    let c = config(&issuer);
    let small = issuer.mint(Mint::user("ana", &[]).signed_by("small"));
    assert!(matches!(
        Verifier::new(c).verify(&small, &keys, verify::now()),
        Err(VerifyError::UnknownKey(_))
    ));

    let only_oct = br#"{"keys":[{"kty":"oct","k":"c2VjcmV0","kid":"h"}]}"#;
    let e = KeySet::from_json(only_oct, &[Algorithm::RS256]).unwrap_err();
    assert!(e.to_string().contains("a symmetric key"), "{e}");
    let encryption = issuer.jwks_json().replace("\"sig\"", "\"enc\"");
    assert!(KeySet::from_json(encryption.as_bytes(), &[Algorithm::RS256]).is_err());
    // An RSA key is no use to a hub accepting ES256 only.
    assert!(KeySet::from_json(issuer.jwks_json().as_bytes(), &[Algorithm::ES256]).is_err());
    let many = format!(
        "{{\"keys\":[{}]}}",
        vec!["{}"; jwks::MAX_KEYS + 1].join(",")
    );
    assert_eq!(
        KeySet::from_json(many.as_bytes(), &[Algorithm::RS256]).unwrap_err(),
        JwksError::TooMany(jwks::MAX_KEYS + 1)
    );
    assert!(matches!(
        KeySet::from_json(b"[]", &[Algorithm::RS256]),
        Err(JwksError::Shape(_))
    ));
}

#[test]
fn bad_settings_are_reported_all_at_once() {
    let errors = Config::new("http://idp.example/?x=1", &[])
        .parse_lists(&["RS256,HS256".into(), "none".into()], &["novalue".into()])
        .unwrap_err();
    let text: Vec<String> = errors.iter().map(ToString::to_string).collect();
    assert_eq!(text.len(), 5, "{text:#?}");
    assert!(text[0].contains("\"HS256\" is not supported"), "{text:#?}");
    assert!(text[1].contains("\"none\" is not supported"), "{text:#?}");
    assert!(text[2].contains("KEY=VALUE"), "{text:#?}");
    assert!(text[3].contains("loopback"), "{text:#?}");
    assert!(
        text[4].contains("--oidc-client-id is required"),
        "{text:#?}"
    );
    let ok = Config::new("https://idp.example/realms/a", &["flotilla"])
        .parse_lists(&["RS256, ES256".into()], &[])
        .unwrap();
    assert_eq!(ok.algorithms, [Algorithm::RS256, Algorithm::ES256]);
    assert_eq!(ok.username_prefix(), "https://idp.example/realms/a#");
    assert_eq!(
        ok.discovery_url(),
        "https://idp.example/realms/a/.well-known/openid-configuration"
    );
    assert_eq!(
        fetch::max_age("public, max-age=120"),
        Some(Duration::from_secs(120))
    );
    assert_eq!(fetch::max_age("no-store"), Some(Duration::ZERO));
}

#[test]
fn a_discovery_document_must_name_the_configured_issuer_and_safe_urls() {
    let doc = |issuer: &str, jwks: &str| {
        serde_json::json!({"issuer": issuer, "jwks_uri": jwks}).to_string()
    };
    let ok = discovery::ProviderMetadata::parse(
        doc("https://idp.example", "https://keys.idp.example/jwks").as_bytes(),
        "https://idp.example",
    );
    assert!(ok.is_ok(), "{ok:?}");
    let e = discovery::ProviderMetadata::parse(
        doc("https://idp.example/", "https://idp.example/jwks").as_bytes(),
        "https://idp.example",
    )
    .unwrap_err();
    assert!(e.to_string().contains("not the configured"), "{e}");
    let e = discovery::ProviderMetadata::parse(
        doc("https://idp.example", "http://10.0.0.1/jwks").as_bytes(),
        "https://idp.example",
    )
    .unwrap_err();
    assert!(e.to_string().contains("jwks_uri"), "{e}");
    // Review r3 §6: an https issuer's document cannot aim the hub at plain http on the hub's
    // own loopback either; a loopback http issuer (tests) may.
    let e = discovery::ProviderMetadata::parse(
        doc("https://idp.example", "http://127.0.0.1:9000/jwks").as_bytes(),
        "https://idp.example",
    )
    .unwrap_err();
    assert!(
        e.to_string()
            .contains("only when the issuer itself is http"),
        "{e}"
    );
    assert!(
        discovery::ProviderMetadata::parse(
            doc("http://127.0.0.1:8000", "http://127.0.0.1:8000/jwks").as_bytes(),
            "http://127.0.0.1:8000",
        )
        .is_ok()
    );
}

/// Intervals short enough for tests: unknown kids fetch at most every second, a key set is kept
/// 300 ms to 2 s, retries start at 100 ms.
fn quick() -> keys::Timing {
    keys::Timing {
        min_max_age: Duration::from_millis(300),
        max_max_age: Duration::from_secs(2),
        default_max_age: Duration::from_secs(2),
        unknown_kid_interval: Duration::from_secs(1),
        first_retry: Duration::from_millis(100),
        max_retry: Duration::from_millis(200),
    }
}

async fn started(
    issuer: &TestIssuer,
    stale_max: Duration,
) -> (Authenticator, tokio::sync::oneshot::Sender<()>) {
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let mut c = config(issuer);
    c.jwks_stale_max = stale_max;
    let (handle, _task) = Keys::spawn_with(
        c.clone(),
        fetch::Fetcher::new(None).unwrap(),
        quick(),
        async move {
            let _ = stopped.await;
        },
    );
    assert!(handle.ready(Duration::from_secs(10)).await, "keys fetched");
    (Authenticator::new(Verifier::new(c), handle), stop)
}

#[tokio::test]
async fn a_rotated_key_is_fetched_on_its_first_token_and_a_retired_key_refused() {
    let issuer = TestIssuer::start().await;
    let (auth, _stop) = started(&issuer, Duration::from_secs(3600)).await;
    let old = issuer.token("ana", &[]);
    assert!(matches!(auth.authenticate(&old), Outcome::Accepted(_)));
    let fetches = issuer.jwks_fetches();

    issuer.rotate();
    let new = issuer.token("ana", &["team-a-sre"]);
    // The first try names a kid the hub lacks: refused, and a fetch asked for.
    assert!(matches!(
        auth.authenticate(&new),
        Outcome::Refused(Refusal::Verify(VerifyError::UnknownKey(_)))
    ));
    assert!(auth.keys().changed(Duration::from_secs(5)).await);
    assert!(matches!(auth.authenticate(&new), Outcome::Accepted(_)));
    assert_eq!(issuer.jwks_fetches(), fetches + 1);

    // Forged kids in a burst: no fetch within the interval of the last one, then one.
    let generation = auth.keys().current().unwrap().generation();
    for i in 0..50 {
        let forged = issuer.mint(Mint::user("ana", &[]).signed_by(&format!("forged-{i}")));
        assert!(matches!(auth.authenticate(&forged), Outcome::Refused(_)));
    }
    tokio::time::sleep(Duration::from_millis(250)).await;
    assert_eq!(
        issuer.jwks_fetches(),
        fetches + 1,
        "unknown kids wait for the interval"
    );
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert_eq!(
        issuer.jwks_fetches(),
        fetches + 2,
        "then one fetch for all fifty"
    );
    // Review r3 §5: that fetch found the same keys, so the verified tokens stay cached (the
    // set keeps its number); anyone's unknown kid does not empty the cache.
    assert_eq!(auth.keys().current().unwrap().generation(), generation);

    // A retired key's tokens are refused once the keys are fetched again (not at their exp).
    issuer.retire("key-1");
    assert!(auth.keys().changed(Duration::from_secs(5)).await);
    assert!(matches!(
        auth.authenticate(&old),
        Outcome::Refused(Refusal::Verify(VerifyError::UnknownKey(_)))
    ));

    // Another issuer's token is not this authenticator's to judge.
    let foreign = issuer.mint(Mint::user("ana", &[]).with("iss", "https://other.example"));
    assert_eq!(auth.authenticate(&foreign), Outcome::NotMine);
    assert_eq!(
        auth.authenticate("0123456789abcdef-admin"),
        Outcome::NotMine
    );
}

#[tokio::test]
async fn the_last_good_keys_are_kept_while_the_issuer_is_down_until_they_are_too_old() {
    let issuer = TestIssuer::start().await;
    issuer.set_max_age(Some(0));
    let (auth, _stop) = started(&issuer, Duration::from_millis(1500)).await;
    let token = issuer.token("ana", &[]);
    issuer.set_down(true);
    // Refetches (every 300 ms, max-age 0 clamped) fail: the old keys still verify.
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert!(
        auth.keys()
            .counters()
            .failures
            .load(std::sync::atomic::Ordering::Relaxed)
            >= 1
    );
    assert!(matches!(auth.authenticate(&token), Outcome::Accepted(_)));
    // Past --oidc-jwks-stale-max: no keys, and the refusal says why.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    match auth.authenticate(&token) {
        Outcome::Refused(Refusal::NoKeys(why)) => assert!(why.contains("503"), "{why}"),
        other => panic!("{other:?}"),
    }
    // The issuer back: keys again.
    issuer.set_down(false);
    assert!(auth.keys().ready(Duration::from_secs(5)).await);
    assert!(matches!(auth.authenticate(&token), Outcome::Accepted(_)));
}

/// Follows the issuer's authorization URL as a signed-in browser would: the code and state of
/// the redirect back.
async fn authorize(fetcher: &fetch::Fetcher, url: &str) -> (String, String) {
    let request = http::Request::get(url).body(Vec::new()).unwrap();
    let answer = fetcher.exchange(request).await.unwrap();
    assert_eq!(answer.status(), http::StatusCode::FOUND);
    let location = answer.headers()[http::header::LOCATION].to_str().unwrap();
    let query = location.split_once('?').unwrap().1;
    let params: std::collections::HashMap<String, String> =
        form_urlencoded::parse(query.as_bytes())
            .into_owned()
            .collect();
    (params["code"].clone(), params["state"].clone())
}

#[tokio::test]
async fn the_code_flow_with_pkce_signs_in_the_issuers_user_once() {
    let issuer = TestIssuer::start().await;
    let (auth, _stop) = started(&issuer, Duration::from_secs(3600)).await;
    let fetcher = fetch::Fetcher::new(None).unwrap();
    let login = login::Login::new(
        auth,
        fetcher.clone(),
        CLIENT_ID,
        None,
        "http://127.0.0.1:8080/oidc/callback",
        vec!["openid".into(), "groups".into()],
    )
    .unwrap();
    let (url, pending) = login.begin();
    assert!(url.contains("code_challenge_method=S256"), "{url}");
    assert!(url.contains(&format!("nonce={}", pending.nonce)), "{url}");
    let (code, state) = authorize(&fetcher, &url).await;
    assert_eq!(state, pending.state);
    let subject = login.finish(pending, &code).await.unwrap();
    assert_eq!(subject.username, format!("{}#ana", issuer.url()));
    assert_eq!(subject.groups, ["team-a-sre"]);

    // Another sign-in's verifier does not redeem this code (PKCE), and a code redeems once.
    let (url, _first) = login.begin();
    let (code, _) = authorize(&fetcher, &url).await;
    let (_, other) = login.begin();
    let e = login.finish(other, &code).await.unwrap_err().to_string();
    assert!(e.contains("invalid_grant"), "{e}");
    let (url, pending) = login.begin();
    let (code, _) = authorize(&fetcher, &url).await;
    let (_, again) = login.begin();
    login.finish(pending, &code).await.unwrap();
    assert!(login.finish(again, &code).await.is_err());
}

#[test]
fn a_sign_ins_id_token_must_be_this_clients_and_list_only_trusted_audiences() {
    use crate::login::{LoginError, issued_to};
    let claims = |aud: serde_json::Value, azp: Option<&str>| {
        let mut c = verify::Claims::new();
        c.insert("aud".into(), aud);
        if let Some(azp) = azp {
            c.insert("azp".into(), azp.into());
        }
        c
    };
    let trusted = ["flotilla".to_string(), "flotilla-cli".to_string()];
    let check = |aud, azp| issued_to(&claims(aud, azp), "flotilla", &trusted);
    assert!(check("flotilla".into(), None).is_ok());
    assert!(check(serde_json::json!(["flotilla"]), Some("flotilla")).is_ok());
    assert!(
        check(
            serde_json::json!(["flotilla", "flotilla-cli"]),
            Some("flotilla")
        )
        .is_ok()
    );
    let refused = |aud, azp| check(aud, azp).unwrap_err().to_string();
    // Not this client's: not in aud, or issued to another (azp), or several without azp.
    assert_eq!(
        refused("flotilla-cli".into(), None),
        "the issuer's ID token was issued to another client (aud)"
    );
    assert_eq!(
        refused(
            serde_json::json!(["flotilla", "flotilla-cli"]),
            Some("flotilla-cli")
        ),
        "the issuer's ID token was issued to another client (azp)"
    );
    assert_eq!(
        refused("flotilla".into(), Some("flotilla-cli")),
        "the issuer's ID token was issued to another client (azp)"
    );
    assert_eq!(
        refused(serde_json::json!(["flotilla", "flotilla-cli"]), None),
        "the issuer's ID token was issued to another client (azp)"
    );
    // An audience the hub does not trust.
    assert!(matches!(
        check(serde_json::json!(["flotilla", "grafana"]), Some("flotilla")),
        Err(LoginError::Untrusted(a)) if a == "grafana"
    ));
}
