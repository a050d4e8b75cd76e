//! The sign-in's pure rules: its flags, the sign-ins kept by state, the login cookie.

use super::*;
use http::HeaderValue;

fn args(client: Option<&str>, external: Option<&str>) -> SignInArgs {
    SignInArgs {
        dashboard_oidc_client_id: client.map(str::to_string),
        dashboard_oidc_client_secret_file: None,
        dashboard_external_url: external.map(str::to_string),
        dashboard_oidc_scopes: vec!["openid profile".into(), "email".into()],
    }
}

#[test]
fn the_flags_need_the_issuer_one_of_its_audiences_and_a_sound_external_url() {
    let issuer = flotilla_oidc::Config::new("https://idp.example", &["flotilla", "kubectl"]);
    let mut errors = Vec::new();
    let config = args(Some("flotilla"), Some("https://hub.example:8443/"))
        .config(Some(&issuer), &mut errors)
        .unwrap();
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(config.external_url, "https://hub.example:8443");
    assert_eq!(config.scopes, ["openid", "profile", "email"]);
    assert_eq!(
        (config.pending_max, config.pending_ttl.as_secs()),
        (1_000, 600)
    );
    // Not asked for: nothing, no error.
    assert!(
        args(None, None)
            .config(Some(&issuer), &mut errors)
            .is_none()
    );
    assert!(errors.is_empty());

    let refused = |a: SignInArgs, issuer: Option<&flotilla_oidc::Config>, want: &[&str]| {
        let mut errors = Vec::new();
        assert!(a.config(issuer, &mut errors).is_none());
        for w in want {
            assert!(
                errors.iter().any(|e| e.contains(w)),
                "want {w:?} in {errors:?}"
            );
        }
    };
    refused(
        args(Some("flotilla"), Some("https://hub.example")),
        None,
        &["--dashboard-oidc-client-id needs --oidc-issuer-url"],
    );
    refused(
        args(Some("grafana"), None),
        Some(&issuer),
        &[
            "\"grafana\" must be one of --oidc-client-id (flotilla, kubectl)",
            "needs --dashboard-external-url",
        ],
    );
    let mut no_openid = args(Some("flotilla"), Some("https://hub.example"));
    no_openid.dashboard_oidc_scopes = vec!["email".into()];
    refused(no_openid, Some(&issuer), &["must include openid"]);
    let mut no_secret = args(Some("flotilla"), Some("https://hub.example"));
    no_secret.dashboard_oidc_client_secret_file = Some("/nonexistent/secret".into());
    refused(
        no_secret,
        Some(&issuer),
        &["--dashboard-oidc-client-secret-file /nonexistent/secret"],
    );
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("secret");
    std::fs::write(&secret, "s3cr3t\n").unwrap();
    let mut with_secret = args(Some("flotilla"), Some("https://hub.example"));
    with_secret.dashboard_oidc_client_secret_file = Some(secret);
    let config = with_secret.config(Some(&issuer), &mut errors).unwrap();
    // The secret is never printed.
    assert!(!format!("{config:?}").contains("s3cr3t"));
    assert_eq!(config.client_secret.unwrap().expose(), "s3cr3t");
}

#[test]
fn the_external_url_is_https_or_loopback_and_the_dashboards_root() {
    assert_eq!(
        external_url("http://127.0.0.1:8080").unwrap(),
        "http://127.0.0.1:8080"
    );
    assert_eq!(
        external_url("http://localhost:8080/").unwrap(),
        "http://localhost:8080"
    );
    assert_eq!(
        external_url("http://[::1]:8080").unwrap(),
        "http://[::1]:8080"
    );
    for (bad, want) in [
        ("http://hub.example", "must be https"),
        ("ftp://hub.example", "must be https"),
        ("https://hub.example/dash", "no path"),
        ("https://hub.example/?x=1", "no path, query"),
        ("https://hub.example/#f", "fragment"),
        ("https://user:pw@hub.example", "credentials"),
        ("/relative", "absolute"),
    ] {
        let e = external_url(bad).unwrap_err();
        assert!(e.contains(want), "{bad}: want {want:?} in {e}");
    }
}

fn waiting(started: Instant, to: &str) -> Waiting<()> {
    Waiting {
        pending: (),
        return_to: to.into(),
        started,
    }
}

#[test]
fn sign_ins_under_way_are_bounded_taken_once_and_only_by_their_browser() {
    let config = SignInConfig {
        pending_max: 3,
        pending_ttl: Duration::from_secs(600),
        ..SignInConfig::default()
    };
    let t0 = Instant::now();
    let mut kept = HashMap::new();
    // A flood of starts evicts the oldest; it never grows past the bound.
    for i in 0..10u64 {
        let at = t0 + Duration::from_secs(i);
        keep(&mut kept, format!("s{i}"), waiting(at, "/"), &config);
    }
    assert_eq!(kept.len(), 3);
    assert!(kept.contains_key("s9") && !kept.contains_key("s6"));
    // Expired ones go at the next start.
    let later = t0 + Duration::from_secs(700);
    keep(&mut kept, "fresh".into(), waiting(later, "/works"), &config);
    assert_eq!(kept.len(), 1);

    let now = later + Duration::from_secs(1);
    let ttl = config.pending_ttl;
    // Another browser's cookie (or none) takes nothing, and leaves it for its own browser.
    for cookie in [None, Some("s9"), Some(""), Some("fresh-not")] {
        let e = take(&mut kept, "fresh", cookie, ttl, now).unwrap_err();
        assert!(matches!(e, CallbackError::Unknown), "{cookie:?}");
    }
    let w = take(&mut kept, "fresh", Some("fresh"), ttl, now).unwrap();
    assert_eq!(w.return_to, "/works");
    // Once: a replayed callback finds nothing.
    assert!(take(&mut kept, "fresh", Some("fresh"), ttl, now).is_err());
    // Too old at the callback.
    keep(&mut kept, "slow".into(), waiting(now, "/"), &config);
    let e = take(&mut kept, "slow", Some("slow"), ttl, now + ttl).unwrap_err();
    assert_eq!(
        e.to_string(),
        "this sign-in was not started here or has expired; start again"
    );
    // An empty state never matches an empty cookie.
    keep(&mut kept, String::new(), waiting(now, "/"), &config);
    assert!(take(&mut kept, "", Some(""), ttl, now).is_err());
}

#[test]
fn the_login_cookie_is_http_only_lax_and_scoped_to_the_sign_in() {
    let set = login_cookie(Some("abc"), true, Duration::from_secs(600));
    assert_eq!(
        set,
        "flotilla_login=abc; Path=/oidc; HttpOnly; SameSite=Lax; Max-Age=600; Secure"
    );
    let clear = login_cookie(None, false, Duration::ZERO);
    assert_eq!(
        clear,
        "flotilla_login=; Path=/oidc; HttpOnly; SameSite=Lax; Max-Age=0"
    );
}

/// An issuer whose every ID token (`jwt.USER`) expires at the Unix second it names after the
/// user (`jwt.ana.1700000000`).
struct Expiring;

impl crate::grpc::auth::BearerVerifier for Expiring {
    fn verify(&self, token: &str) -> crate::grpc::auth::Verified {
        use crate::grants::{Principal, Via};
        let Some((user, expires)) = token.strip_prefix("jwt.").and_then(|t| t.split_once('.'))
        else {
            return crate::grpc::auth::Verified::NotMine;
        };
        let via = Via::Oidc {
            issuer: "https://idp.example".into(),
            expires: expires.parse().unwrap(),
        };
        crate::grpc::auth::Verified::Principal(Principal::user(user, via))
    }
}

#[test]
fn an_id_token_pasted_at_the_token_form_makes_a_session_that_ends_with_it() {
    // Review r3 §2: it made a 12 h session whatever the token's exp.
    let tokens = crate::grpc::auth::Tokens::parse("t.csv", "admin-token-0123456789,alice,admin\n")
        .unwrap()
        .with_bearer(Arc::new(Expiring));
    let sessions = Sessions::new(Some(tokens), auth::SessionConfig::default());
    let cookie = |id: &str| {
        let mut h = HeaderMap::new();
        h.insert(
            http::header::COOKIE,
            HeaderValue::from_str(&format!("{}={id}", auth::COOKIE)).unwrap(),
        );
        h
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    // Accepted within the clock skew at its exp: a session, but one that is already over.
    let ending = sessions.sign_in(&format!("jwt.ana.{now}")).unwrap();
    assert_eq!(
        sessions.authenticate(&cookie(&ending)).unwrap_err(),
        auth::Refusal::SessionEnded
    );
    // An hour left: the session lasts it.
    let hour = sessions
        .sign_in(&format!("jwt.ben.{}", now + 3600))
        .unwrap();
    assert_eq!(
        sessions
            .authenticate(&cookie(&hour))
            .unwrap()
            .identity
            .name(),
        "ben"
    );
    // A CSV token's session: the TTL.
    let csv = sessions.sign_in("admin-token-0123456789").unwrap();
    assert!(sessions.authenticate(&cookie(&csv)).is_ok());
    assert!(sessions.sign_in("jwt.nobody").is_none());
}
