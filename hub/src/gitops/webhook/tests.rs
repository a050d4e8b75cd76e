use super::payload::{follows, normalise};
use super::rate::{Rates, SOURCES};
use super::verify::{Provider, sign};
use super::*;
use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};

const SHA: &str = "0123456789abcdef0123456789abcdef01234567";

fn github_push(git_ref: &str) -> Vec<u8> {
    serde_json::json!({
        "ref": git_ref,
        "after": SHA,
        "repository": {
            "clone_url": "https://GitHub.com/ops/shop.git",
            "ssh_url": "git@github.com:ops/shop.git",
            "html_url": "https://github.com/ops/shop",
        },
    })
    .to_string()
    .into_bytes()
}

fn gitlab_push() -> Vec<u8> {
    serde_json::json!({
        "object_kind": "push",
        "ref": "refs/heads/main",
        "after": "1111111111111111111111111111111111111111",
        "checkout_sha": SHA,
        "project": {
            "git_http_url": "https://gitlab.example.com/ops/shop.git",
            "git_ssh_url": "ssh://git@gitlab.example.com:2222/ops/shop.git",
            "web_url": "https://gitlab.example.com/ops/shop",
        },
    })
    .to_string()
    .into_bytes()
}

fn delivery(headers: &[(&str, &str)], body: Vec<u8>) -> Delivery {
    Delivery {
        headers: headers
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        body: body.into(),
        target: None,
    }
}

fn github(secret: &str, event: &str, body: Vec<u8>) -> Delivery {
    let sig = format!("sha256={}", sign(secret.as_bytes(), &body));
    delivery(
        &[
            ("x-github-event", event),
            ("x-hub-signature-256", &sig),
            ("content-type", "application/json"),
        ],
        body,
    )
}

fn spec(repo: &str, branch: &str, secret: &str) -> GitRepoSpec {
    GitRepoSpec {
        repo: repo.into(),
        branch: branch.into(),
        webhook_secret: secret.into(),
        ..Default::default()
    }
}

fn data(key: &str, value: &str) -> Option<BTreeMap<String, Vec<u8>>> {
    Some([(key.to_owned(), value.as_bytes().to_vec())].into())
}

/// A GitRepo as the decision sees it: key, spec, its webhook Secret's data.
type Repo = (ObjectRef, GitRepoSpec, Option<BTreeMap<String, Vec<u8>>>);

/// Reads `d` and decides it over GitRepos, matching as the hub does.
fn run(d: &Delivery, repos: &[Repo]) -> (Answer, Vec<ObjectRef>) {
    let r = match read(d) {
        Ok(r) => r,
        Err(a) => return (a, Vec::new()),
    };
    let candidates: Vec<Candidate<'_>> = repos
        .iter()
        .filter(|(k, s, _)| matches(&r, d.target.as_ref(), k, s))
        .map(|(k, s, secret)| Candidate {
            key: k.clone(),
            spec: s,
            secret: secret.clone(),
        })
        .collect();
    decide(d, &r, &candidates)
}

fn shop() -> Vec<Repo> {
    vec![
        (
            ObjectRef::new("edge", "shop"),
            spec("https://github.com/ops/shop", "main", "hook"),
            data("github", "s3cret"),
        ),
        (
            ObjectRef::new("edge", "shop-dev"),
            spec("git@github.com:ops/shop.git", "dev", "hook"),
            data("github", "s3cret"),
        ),
        (
            ObjectRef::new("other", "shop"),
            spec("https://github.com/ops/shop.git", "main", "other-hook"),
            data("github", "another"),
        ),
    ]
}

#[test]
fn a_signed_github_push_fetches_the_gitrepos_following_its_branch_whose_secret_signed_it() {
    let (a, keys) = run(
        &github("s3cret", "push", github_push("refs/heads/main")),
        &shop(),
    );
    assert_eq!(a.outcome, Outcome::Triggered, "{a:?}");
    assert_eq!(a.outcome.status(), 202);
    assert_eq!(keys, [ObjectRef::new("edge", "shop")]);
    assert_eq!(a.provider, Some(Provider::GitHub));
    let (a, keys) = run(
        &github("s3cret", "push", github_push("refs/heads/dev")),
        &shop(),
    );
    assert_eq!(keys, [ObjectRef::new("edge", "shop-dev")], "{a:?}");
    let (a, keys) = run(
        &github("s3cret", "push", github_push("refs/heads/x")),
        &shop(),
    );
    assert_eq!((a.outcome, keys.len()), (Outcome::Ignored, 0), "{a:?}");
}

#[test]
fn a_bad_or_missing_signature_is_401_and_fetches_nothing() {
    let mut d = github("wrong", "push", github_push("refs/heads/main"));
    let (a, keys) = run(&d, &shop());
    assert_eq!(
        (a.outcome, a.outcome.status()),
        (Outcome::Unauthorized, 401)
    );
    assert!(keys.is_empty());
    assert!(
        !a.message.contains("s3cret") && !a.message.contains("edge/"),
        "{a:?}"
    );
    d.headers
        .insert("x-hub-signature-256".into(), "sha256=zz".into());
    assert_eq!(run(&d, &shop()).0.outcome, Outcome::Unauthorized);
    d.headers.remove("x-hub-signature-256");
    assert_eq!(run(&d, &shop()).0.outcome, Outcome::Unauthorized);
    // The body changed after signing.
    let mut d = github("s3cret", "push", github_push("refs/heads/main"));
    d.body = github_push("refs/heads/dev").into();
    assert_eq!(run(&d, &shop()).0.outcome, Outcome::Unauthorized);
    // A GitRepo without a webhookSecret is never fetched by a webhook.
    let open = vec![(
        ObjectRef::new("edge", "shop"),
        spec("https://github.com/ops/shop", "main", ""),
        None,
    )];
    let (a, _) = run(&github("", "push", github_push("refs/heads/main")), &open);
    assert_eq!(a.outcome, Outcome::Unauthorized);
    assert!(a.detail.contains("has a webhookSecret"), "{a:?}");
}

#[test]
fn gitlab_token_and_gitea_signature_verify_with_their_keys() {
    let repos = vec![(
        ObjectRef::new("edge", "shop"),
        spec("https://gitlab.example.com/ops/shop.git", "main", "hook"),
        Some(
            [
                ("gitlab".to_owned(), b"gl-token".to_vec()),
                ("gitea".to_owned(), b"gt-key".to_vec()),
            ]
            .into(),
        ),
    )];
    let gl = |token: &str| {
        delivery(
            &[("x-gitlab-event", "Push Hook"), ("x-gitlab-token", token)],
            gitlab_push(),
        )
    };
    let (a, keys) = run(&gl("gl-token"), &repos);
    assert_eq!((a.outcome, keys.len()), (Outcome::Triggered, 1), "{a:?}");
    assert_eq!(
        run(&gl("gl-token2"), &repos).0.outcome,
        Outcome::Unauthorized
    );
    assert_eq!(run(&gl("gt-key"), &repos).0.outcome, Outcome::Unauthorized);
    let r = read(&gl("gl-token")).unwrap();
    assert_eq!(r.push.commit, SHA, "checkout_sha is the commit");

    let body = serde_json::json!({
        "ref": "refs/heads/main", "after": SHA,
        "repository": {"clone_url": "https://gitlab.example.com/ops/shop.git"},
    })
    .to_string()
    .into_bytes();
    let sig = sign(b"gt-key", &body);
    // Gitea sends X-GitHub-Event too: its own header decides.
    let d = delivery(
        &[
            ("x-gitea-event", "push"),
            ("x-github-event", "push"),
            ("x-gitea-signature", &sig),
        ],
        body,
    );
    let (a, keys) = run(&d, &repos);
    assert_eq!(
        (a.provider, keys.len()),
        (Some(Provider::Gitea), 1),
        "{a:?}"
    );
}

#[test]
fn unknown_senders_other_events_and_bodies_that_are_no_push_are_400() {
    let d = delivery(
        &[("x-custom-event", "push")],
        github_push("refs/heads/main"),
    );
    assert_eq!(run(&d, &shop()).0.outcome, Outcome::BadRequest);
    let (a, _) = run(&github("s3cret", "issues", b"{}".to_vec()), &shop());
    assert_eq!((a.outcome, a.outcome.status()), (Outcome::WrongEvent, 400));
    assert!(a.message.contains("\"issues\" is not a push"), "{a:?}");
    for body in [
        &b"not json"[..],
        b"{}",
        br#"{"after":"xyz","repository":{"clone_url":"a/b"}}"#,
    ] {
        let (a, _) = run(&github("s3cret", "push", body.to_vec()), &shop());
        assert_eq!(
            a.outcome,
            Outcome::BadRequest,
            "{}",
            String::from_utf8_lossy(body)
        );
    }
}

#[test]
fn a_repository_nobody_follows_or_a_path_naming_another_gitrepo_is_refused_as_unverified() {
    let other = String::from_utf8(github_push("refs/heads/main"))
        .unwrap()
        .replace("ops/shop", "ops/bank");
    let (a, _) = run(&github("s3cret", "push", other.into_bytes()), &shop());
    assert_eq!((a.outcome, a.outcome.status()), (Outcome::UnknownRepo, 401));
    // The sender learns nothing of what the fleet follows; the hub's log does.
    assert_eq!(a.message, super::UNVERIFIED);
    let (forged, _) = run(
        &github("wrong", "push", github_push("refs/heads/main")),
        &shop(),
    );
    assert_eq!(
        (forged.message.as_str(), forged.outcome.status()),
        (a.message.as_str(), 401)
    );
    assert!(a.detail.contains("github.com/ops/bank"), "{a:?}");
    let long = String::from_utf8(github_push("refs/heads/main"))
        .unwrap()
        .replace(
            "ops/shop",
            &format!("ops/{}\\nforged log line", "x".repeat(500)),
        );
    let (a, _) = run(&github("s3cret", "push", long.into_bytes()), &shop());
    assert!(a.detail.len() < 300, "cut: {}", a.detail.len());
    assert!(!a.detail.contains('\n'), "quoted: {}", a.detail);
    let mut d = github("s3cret", "push", github_push("refs/heads/main"));
    d.target = Some(ObjectRef::new("edge", "nope"));
    assert_eq!(run(&d, &shop()).0.outcome, Outcome::UnknownRepo);
    // The path picks one GitRepo of those following the repository.
    d.target = Some(ObjectRef::new("other", "shop"));
    assert_eq!(run(&d, &shop()).0.outcome, Outcome::Unauthorized);
    d.target = Some(ObjectRef::new("edge", "shop"));
    assert_eq!(run(&d, &shop()).1, [ObjectRef::new("edge", "shop")]);
}

#[test]
fn a_ping_is_verified_and_a_deleted_branch_fetches_nothing() {
    let (a, keys) = run(&github("s3cret", "ping", github_push("")), &shop());
    assert_eq!(
        (a.outcome, a.outcome.status(), keys.len()),
        (Outcome::Ping, 200, 0)
    );
    assert!(a.message.contains("edge/shop"), "{a:?}");
    assert_eq!(
        run(&github("bad", "ping", github_push("")), &shop())
            .0
            .outcome,
        Outcome::Unauthorized
    );
    let body = String::from_utf8(github_push("refs/heads/main"))
        .unwrap()
        .replace(SHA, &"0".repeat(40));
    let (a, keys) = run(&github("s3cret", "push", body.into_bytes()), &shop());
    assert_eq!((a.outcome, keys.len()), (Outcome::Ignored, 0), "{a:?}");
}

#[test]
fn githubs_form_encoding_is_read_from_its_payload_field() {
    let json = String::from_utf8(github_push("refs/heads/main")).unwrap();
    let body: String = form_urlencoded::Serializer::new(String::new())
        .append_pair("payload", &json)
        .finish();
    let mut d = github("s3cret", "push", body.into_bytes());
    d.headers.insert(
        "content-type".into(),
        "application/x-www-form-urlencoded".into(),
    );
    let (a, keys) = run(&d, &shop());
    assert_eq!((a.outcome, keys.len()), (Outcome::Triggered, 1), "{a:?}");
}

#[test]
fn urls_compare_without_scheme_user_port_dot_git_and_host_case() {
    let same = [
        "https://github.com/ops/shop.git",
        "https://GitHub.COM/ops/shop",
        "git@github.com:ops/shop.git",
        "ssh://git@github.com:22/ops/shop.git",
        "git://github.com/ops/shop.git/",
        "http://user@github.com:8080/ops/shop",
    ];
    for u in same {
        assert_eq!(normalise(u), "github.com/ops/shop", "{u}");
    }
    assert_ne!(
        normalise("https://github.com/Ops/shop"),
        "github.com/ops/shop"
    );
    assert_eq!(normalise("git://127.0.0.1:9418/shop.git"), "127.0.0.1/shop");
    assert_eq!(normalise("file:///srv/git/shop.git"), "/srv/git/shop");
}

#[test]
fn a_branch_follows_its_heads_ref_and_a_revision_its_tag() {
    assert!(follows("main", "", "refs/heads/main"));
    assert!(!follows("main", "", "refs/heads/main2"));
    assert!(!follows("main", "", "refs/tags/main"));
    assert!(follows("", "v1.2", "refs/tags/v1.2"));
    assert!(!follows("", "v1.2", "refs/heads/v1.2"));
    assert!(!follows("", "", "refs/heads/main"));
}

#[test]
fn each_source_has_its_own_rate_and_the_table_stays_bounded() {
    let now = Instant::now();
    let mut rates = Rates::new(10.0, 20.0);
    let a = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1));
    let b = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 2));
    assert_eq!((0..25).filter(|_| rates.admit(a, now)).count(), 20);
    assert!(rates.admit(b, now), "another source is not held back");
    assert!(!rates.admit(a, now));
    assert!(rates.admit(a, now + Duration::from_millis(100)), "refilled");
    for i in 0..(SOURCES as u32 + 10) {
        rates.admit(IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + i)), now);
    }
    assert!(rates.len() <= SOURCES, "{}", rates.len());
}

#[test]
fn a_sender_rotating_addresses_neither_resets_the_others_nor_escapes_by_ipv6() {
    let now = Instant::now();
    let mut rates = Rates::new(10.0, 20.0);
    let a = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1));
    assert_eq!((0..25).filter(|_| rates.admit(a, now)).count(), 20);
    // Every remembered bucket busy: a new source is refused, the old ones are kept.
    for i in 0..(SOURCES as u32) {
        rates.admit(IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + i)), now);
    }
    assert!(!rates.admit(IpAddr::V4(Ipv4Addr::new(203, 0, 113, 9)), now));
    assert!(!rates.admit(a, now), "a's bucket was not handed back full");
    assert!(rates.len() <= SOURCES);
    // Once buckets refill they are forgotten and new sources come in.
    let later = now + Duration::from_secs(5);
    assert!(rates.admit(IpAddr::V4(Ipv4Addr::new(203, 0, 113, 9)), later));

    // An IPv6 /64 is one source, whatever the address within it; an IPv4-mapped one is v4.
    let mut rates = Rates::new(10.0, 20.0);
    let admitted = (0..40u128)
        .filter(|i| {
            let ip: std::net::Ipv6Addr = (0x2001_0db8_0000_0001_0000_0000_0000_0000u128 + i).into();
            rates.admit(IpAddr::V6(ip), now)
        })
        .count();
    assert_eq!(admitted, 20);
    let other: std::net::Ipv6Addr = 0x2001_0db8_0000_0002_0000_0000_0000_0001u128.into();
    assert!(
        rates.admit(IpAddr::V6(other), now),
        "another /64 has its own"
    );
    let mapped = Ipv4Addr::new(198, 51, 100, 7).to_ipv6_mapped();
    assert_eq!(
        (0..25)
            .filter(|_| rates.admit(IpAddr::V6(mapped), now))
            .count(),
        20
    );
    assert!(!rates.admit(IpAddr::V4(Ipv4Addr::new(198, 51, 100, 7)), now));
}
