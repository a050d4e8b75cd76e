//! The index of followers and the secrets a delivery is checked with, across namespaces.
use super::*;

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
