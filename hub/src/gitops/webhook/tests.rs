use super::forward::too_large;
use super::forwarded::client;
use super::index::{Index, MAX_CANDIDATES};
use super::pace::{BODY_TIME, FLOOR, GRACE, deadline, too_slow};
use super::payload::{follows, normalise};
use super::pool::{Full, PENALTY, Place, Pool, holder_of, penalty};
use super::rate::{Rates, SOURCES};
use super::replay::{RECENT, Recent, SAME_COMMIT_EVERY, STATUS_EVERY, marks, record};
use super::verify::{Provider, Secret, sign};
use super::*;
use crate::webserver::Cidr;
use flotilla_api::v1::GitRepoSpec;
use std::collections::BTreeMap;
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

/// The index over `repos`, as the GitRepos' task keeps it.
fn index_of(repos: &[Repo]) -> Index {
    let mut index = Index::default();
    for (k, s, _) in repos {
        index.set(k, Some(s));
    }
    index
}

/// The candidates of `d` among `repos`, found and given their secrets as the hub does (only the
/// provider's key out of each Secret).
fn candidates_of(d: &Delivery, r: &Read, repos: &[Repo]) -> (Vec<Candidate>, usize) {
    candidates_at(d, r, repos, 0)
}

/// [`candidates_of`] for the delivery whose round-robin by namespace starts at `turn`.
fn candidates_at(d: &Delivery, r: &Read, repos: &[Repo], turn: usize) -> (Vec<Candidate>, usize) {
    let (found, left_out) = index_of(repos).candidates(r, d.target.as_ref(), turn);
    let candidates = found
        .into_iter()
        .map(|(key, f)| {
            let data = repos.iter().find(|(k, _, _)| *k == key).unwrap().2.clone();
            let secret = (!f.secret.is_empty())
                .then_some(data)
                .flatten()
                .and_then(|data| {
                    r.provider
                        .secret_keys()
                        .iter()
                        .find_map(|k| data.get(*k).filter(|v| !v.is_empty()).cloned())
                })
                .map(Secret::new);
            Candidate {
                key,
                branch: f.branch,
                revision: f.revision,
                secret,
            }
        })
        .collect();
    (candidates, left_out)
}

/// Reads `d` and decides it over GitRepos, matching as the hub does.
fn run(d: &Delivery, repos: &[Repo]) -> (Answer, Vec<ObjectRef>) {
    let r = match read(d) {
        Ok(r) => r,
        Err(a) => return (a, Vec::new()),
    };
    let (candidates, left_out) = candidates_of(d, &r, repos);
    decide(d, &r, &candidates, left_out)
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
    let bound = 300 + super::payload::COMPARED.len();
    assert!(a.detail.len() < bound, "cut: {}", a.detail.len());
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
    // GitHub's and GitLab's own paths compare without case; another server's keep theirs.
    assert_eq!(
        normalise("https://github.com/Ops/Shop"),
        "github.com/ops/shop"
    );
    assert_eq!(
        normalise("git@GitLab.com:Team/App.git"),
        "gitlab.com/team/app"
    );
    assert_ne!(
        normalise("https://gitlab.example.com/Ops/shop"),
        "gitlab.example.com/ops/shop"
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

#[test]
fn a_source_holds_at_most_its_share_of_the_deliveries_in_flight() {
    let now = Instant::now();
    let mut pool = Pool::new(16, 2);
    let a = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1));
    assert_eq!(pool.take(a, now), Ok(()));
    assert_eq!(pool.take(a, now), Ok(()));
    assert_eq!(pool.take(a, now), Err(Full::Source), "past its share");
    // It takes eight sources to fill the hub; a ninth is told the hub is full.
    for i in 2..=8 {
        let s = IpAddr::V4(Ipv4Addr::new(192, 0, 2, i));
        assert_eq!(
            (pool.take(s, now), pool.take(s, now)),
            (Ok(()), Ok(())),
            "source {i}"
        );
    }
    assert_eq!((pool.taken(), pool.sources()), (16, 8));
    let ninth = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 9));
    assert_eq!(pool.take(ninth, now), Err(Full::Hub));
    assert_eq!(
        pool.take(a, now),
        Err(Full::Source),
        "its share is named first"
    );
    pool.give_back(a);
    assert_eq!(
        pool.take(ninth, now),
        Ok(()),
        "a place given back is taken again"
    );
    assert_eq!(pool.take(a, now), Err(Full::Hub));

    // An IPv6 /48 is one source (every /64 in it), an IPv4-mapped address its IPv4 one.
    let mut pool = Pool::new(16, 2);
    let v6 = |i: u128| IpAddr::V6((0x2001_0db8_0000_0001_0000_0000_0000_0000u128 + i).into());
    let next_64 = IpAddr::V6(0x2001_0db8_0000_0002_0000_0000_0000_0001u128.into());
    assert_eq!(holder_of(v6(1)), holder_of(next_64));
    assert_eq!(
        (pool.take(v6(1), now), pool.take(v6(2), now)),
        (Ok(()), Ok(()))
    );
    assert_eq!(pool.take(v6(3), now), Err(Full::Source));
    assert_eq!(pool.take(next_64, now), Err(Full::Source), "the same /48");
    let other = IpAddr::V6(0x2001_0db8_0001_0000_0000_0000_0000_0001u128.into());
    assert_eq!(
        pool.take(other, now),
        Ok(()),
        "another /48 has its own share"
    );
    let mapped = IpAddr::V6(Ipv4Addr::new(198, 51, 100, 7).to_ipv6_mapped());
    let v4 = IpAddr::V4(Ipv4Addr::new(198, 51, 100, 7));
    assert_eq!(
        (pool.take(mapped, now), pool.take(v4, now)),
        (Ok(()), Ok(()))
    );
    assert_eq!(pool.take(v4, now), Err(Full::Source));
    // Giving back what a source does not hold changes nothing; a source with nothing in
    // flight is forgotten.
    pool.give_back(IpAddr::V4(Ipv4Addr::new(203, 0, 113, 1)));
    assert_eq!((pool.taken(), pool.sources()), (5, 3));
    for ip in [v6(7), v6(8), other, mapped, v4] {
        pool.give_back(ip);
    }
    assert_eq!((pool.taken(), pool.sources()), (0, 0));
}

#[test]
fn a_place_is_given_back_however_its_delivery_ends() {
    use futures::FutureExt;
    let now = Instant::now();
    let pool = std::sync::Arc::new(std::sync::Mutex::new(Pool::new(16, 2)));
    let a = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1));
    let held = [
        Place::take(&pool, a, now).unwrap(),
        Place::take(&pool, a, now).unwrap(),
    ];
    assert_eq!(Place::take(&pool, a, now).unwrap_err(), Full::Source);
    drop(held);
    // A handler dropped while it waits (the sender gone, a timeout) gives its place back too.
    let waiting = async {
        let _place = Place::take(&pool, a, now).unwrap();
        std::future::pending::<()>().await;
    };
    assert!(waiting.now_or_never().is_none());
    let refused = Place::take(&pool, a, now).map(|_| ());
    assert_eq!(refused, Ok(()));
    assert_eq!(pool.lock().unwrap().taken(), 0);
}

#[test]
fn a_source_whose_bodies_are_read_can_start_another_while_they_are_answered() {
    // Review M1: the share counts bodies being read, not answers awaited.
    let now = Instant::now();
    let pool = std::sync::Arc::new(std::sync::Mutex::new(Pool::new(16, 2)));
    let a = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1));
    let mut answering = [
        Place::take(&pool, a, now).unwrap(),
        Place::take(&pool, a, now).unwrap(),
    ];
    assert_eq!(Place::take(&pool, a, now).unwrap_err(), Full::Source);
    for place in &mut answering {
        place.body_read();
        place.body_read(); // twice is once
    }
    let third = Place::take(&pool, a, now).expect("a third while two are answered");
    let fourth = Place::take(&pool, a, now).expect("and a fourth");
    assert_eq!(Place::take(&pool, a, now).unwrap_err(), Full::Source);
    {
        let p = pool.lock().unwrap();
        assert_eq!(
            (p.taken(), p.sources()),
            (4, 1),
            "the hub's places stay taken"
        );
    }
    drop(answering);
    drop((third, fourth));
    let p = pool.lock().unwrap();
    assert_eq!((p.taken(), p.sources()), (0, 0));
    drop(p);

    // The hub's bound still holds answers awaited: 16 read bodies fill it.
    let mut pool = Pool::new(16, 2);
    for _ in 0..16 {
        assert_eq!(pool.take(a, now), Ok(()));
        assert!(pool.body_read(a));
    }
    assert_eq!(pool.take(a, now), Err(Full::Hub));
    pool.answered();
    assert_eq!(pool.take(a, now), Ok(()));
}

#[test]
fn a_body_too_slow_costs_its_source_every_place_for_a_minute() {
    // Review M2: the rule.
    assert_eq!(penalty(Outcome::TooSlow), Some(PENALTY));
    assert_eq!(PENALTY, Duration::from_secs(60));
    for o in [
        Outcome::TooLarge,
        Outcome::Triggered,
        Outcome::Unauthorized,
        Outcome::UnknownRepo,
        Outcome::BadRequest,
        Outcome::RateLimited,
        Outcome::Unavailable,
        Outcome::Busy,
    ] {
        assert_eq!(
            penalty(o),
            None,
            "{o:?}: a real sender's answer costs nothing"
        );
    }

    // The pool: refused at once, however many places are free, for PENALTY; its whole /48
    // with it; another source still served; an answer earning none changes nothing.
    let now = Instant::now();
    let mut pool = Pool::new(16, 2);
    let a = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1));
    let b = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 2));
    pool.penalise(b, Outcome::BadRequest, now);
    assert_eq!(pool.penalised(), 0);
    pool.penalise(a, Outcome::TooSlow, now);
    let refused = Full::Penalised {
        why: Outcome::TooSlow,
        left: PENALTY,
    };
    assert_eq!(pool.take(a, now), Err(refused));
    assert_eq!(pool.take(b, now), Ok(()), "another source is served");
    let later = now + Duration::from_secs(59);
    assert_eq!(
        pool.take(a, later),
        Err(Full::Penalised {
            why: Outcome::TooSlow,
            left: Duration::from_secs(1)
        })
    );
    assert_eq!(pool.take(a, now + PENALTY), Ok(()), "served once it lapsed");
    assert_eq!(pool.penalised(), 0, "and forgotten");

    let v6 = IpAddr::V6(0x2001_0db8_0000_0001_0000_0000_0000_0001u128.into());
    let same_48 = IpAddr::V6(0x2001_0db8_0000_ffff_0000_0000_0000_0001u128.into());
    pool.penalise(v6, Outcome::TooSlow, now);
    assert!(matches!(
        pool.take(same_48, now),
        Err(Full::Penalised {
            why: Outcome::TooSlow,
            ..
        })
    ));

    // Bounded: past SOURCES the lapsed go first, then the one ending soonest.
    let mut pool = Pool::new(16, 2);
    let ip = |i: usize| IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + i as u32));
    for i in 0..SOURCES {
        pool.penalise(
            ip(i),
            Outcome::TooSlow,
            now + Duration::from_millis(i as u64),
        );
    }
    assert_eq!(pool.penalised(), SOURCES);
    let at = now + Duration::from_secs(1);
    pool.penalise(ip(SOURCES), Outcome::TooSlow, at);
    assert_eq!(pool.penalised(), SOURCES);
    assert_eq!(
        pool.take(ip(0), at),
        Ok(()),
        "the soonest to end was forgotten"
    );
    assert!(matches!(pool.take(ip(1), at), Err(Full::Penalised { .. })));
    assert!(matches!(
        pool.take(ip(SOURCES), at),
        Err(Full::Penalised { .. })
    ));
    let lapsed = now + PENALTY + Duration::from_secs(10);
    pool.penalise(ip(SOURCES + 1), Outcome::TooSlow, lapsed);
    assert_eq!(pool.penalised(), 1, "every lapsed one forgotten");
}

proptest::proptest! {
    #[test]
    fn no_source_holds_more_than_its_share_and_the_hub_no_more_than_its_places(
        steps in proptest::collection::vec((0u8..12, proptest::bool::ANY), 0..200),
    ) {
        let now = Instant::now();
        let mut pool = Pool::new(16, 2);
        let mut held = std::collections::HashMap::<u8, usize>::new();
        for (source, take) in steps {
            let ip = IpAddr::V4(Ipv4Addr::new(192, 0, 2, source));
            let n = held.entry(source).or_default();
            if take {
                let total: usize = pool.taken();
                match pool.take(ip, now) {
                    Ok(()) => *n += 1,
                    Err(Full::Source) => proptest::prop_assert_eq!(*n, 2),
                    Err(Full::Hub) => proptest::prop_assert_eq!(total, 16),
                    Err(Full::Penalised { .. }) => proptest::prop_assert!(false, "no penalty"),
                }
            } else if *n > 0 {
                pool.give_back(ip);
                *n -= 1;
            }
            proptest::prop_assert!(held.values().all(|n| *n <= 2));
            proptest::prop_assert_eq!(pool.taken(), held.values().sum::<usize>());
            proptest::prop_assert!(pool.taken() <= 16);
        }
    }
}

/// When the listener ends a body whose frames come as `frames` (time after the headers,
/// bytes), as it reads them: each may wait until [`deadline`] of what came before it.
fn cut_at(frames: impl IntoIterator<Item = (Duration, u64)>) -> Option<Duration> {
    let mut received = 0;
    for (at, n) in frames {
        if at > deadline(received) {
            return Some(deadline(received));
        }
        received += n;
    }
    None
}

#[test]
fn a_body_keeps_up_with_the_floor_past_its_grace_and_is_whole_within_body_time() {
    assert_eq!(FLOOR, 52_428);
    assert_eq!(deadline(0), GRACE);
    assert_eq!(deadline(FLOOR / 2), GRACE);
    assert_eq!(GRACE, Duration::from_secs(3));
    assert_eq!(deadline(3 * FLOOR), GRACE);
    assert_eq!(deadline(4 * FLOOR), Duration::from_secs(4));
    assert_eq!(deadline(MAX_BODY as u64), BODY_TIME);
    let ms = Duration::from_millis;

    // The attack of review A2: a byte every 50 ms, which kept a place for 5 s, is ended at
    // the grace; so is a sender that sends its headers and nothing more.
    let trickle = (1..200).map(|i| (ms(50 * i), 1));
    assert_eq!(cut_at(trickle), Some(GRACE));
    assert_eq!(cut_at([(ms(4_900), 10)]), Some(GRACE));
    // A steady pace over the floor is never cut, up to BODY_TIME.
    let steady = (1..=45).map(|i| (ms(100 * i), 2 * FLOOR / 10));
    assert_eq!(cut_at(steady), None);
    let endless = (1..).map(|i| (ms(100 * i), 2 * FLOOR / 10));
    assert_eq!(cut_at(endless), Some(BODY_TIME));

    // Real senders: a push payload at once; a whole MAX_BODY in TCP slow start over a
    // 300 ms round trip (ten 1,448-byte segments, doubling every round trip); 200 KiB on a
    // 1 Mbit/s line; a small body held up for most of the grace.
    assert_eq!(cut_at([(ms(3), 30_000)]), None);
    let mut sent = 0;
    let slow_start = (0..).map_while(|rtt: u32| {
        let n = (14_480u64 << rtt).min(MAX_BODY as u64 - sent);
        sent += n;
        (n > 0).then(|| (ms(300 * u64::from(rtt)), n))
    });
    assert_eq!(cut_at(slow_start), None);
    let line = (1..=1_640).map(|i| (ms(i), 125));
    assert_eq!(cut_at(line), None);
    assert_eq!(cut_at([(ms(900), 40_000)]), None);
    // Review L6: a small body on a 300 ms path whose segment is lost once (retransmitted at
    // 1.4 s), or twice in a row (the timer doubled: 2.6 s), still comes whole.
    assert_eq!(cut_at([(ms(3), 1_448), (ms(1_400), 28_000)]), None);
    assert_eq!(cut_at([(ms(2_600), 40_000)]), None);

    assert!(too_slow(10, ms(3_000)).contains("slower than 51 KiB a second (10 bytes in 3.0 s)"));
    assert!(too_slow(900_000, BODY_TIME).contains("took longer than 5 s"));
}

/// `n` GitRepos following ops/shop on main, the i-th with secret `s{i % secrets}`, in
/// namespace `edge-{i % secrets}` (one secret a namespace).
fn many(n: usize, secrets: usize) -> Vec<Repo> {
    (0..n)
        .map(|i| {
            (
                ObjectRef::new(format!("edge-{:02}", i % secrets), format!("shop-{i:03}")),
                spec("https://github.com/ops/shop", "main", "hook"),
                data("github", &format!("s{}", i % secrets)),
            )
        })
        .collect()
}

#[test]
fn gitrepos_sharing_a_secret_cost_one_check_and_distinct_secrets_are_capped() {
    let repos = many(30, 3);
    let d = github("s1", "push", github_push("refs/heads/main"));
    let r = read(&d).unwrap();
    let (candidates, left_out) = candidates_of(&d, &r, &repos);
    assert_eq!((candidates.len(), left_out), (30, 0));
    let g = groups(&candidates);
    assert_eq!(g.checked.len(), 3, "one check per distinct secret");
    assert_eq!(g.checked[1].1.len(), 10);
    assert_eq!((g.without_secret, g.unchecked), (0, 0));
    let (a, keys) = decide(&d, &r, &candidates, left_out);
    assert_eq!((a.outcome, keys.len()), (Outcome::Triggered, 10), "{a:?}");
    assert!(keys.windows(2).all(|w| w[0] < w[1]), "by key");

    // Past MAX_SECRETS distinct secrets the rest are not checked, and the answer says so.
    let repos = many(MAX_SECRETS + 4, MAX_SECRETS + 4);
    let (candidates, _) = candidates_of(&d, &r, &repos);
    let g = groups(&candidates);
    assert_eq!((g.checked.len(), g.unchecked), (MAX_SECRETS, 4));
    let (a, keys) = decide(&d, &r, &candidates, 0);
    assert_eq!((a.outcome, keys.len()), (Outcome::Triggered, 1), "{a:?}");
    assert!(
        a.message
            .contains("4 GitRepos following it were not checked"),
        "{a:?}"
    );
    let late = github(
        &format!("s{}", MAX_SECRETS + 1),
        "push",
        github_push("refs/heads/main"),
    );
    let (a, _) = decide(&late, &r, &candidates, 0);
    assert_eq!(a.outcome, Outcome::Unauthorized, "never checked: {a:?}");
    assert!(a.detail.contains("not checked"), "{a:?}");
}

#[test]
fn one_namespace_following_a_repository_under_many_secrets_does_not_crowd_out_another() {
    // Review A4: a tenant follows the victim's repository from a namespace that sorts first,
    // under as many secrets as a delivery checks; the victim's GitRepo is still checked.
    let mut repos: Vec<Repo> = (0..MAX_SECRETS + 2)
        .map(|i| {
            (
                ObjectRef::new("aaa", format!("copy-{i:02}")),
                spec("https://github.com/ops/shop", "main", "hook"),
                data("github", &format!("theirs-{i}")),
            )
        })
        .collect();
    repos.push((
        ObjectRef::new("shop", "shop"),
        spec("https://github.com/ops/shop", "main", "hook"),
        data("github", "ours"),
    ));
    let d = github("ours", "push", github_push("refs/heads/main"));
    let r = read(&d).unwrap();
    let (candidates, left_out) = candidates_of(&d, &r, &repos);
    assert_eq!(left_out, 0);
    assert_eq!(
        candidates[1].key,
        ObjectRef::new("shop", "shop"),
        "round-robin by namespace"
    );
    let g = groups(&candidates);
    assert_eq!(
        (g.checked.len(), g.unchecked),
        (
            MAX_SECRETS_PER_NAMESPACE + 1,
            MAX_SECRETS + 2 - MAX_SECRETS_PER_NAMESPACE
        )
    );
    let (a, keys) = decide(&d, &r, &candidates, left_out);
    assert_eq!(a.outcome, Outcome::Triggered, "{a:?}");
    assert_eq!(keys, [ObjectRef::new("shop", "shop")]);
    assert!(a.message.contains("from one namespace"), "{a:?}");
}

#[test]
fn many_namespaces_that_sort_first_do_not_take_every_secret_slot_of_every_delivery() {
    // Review beyond A4: a tenant with 2 * MAX_SECRETS namespaces sorting before the victim's
    // filled every checked secret of round 0 on every delivery. The round-robin now starts at
    // another namespace for each delivery (its turn), so the victim is checked on the turns
    // that start within MAX_SECRETS namespaces before it, and its push is verified then.
    let tenant = 2 * MAX_SECRETS;
    let mut repos: Vec<Repo> = (0..tenant)
        .map(|i| {
            (
                ObjectRef::new(format!("aa-{i:02}"), "copy"),
                spec("https://github.com/ops/shop", "main", "hook"),
                data("github", &format!("theirs-{i}")),
            )
        })
        .collect();
    repos.push((
        ObjectRef::new("shop", "shop"),
        spec("https://github.com/ops/shop", "main", "hook"),
        data("github", "ours"),
    ));
    let index = index_of(&repos);
    let d = github("ours", "push", github_push("refs/heads/main"));
    let r = read(&d).unwrap();
    let namespaces = tenant + 1;
    let first = |turn: usize| index.candidates(&r, None, turn).0[0].0.namespace.clone();
    assert_eq!(first(0), "aa-00");
    assert_eq!(first(1), "aa-01");
    assert_eq!(first(tenant), "shop");
    assert_eq!(first(namespaces), "aa-00", "the turn wraps");

    let mut verified = Vec::new();
    for turn in 0..namespaces {
        let (candidates, left_out) = candidates_at(&d, &r, &repos, turn);
        assert_eq!((candidates.len(), left_out), (namespaces, 0));
        let (a, _) = decide(&d, &r, &candidates, 0);
        if a.outcome == Outcome::Triggered {
            verified.push(turn);
        }
    }
    // Verified when "shop" (the last in name order) is among the first MAX_SECRETS checked.
    let expected: Vec<usize> = (tenant + 1 - MAX_SECRETS..=tenant).collect();
    assert_eq!(verified, expected);
}

#[test]
fn the_index_finds_followers_by_normalised_url_and_caps_them() {
    let repos = many(MAX_CANDIDATES + 5, 1);
    let mut index = index_of(&repos);
    let d = github("s0", "push", github_push("refs/heads/main"));
    let r = read(&d).unwrap();
    let (found, left_out) = index.candidates(&r, None, 0);
    assert_eq!((found.len(), left_out), (MAX_CANDIDATES, 5));
    assert_eq!(found[0].0, ObjectRef::new("edge-00", "shop-000"), "by key");
    let one = ObjectRef::new("edge-00", "shop-060");
    let (found, _) = index.candidates(&r, Some(&one), 0);
    assert_eq!(found.len(), 1, "the path's GitRepo only");
    // A GitRepo that moves to another repository, or goes, is no longer found.
    index.set(
        &one,
        Some(&spec("https://github.com/ops/bank", "main", "hook")),
    );
    assert!(index.candidates(&r, Some(&one), 0).0.is_empty());
    index.remove(&ObjectRef::new("edge-00", "shop-000"));
    assert_eq!(index.len(), MAX_CANDIDATES + 4);
    assert_eq!(index.candidates(&r, None, 0).1, 3);
    // GitHub's canonical lower-case path finds a GitRepo typed with capitals.
    let typed = vec![(
        ObjectRef::new("edge", "shop"),
        spec("https://github.com/Ops/Shop.git", "main", "hook"),
        data("github", "s3cret"),
    )];
    let (a, keys) = run(
        &github("s3cret", "push", github_push("refs/heads/main")),
        &typed,
    );
    assert_eq!((a.outcome, keys.len()), (Outcome::Triggered, 1), "{a:?}");
    let bank = String::from_utf8(github_push("refs/heads/main"))
        .unwrap()
        .replace("ops/shop", "ops/bank");
    let (a, _) = run(&github("s3cret", "push", bank.into_bytes()), &typed);
    assert!(
        a.detail.contains("path's case kept"),
        "says what was compared: {a:?}"
    );
}

#[test]
fn a_replayed_delivery_is_known_by_its_body_or_its_id_and_the_memory_is_bounded() {
    let d = github("s3cret", "push", github_push("refs/heads/main"));
    let mut with_id = d.clone();
    with_id
        .headers
        .insert("x-github-delivery".into(), "72d3162e".into());
    let mut recent = Recent::default();
    let first = marks(
        Provider::GitHub,
        &with_id.headers,
        &with_id.body,
        "default/shop",
    );
    assert_eq!(first.len(), 2);
    assert!(recent.first(&first));
    assert!(!recent.first(&first), "the same delivery again");
    // The id is not signed: the same body under another id is still a replay.
    assert!(!recent.first(&marks(
        Provider::GitHub,
        &d.headers,
        &d.body,
        "default/shop"
    )));
    let other = github("s3cret", "push", github_push("refs/heads/dev"));
    let mut other_id = other.clone();
    other_id
        .headers
        .insert("x-github-delivery".into(), "72d3162e".into());
    assert!(!recent.first(&marks(
        Provider::GitHub,
        &other_id.headers,
        &other_id.body,
        "default/shop"
    )));
    let other_marks = marks(
        Provider::GitHub,
        &other.headers,
        &other.body,
        "default/shop",
    );
    assert!(recent.first(&other_marks));
    recent.forget(&other_marks);
    assert!(
        recent.first(&other_marks),
        "forgotten when no fetch started"
    );
    for i in 0..(RECENT + 10) {
        let mut mark = [7u8; 32];
        mark[..8].copy_from_slice(&(i as u64).to_le_bytes());
        recent.first(&[mark]);
    }
    assert_eq!(recent.len(), RECENT);
    assert!(recent.first(&first), "the oldest forgotten");
}

#[test]
fn the_same_delivery_for_another_gitrepo_is_not_a_replay() {
    // Two GitRepos following one repository, each with its own hook: the forge sends each the
    // same body.
    let d = github("s3cret", "push", github_push("refs/heads/main"));
    let mut recent = Recent::default();
    let shop = marks(Provider::GitHub, &d.headers, &d.body, "default/shop");
    let bank = marks(Provider::GitHub, &d.headers, &d.body, "finance/shop");
    assert!(recent.first(&shop));
    assert!(recent.first(&bank), "another GitRepo's first");
    assert!(
        !recent.first(&shop) && !recent.first(&bank),
        "each one's replay"
    );
}

#[test]
fn a_gitrepos_status_records_webhooks_at_most_once_a_second_and_the_same_commit_once_a_minute() {
    let t = Instant::now();
    assert!(record(None, true, t));
    assert!(!record(Some(t), false, t + Duration::from_millis(500)));
    assert!(record(Some(t), false, t + STATUS_EVERY));
    assert!(!record(Some(t), true, t + Duration::from_secs(30)));
    assert!(record(Some(t), true, t + SAME_COMMIT_EVERY));
}

#[test]
fn behind_a_trusted_proxy_the_rate_keys_on_the_right_most_untrusted_forwarded_address() {
    let trusted: Vec<Cidr> = ["10.0.0.0/8", "2001:db8:ffff::/48"]
        .iter()
        .map(|c| c.parse().unwrap())
        .collect();
    let ip = |s: &str| s.parse::<IpAddr>().unwrap();
    let ingress = ip("10.1.2.3");
    // Not from a proxy: its own address, whatever it claims.
    assert_eq!(
        client(ip("198.51.100.7"), &["192.0.2.1"], &trusted),
        ip("198.51.100.7")
    );
    assert_eq!(client(ingress, &["192.0.2.1"], &trusted), ip("192.0.2.1"));
    // A forged left-most entry is never read; a chain of trusted proxies is walked past.
    assert_eq!(
        client(ingress, &["6.6.6.6, 192.0.2.1, 10.9.9.9"], &trusted),
        ip("192.0.2.1")
    );
    assert_eq!(
        client(
            ingress,
            &["6.6.6.6", "192.0.2.1:4711", "10.9.9.9"],
            &trusted
        ),
        ip("192.0.2.1"),
        "several headers, a port"
    );
    assert_eq!(
        client(ingress, &["[2001:db8::1]:443, 2001:db8:ffff::2"], &trusted),
        ip("2001:db8::1")
    );
    // Nothing usable: the last trusted hop read, never the sender's word.
    assert_eq!(client(ingress, &[], &trusted), ingress);
    assert_eq!(
        client(ingress, &["junk, 10.9.9.9"], &trusted),
        ip("10.9.9.9")
    );
    assert_eq!(
        client(ingress, &["192.0.2.1"], &[]),
        ingress,
        "no trusted proxy"
    );
}

#[test]
fn address_blocks_parse_and_contain() {
    let c: Cidr = "10.0.0.0/8".parse().unwrap();
    assert!(c.contains("10.255.0.1".parse().unwrap()));
    assert!(c.contains(IpAddr::V6(Ipv4Addr::new(10, 0, 0, 1).to_ipv6_mapped())));
    assert!(!c.contains("11.0.0.1".parse().unwrap()));
    let one: Cidr = "192.0.2.1".parse().unwrap();
    assert_eq!(one.to_string(), "192.0.2.1/32");
    assert!(!one.contains("192.0.2.2".parse().unwrap()));
    let v6: Cidr = "2001:db8::/32".parse().unwrap();
    assert!(v6.contains("2001:db8:1::1".parse().unwrap()));
    assert!(!v6.contains("10.0.0.1".parse().unwrap()));
    let all: Cidr = "0.0.0.0/0".parse().unwrap();
    assert!(all.contains("203.0.113.1".parse().unwrap()));
    for bad in ["10.0.0.0/33", "ten/8", "2001:db8::/129", ""] {
        let e = bad.parse::<Cidr>().unwrap_err();
        assert!(e.contains(&format!("{bad:?}")), "{e}");
    }
}

#[test]
fn neither_a_gitlab_token_nor_a_secret_shows_in_debug() {
    let d = delivery(
        &[
            ("x-gitlab-event", "Push Hook"),
            ("x-gitlab-token", "gl-token-value"),
        ],
        gitlab_push(),
    );
    let shown = format!("{d:?}");
    assert!(!shown.contains("gl-token-value"), "{shown}");
    assert!(
        shown.contains("<redacted>") && shown.contains("Push Hook"),
        "{shown}"
    );
    let c = Candidate {
        key: ObjectRef::new("edge", "shop"),
        branch: "main".into(),
        revision: String::new(),
        secret: Some(Secret::new(b"s3cret".to_vec())),
    };
    let shown = format!("{c:?}");
    assert!(
        !shown.contains("s3cret") && !shown.contains("115, 51"),
        "{shown}"
    );
}

#[test]
fn a_forward_past_the_nats_max_payload_is_413_naming_it() {
    let a = too_large(MAX_BODY + 600, 1024 * 1024, Some(Provider::GitHub)).unwrap();
    assert_eq!((a.outcome, a.outcome.status()), (Outcome::TooLarge, 413));
    assert!(a.message.contains("max_payload of 1048576"), "{a:?}");
    assert!(too_large(1000, 1024 * 1024, None).is_none());
    assert!(
        too_large(MAX_BODY * 4, 0, None).is_none(),
        "unknown: not checked"
    );
}
