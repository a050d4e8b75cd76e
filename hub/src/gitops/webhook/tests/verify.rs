//! Signatures and tokens, payload parsing, URL and branch matching, redaction.
use super::*;

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
