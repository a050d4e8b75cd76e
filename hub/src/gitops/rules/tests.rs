use super::*;
use flotilla_api::v1::{
    GitRepoSpec, GitTarget, ManifestWorkReplicaSetStatus, ManifestWorkSpec, ObjectMeta,
};

fn repo(generation: i64) -> GitRepo {
    GitRepo {
        metadata: Some(ObjectMeta {
            name: "shop".into(),
            namespace: "edge-apps".into(),
            generation,
            ..Default::default()
        }),
        spec: Some(GitRepoSpec {
            repo: "git://git.example.com/shop.git".into(),
            insecure_transport: true,
            branch: "main".into(),
            targets: vec![GitTarget {
                name: "stores".into(),
                placement_ref: "stores".into(),
                placement: None,
                rollout_strategy: None,
            }],
            ..Default::default()
        }),
        status: None,
    }
}

fn bundle(name: &str, content: &str) -> Rendered {
    Rendered {
        name: name.into(),
        path: format!("apps/{name}"),
        labels: Default::default(),
        spec: ManifestWorkSpec::default(),
        content: content.into(),
        variants: Vec::new(),
    }
}

fn commit(sha: &str) -> CommitInfo {
    CommitInfo {
        sha: sha.into(),
        subject: "a change".into(),
        ..Default::default()
    }
}

#[test]
fn a_new_spec_or_a_forced_sync_is_due_at_once_and_a_fetch_in_flight_never_twice() {
    let now = Instant::now();
    let r = repo(2);
    let fetched = Tracked {
        generation: 2,
        next: Some(now + Duration::from_secs(15)),
        ..Default::default()
    };
    assert!(
        !due(&r, &fetched, now),
        "fetched for this generation, next poll later"
    );
    assert!(
        due(&r, &fetched, now + Duration::from_secs(15)),
        "the poll is due"
    );
    assert!(
        due(&repo(3), &fetched, now),
        "a new generation fetches at once"
    );
    let mut forced = repo(2);
    forced.spec.as_mut().unwrap().force_sync_generation = 1;
    assert!(
        due(&forced, &fetched, now),
        "a raised forceSyncGeneration fetches at once"
    );
    let running = Tracked {
        in_flight: true,
        ..fetched
    };
    assert!(
        !due(&repo(3), &running, now),
        "never two fetches of one GitRepo"
    );
}

#[test]
fn a_cleared_refusal_renders_again_once_whatever_the_forced_generation() {
    let now = Instant::now();
    let mut r = repo(2);
    r.spec.as_mut().unwrap().force_sync_generation = 7;
    let fetched = Tracked {
        generation: 2,
        forced: 7,
        next: Some(now + Duration::from_secs(15)),
        ..Default::default()
    };
    assert!(!due(&r, &fetched, now));
    let again = Tracked {
        render_again: true,
        ..fetched.clone()
    };
    assert!(spec_moved(&r, &again) && due(&r, &again, now));
    let running = Tracked {
        in_flight: true,
        ..again
    };
    assert!(!due(&r, &running, now), "not while a fetch runs");
}

#[test]
fn the_refresh_looks_at_placements_only_with_inline_targets_or_owned_ones_left() {
    let by_ref = repo(1);
    assert!(places(&by_ref, None), "not looked yet: once after a start");
    let none = Tracked {
        owned_placements: Some(0),
        ..Default::default()
    };
    assert!(!places(&by_ref, Some(&none)));
    let left = Tracked {
        owned_placements: Some(1),
        ..Default::default()
    };
    assert!(
        places(&by_ref, Some(&left)),
        "a removed target's, still to go"
    );
    let mut inline = repo(1);
    inline.spec.as_mut().unwrap().targets[0].placement = Some(Default::default());
    assert!(places(&inline, Some(&none)));
}

#[test]
fn failures_back_off_doubling_to_the_longest_and_success_polls_at_the_interval() {
    let (min, max) = (Duration::from_secs(15), Duration::from_secs(600));
    let waits: Vec<u64> = (1..=8).map(|f| retry_wait(f, min, max).as_secs()).collect();
    assert_eq!(waits, [15, 30, 60, 120, 240, 480, 600, 600]);
    let now = Instant::now();
    let every = Some(Duration::from_secs(60));
    assert_eq!(
        next_after(true, 0, every, now, (min, max)),
        Some(now + Duration::from_secs(60))
    );
    assert_eq!(
        next_after(true, 0, None, now, (min, max)),
        None,
        "polling off"
    );
    assert_eq!(
        next_after(false, 2, None, now, (min, max)),
        Some(now + Duration::from_secs(30)),
        "a failure is retried even with polling off"
    );
}

#[test]
fn a_listing_may_stop_at_the_last_fetched_commit_only_for_the_spec_that_fetched_it() {
    let mut r = repo(2);
    assert_eq!(known_commit(&r), None, "nothing fetched yet");
    r.status = Some(GitRepoStatus {
        observed_generation: 2,
        head: Some(GitCommit {
            sha: "a".repeat(40),
            ..Default::default()
        }),
        ..Default::default()
    });
    assert_eq!(known_commit(&r), Some("a".repeat(40)));
    r.metadata.as_mut().unwrap().generation = 3;
    assert_eq!(known_commit(&r), None, "a new spec renders again");
}

fn stored(rs: ManifestWorkReplicaSet) -> ManifestWorkReplicaSet {
    rs
}

#[test]
fn only_changed_bundles_are_written_an_unchanged_one_keeps_its_commit_and_gone_ones_go() {
    let r = repo(1);
    let c1 = "1".repeat(40);
    let c2 = "2".repeat(40);
    let first = writes(&r, &[bundle("web", "w1"), bundle("db", "d1")], &c1, &[]).unwrap();
    assert_eq!(first.apply.len(), 2);
    assert!(first.delete.is_empty());
    let existing: Vec<ManifestWorkReplicaSet> = first.apply.into_iter().map(stored).collect();
    let refs: Vec<&ManifestWorkReplicaSet> = existing.iter().collect();

    // Commit 2 changes web and removes db.
    let second = writes(&r, &[bundle("web", "w2")], &c2, &refs).unwrap();
    assert_eq!(second.apply.len(), 1);
    let web = &second.apply[0];
    assert_eq!(annotation(web, COMMIT_ANNOTATION), Some(c2.as_str()));
    assert_eq!(second.delete, ["db"]);

    // Commit 2 leaving both alone writes nothing: their works are not touched.
    let same = writes(&r, &[bundle("web", "w1"), bundle("db", "d1")], &c2, &refs).unwrap();
    assert_eq!(same, Writes::default());
}

#[test]
fn a_bundle_named_like_a_replica_set_of_someone_else_is_refused_not_overwritten() {
    let r = repo(1);
    let mut theirs = source::replica_set(&r, &bundle("web", "x"), &"1".repeat(40));
    theirs.metadata.as_mut().unwrap().labels.clear();
    let problems = writes(&r, &[bundle("web", "w1")], &"2".repeat(40), &[&theirs]).unwrap_err();
    assert!(
        problems[0]
            .starts_with("bundle web: ManifestWorkReplicaSet web exists and does not belong"),
        "{problems:?}"
    );
}

#[test]
fn a_bad_commit_says_what_and_where_and_the_last_good_commit_stays() {
    let good = commit(&"a".repeat(40));
    let s = after_fetch(
        &GitRepoStatus::default(),
        1,
        &Outcome::Rendered {
            commit: good.clone(),
            bundles: vec![bundle("web", "w")],
        },
        true,
        None,
    );
    assert_eq!(s.commit, good.sha);
    assert_eq!(
        meta::condition_status(&s.conditions, RENDERED),
        Some("True")
    );

    let bad = after_fetch(
        &s,
        1,
        &Outcome::Invalid {
            commit: commit(&"b".repeat(40)),
            problems: vec!["apps/web/cm.yaml: document 1: kind is required".into()],
        },
        false,
        None,
    );
    assert_eq!(
        bad.commit, good.sha,
        "the replica sets keep the last good commit"
    );
    assert_eq!(bad.head.as_ref().unwrap().sha, "b".repeat(40));
    let c = meta::find_condition(&bad.conditions, RENDERED).unwrap();
    assert_eq!(c.status, "False");
    assert_eq!(
        c.message,
        "commit bbbbbbb: apps/web/cm.yaml: document 1: kind is required; the replica sets keep \
         commit aaaaaaa"
    );

    let failed = after_fetch(
        &bad,
        1,
        &Outcome::Failed {
            message: "connection refused".into(),
        },
        false,
        Some("2026-11-30T17:00:00Z".into()),
    );
    assert_eq!(failed.failures, 1);
    let c = meta::find_condition(&failed.conditions, FETCHED).unwrap();
    assert_eq!(
        c.message,
        "connection refused; the replica sets keep commit aaaaaaa; retrying at 2026-11-30T17:00:00Z"
    );
}

#[test]
fn ready_when_every_bundle_s_works_are_available() {
    let r = repo(1);
    let mut web = source::replica_set(&r, &bundle("web", "w"), &"a".repeat(40));
    let mut status = GitRepoStatus::default();
    web.status = Some(ManifestWorkReplicaSetStatus {
        summary: Some(ReplicaSetSummary {
            total: 3,
            available: 2,
            ..Default::default()
        }),
        ..Default::default()
    });
    assert!(refresh_bundles(&mut status, &[&web]));
    assert_eq!(status.ready_bundles, "0/1");
    let c = meta::find_condition(&status.conditions, READY).unwrap();
    assert_eq!(c.message, "bundle web: 2/3 works available");
    assert!(!refresh_bundles(&mut status, &[&web]), "nothing changed");
    web.status
        .as_mut()
        .unwrap()
        .summary
        .as_mut()
        .unwrap()
        .available = 3;
    assert!(refresh_bundles(&mut status, &[&web]));
    assert_eq!(status.ready_bundles, "1/1");
    assert_eq!(
        meta::condition_status(&status.conditions, READY),
        Some("True")
    );
    assert_eq!(status.bundles[0].path, "apps/web");
    assert_eq!(status.bundles[0].content_commit, "a".repeat(40));
}

/// `s` after commit `sha` rendered and was delivered.
fn delivered(s: &GitRepoStatus, sha: &str) -> GitRepoStatus {
    let outcome = Outcome::Rendered {
        commit: commit(sha),
        bundles: vec![bundle("web", sha)],
    };
    after_fetch(s, 1, &outcome, true, None)
}

#[test]
fn undo_pins_the_commit_delivered_before_a_second_goes_further_and_resume_unpins() {
    let key = crate::keys::ObjectRef::new("edge-apps", "shop");
    let (a, b, c) = ("a".repeat(40), "b".repeat(40), "c".repeat(40));
    let mut s = GitRepoStatus::default();
    let e = rollout(&mut s, Rollout::Undo, &key).unwrap_err();
    assert_eq!(
        e,
        "GitRepo edge-apps/shop: nothing was delivered yet: nothing to go back to"
    );
    s = delivered(&delivered(&delivered(&s, &a), &b), &c);
    assert_eq!(s.previous_commits, [b.clone(), a.clone()]);

    // Undo: b is pinned and fetched at once; delivered, it leaves only a behind it.
    let effect = rollout(&mut s, Rollout::Undo, &key).unwrap();
    assert_eq!(
        effect,
        RolloutEffect {
            pause_sets: None,
            fetch: true
        }
    );
    assert_eq!(s.pinned_commit, b);
    let pin = meta::find_condition(&s.conditions, PINNED).unwrap();
    assert_eq!(
        pin.message,
        "undone to bbbbbbb: new commits are fetched but not rolled out until `flotilla rollout \
         resume gitrepo shop -n edge-apps`"
    );
    // A second undo before b was delivered goes past b, not to it again.
    let mut early = s.clone();
    rollout(&mut early, Rollout::Undo, &key).unwrap();
    assert_eq!(early.pinned_commit, a);
    s = delivered(&s, &b);
    assert_eq!(
        (s.commit.as_str(), s.previous_commits.clone()),
        (b.as_str(), vec![a.clone()])
    );
    rollout(&mut s, Rollout::Undo, &key).unwrap();
    assert_eq!(s.pinned_commit, a, "a second undo goes one further back");
    s = delivered(&s, &a);
    assert!(s.previous_commits.is_empty());
    let e = rollout(&mut s, Rollout::Undo, &key).unwrap_err();
    assert_eq!(
        e,
        "GitRepo edge-apps/shop: no commit was delivered before aaaaaaa: nothing to go back to"
    );

    // Resume unpins (fetching at once) and resumes the replica sets; the head goes on top.
    let effect = rollout(&mut s, Rollout::Resume, &key).unwrap();
    assert_eq!(
        effect,
        RolloutEffect {
            pause_sets: Some(false),
            fetch: true
        }
    );
    assert!(s.pinned_commit.is_empty());
    assert_eq!(meta::find_condition(&s.conditions, PINNED), None);
    s = delivered(&s, &c);
    assert_eq!(s.previous_commits, [a]);
}

#[test]
fn pause_holds_every_bundle_and_resume_without_a_pin_fetches_nothing() {
    let key = crate::keys::ObjectRef::new("edge-apps", "shop");
    let mut s = GitRepoStatus::default();
    let effect = rollout(&mut s, Rollout::Pause, &key).unwrap();
    assert_eq!(effect.pause_sets, Some(true));
    assert!(s.rollout_paused && !effect.fetch);
    let effect = rollout(&mut s, Rollout::Resume, &key).unwrap();
    assert_eq!(
        effect,
        RolloutEffect {
            pause_sets: Some(false),
            fetch: false
        }
    );
    assert!(!s.rollout_paused);
    assert_eq!(
        "rewind".parse::<Rollout>().unwrap_err(),
        "action: \"rewind\" is not one of pause, resume, undo"
    );
}

#[test]
fn delivered_commits_are_kept_newest_first_and_bounded() {
    let mut s = GitRepoStatus::default();
    for i in 0..15 {
        s = delivered(&s, &format!("{i:040}"));
    }
    assert_eq!(s.previous_commits.len(), PREVIOUS_KEPT);
    assert_eq!(s.previous_commits[0], format!("{:040}", 13));
    let again = delivered(&s, &format!("{:040}", 14));
    assert_eq!(
        again.previous_commits, s.previous_commits,
        "the same commit moves nothing"
    );
}

#[test]
fn the_bundles_states_are_summed_and_the_worst_is_shown() {
    use crate::replicaset::rules::state::{State, count};
    let r = repo(1);
    let mut web = source::replica_set(&r, &bundle("web", "w"), &"a".repeat(40));
    let mut db = source::replica_set(&r, &bundle("db", "d"), &"a".repeat(40));
    web.status = Some(ManifestWorkReplicaSetStatus {
        states: Some(count([State::Ready, State::ErrApplied])),
        ..Default::default()
    });
    db.status = Some(ManifestWorkReplicaSetStatus {
        states: Some(count([State::Ready, State::OutOfSync])),
        ..Default::default()
    });
    let mut status = GitRepoStatus::default();
    assert!(refresh_bundles(&mut status, &[&web, &db]));
    let s = status.states.unwrap();
    assert_eq!((s.ready, s.err_applied, s.out_of_sync), (2, 1, 1));
    assert_eq!(status.display_state, "ErrApplied");
    let web_states = status.bundles.iter().find(|b| b.name == "web").unwrap();
    assert_eq!(web_states.states.unwrap().err_applied, 1);
    assert!(
        !refresh_bundles(&mut status, &[&web, &db]),
        "nothing changed"
    );
}
