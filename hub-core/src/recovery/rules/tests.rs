use super::*;
use proptest::prelude::*;

fn agent(ids: &[(&str, i64)]) -> HashMap<String, i64> {
    ids.iter().map(|(id, g)| (id.to_string(), *g)).collect()
}

fn known(ids: &[(&str, OrphanDecision)]) -> Known {
    ids.iter()
        .map(|(id, d)| (id.to_string(), (OrphanKind::Work, *d)))
        .collect()
}

fn store(ids: &[(&str, i64)]) -> BTreeMap<String, i64> {
    ids.iter().map(|(id, g)| (id.to_string(), *g)).collect()
}

fn work(id: &str, held: i64) -> Stranger {
    Stranger {
        id: id.into(),
        kind: OrphanKind::Work,
        agent_generation: held,
        store_generation: 0,
    }
}

/// A resource id (UUID-shaped, as every one is) numbered `n`.
fn rid(n: usize) -> String {
    format!("00000000-0000-5000-8000-{n:012}")
}

fn ids(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

fn orphan(id: &str, name: &str, generation: i64, decision: OrphanDecision) -> Orphan {
    let mut o = Orphan {
        cluster: "c1".into(),
        resource_id: id.into(),
        name: name.into(),
        agent_generation: generation,
        ..Default::default()
    };
    o.set_decision(decision);
    o
}

#[test]
fn in_the_window_strangers_become_orphans_and_nothing_is_deleted() {
    let (r1, r2) = (rid(1), rid(2));
    let a = answer(
        true,
        vec![r1.clone(), r2.clone()],
        &agent(&[(&r1, 3), (&r2, 1), ("w", 1)]),
        &store(&[("w", 1)]),
        &BTreeSet::new(),
        &BTreeSet::new(),
        &Known::new(),
    );
    assert_eq!(a.delete, Vec::<String>::new());
    assert_eq!(a.record, vec![work(&r1, 3), work(&r2, 1)]);
    assert!(a.settle.is_empty());
}

#[test]
fn an_id_that_is_no_resource_id_is_withheld_but_never_recorded_and_names_are_work_names() {
    let long = "a".repeat(4096);
    let a = answer(
        true,
        vec![
            rid(1),
            long.clone(),
            "6B0C0000-0000-5000-8000-00000000000A".into(),
        ],
        &agent(&[(&rid(1), 1), (&long, 1)]),
        &store(&[]),
        &BTreeSet::new(),
        &BTreeSet::new(),
        &Known::new(),
    );
    assert!(a.delete.is_empty(), "withheld in the window");
    assert_eq!(a.record, vec![work(&rid(1), 1)]);
    assert!(!a.overflow);
    for ok in ["web", "app-v2", "a.b-c", "0x"] {
        assert!(orphan_name_ok(ok), "{ok}");
    }
    for bad in [
        "",
        "Web",
        "-a",
        "a-",
        "x\r\u{1b}[2K",
        "a".repeat(254).as_str(),
        "a b",
    ] {
        assert!(!orphan_name_ok(bad), "{bad:?}");
    }
    assert!(orphan_name_ok(&"a".repeat(253)));
}

#[test]
fn decided_orphans_are_deleted_or_kept_window_or_not() {
    let k = known(&[
        ("del", OrphanDecision::Delete),
        ("keep", OrphanDecision::Keep),
        ("und", OrphanDecision::Undecided),
    ]);
    let held = agent(&[("del", 1), ("keep", 1), ("und", 1)]);
    for open in [true, false] {
        let a = answer(
            open,
            ids(&["del", "keep", "und"]),
            &held,
            &store(&[]),
            &BTreeSet::new(),
            &BTreeSet::new(),
            &k,
        );
        assert_eq!(a.delete, ids(&["del"]), "open: {open}");
        assert!(a.record.is_empty());
        assert!(a.settle.is_empty());
    }
}

#[test]
fn a_closed_window_deletes_strangers_it_has_no_record_of() {
    let a = answer(
        false,
        ids(&["new", "keep"]),
        &agent(&[("new", 1), ("keep", 1)]),
        &store(&[]),
        &BTreeSet::new(),
        &BTreeSet::new(),
        &known(&[("keep", OrphanDecision::Keep)]),
    );
    assert_eq!(a.delete, ids(&["new"]));
}

#[test]
fn records_the_agent_no_longer_holds_or_the_store_has_again_are_settled() {
    // "gone": the agent deleted it; "back": re-applied, so no longer a stranger.
    let a = answer(
        true,
        ids(&["still"]),
        &agent(&[("still", 1), ("back", 2)]),
        &store(&[("back", 2)]),
        &BTreeSet::new(),
        &BTreeSet::new(),
        &known(&[
            ("gone", OrphanDecision::Delete),
            ("back", OrphanDecision::Undecided),
            ("still", OrphanDecision::Keep),
        ]),
    );
    assert_eq!(a.settle, ids(&["back", "gone"]));
    assert!(a.delete.is_empty());
}

#[test]
fn a_spoke_cannot_make_the_hub_record_without_bound() {
    let strangers: Vec<String> = (0..MAX_ORPHANS_PER_CLUSTER + 50).map(rid).collect();
    let held: HashMap<String, i64> = strangers.iter().map(|s| (s.clone(), 1)).collect();
    let k = known(&[(&rid(0), OrphanDecision::Undecided)]);
    let a = answer(
        true,
        strangers,
        &held,
        &store(&[]),
        &BTreeSet::new(),
        &BTreeSet::new(),
        &k,
    );
    assert_eq!(a.record.len(), MAX_ORPHANS_PER_CLUSTER - 1);
    assert!(
        a.delete.is_empty(),
        "past the bound, strangers are withheld still"
    );
    assert!(
        a.overflow,
        "and the resync is not the cluster's whole one since the recovery"
    );
    let fits = answer(
        true,
        vec![rid(1)],
        &agent(&[(&rid(1), 1)]),
        &store(&[]),
        &BTreeSet::new(),
        &BTreeSet::new(),
        &k,
    );
    assert!(!fits.overflow);
}

#[test]
fn the_digest_covers_kept_orphans_and_asks_for_the_map_while_any_is_open() {
    let mut k = BTreeMap::new();
    k.insert("a".into(), orphan("a", "w-a", 2, OrphanDecision::Keep));
    assert_eq!(digest(&k), Digest::With(vec![("a".into(), 2)]));
    k.insert("b".into(), orphan("b", "", 1, OrphanDecision::Undecided));
    assert_eq!(digest(&k), Digest::Full);
    k.insert("b".into(), orphan("b", "", 1, OrphanDecision::Delete));
    assert_eq!(digest(&k), Digest::Full);
    assert_eq!(digest(&BTreeMap::new()), Digest::With(vec![]));
}

#[test]
fn orphans_are_chosen_by_name_or_resource_id_and_unknown_names_are_said() {
    let mut k = BTreeMap::new();
    k.insert(
        "id-a".into(),
        orphan("id-a", "w-a", 1, OrphanDecision::Undecided),
    );
    k.insert(
        "id-b".into(),
        orphan("id-b", "", 1, OrphanDecision::Undecided),
    );
    let (chosen, missing) = choose(&k, &ids(&["w-a", "id-b", "w-a", "nope"]), false);
    let chosen: Vec<&str> = chosen.iter().map(|o| o.resource_id.as_str()).collect();
    assert_eq!(chosen, ["id-a", "id-b"]);
    assert_eq!(missing, ids(&["nope"]));
    assert_eq!(choose(&k, &[], true).0.len(), 2);
}

fn ahead(id: &str, held: i64, stored: i64) -> Stranger {
    Stranger {
        id: id.into(),
        kind: OrphanKind::Ahead,
        agent_generation: held,
        store_generation: stored,
    }
}

#[test]
fn in_the_window_a_work_the_spoke_holds_newer_is_recorded_ahead_and_nothing_is_resent() {
    let held = agent(&[("up", 3), ("same", 2), ("behind", 1)]);
    let stored = store(&[("up", 1), ("same", 2), ("behind", 2)]);
    let a = answer(
        true,
        Vec::new(),
        &held,
        &stored,
        &BTreeSet::new(),
        &BTreeSet::new(),
        &Known::new(),
    );
    assert_eq!(
        a.record,
        vec![ahead("up", 3, 1), behind("behind", 1, 2)],
        "held older is recorded too (a newer incarnation, maybe)"
    );
    assert_eq!(a.hold, ids(&["behind"]));
    assert!(a.delete.is_empty() && a.revert.is_empty() && a.settle.is_empty());
    // Outside the window the hub does as before: nothing.
    let closed = answer(
        false,
        Vec::new(),
        &held,
        &stored,
        &BTreeSet::new(),
        &BTreeSet::new(),
        &Known::new(),
    );
    assert_eq!(closed, Answer::default());
}

#[test]
fn an_ahead_orphan_is_reverted_only_when_decided_and_settles_once_the_store_catches_up() {
    let held = agent(&[("up", 3)]);
    let stored = store(&[("up", 1)]);
    let mut k = Known::new();
    for d in [OrphanDecision::Undecided, OrphanDecision::Keep] {
        k.insert("up".into(), (OrphanKind::Ahead, d));
        let a = answer(
            true,
            Vec::new(),
            &held,
            &stored,
            &BTreeSet::new(),
            &BTreeSet::new(),
            &k,
        );
        assert_eq!(a, Answer::default(), "{d:?}");
    }
    k.insert("up".into(), (OrphanKind::Ahead, OrphanDecision::Revert));
    let a = answer(
        false,
        Vec::new(),
        &held,
        &stored,
        &BTreeSet::new(),
        &BTreeSet::new(),
        &k,
    );
    assert_eq!(a.revert, vec![("up".to_string(), 3)]);
    // Reverted to generation 4: the spoke holds 3, below the store — settled (and re-sent by
    // the resync diff, not here).
    let a = answer(
        true,
        Vec::new(),
        &held,
        &store(&[("up", 4)]),
        &BTreeSet::new(),
        &BTreeSet::new(),
        &k,
    );
    assert_eq!(a.settle, ids(&["up"]));
    assert!(a.revert.is_empty() && a.record.is_empty());
    // The store deleted it meanwhile: the record settles, and the id is a stranger again at
    // the next resync (neither deleted nor recorded in this one).
    let a = answer(
        true,
        ids(&["up"]),
        &held,
        &store(&[]),
        &BTreeSet::new(),
        &BTreeSet::new(),
        &k,
    );
    assert_eq!(a.settle, ids(&["up"]));
    assert!(a.delete.is_empty() && a.record.is_empty());
}

#[test]
fn decisions_fit_their_kind_and_finishing_lets_the_store_win() {
    assert!(allowed(OrphanKind::Work, OrphanDecision::Revert).is_err());
    assert!(allowed(OrphanKind::Ahead, OrphanDecision::Delete).is_err());
    for d in [OrphanDecision::Undecided, OrphanDecision::Keep] {
        assert!(allowed(OrphanKind::Work, d).is_ok() && allowed(OrphanKind::Ahead, d).is_ok());
    }
    assert!(allowed(OrphanKind::Work, OrphanDecision::Delete).is_ok());
    assert!(allowed(OrphanKind::Ahead, OrphanDecision::Revert).is_ok());
    assert_eq!(
        on_finish(OrphanKind::Ahead, OrphanDecision::Delete),
        OrphanDecision::Revert
    );
    assert_eq!(
        on_finish(OrphanKind::Work, OrphanDecision::Delete),
        OrphanDecision::Delete
    );
    assert_eq!(
        on_finish(OrphanKind::Ahead, OrphanDecision::Keep),
        OrphanDecision::Keep
    );
}

#[test]
fn a_changed_spec_goes_above_what_a_spoke_holds_ahead() {
    assert_eq!(next_generation(2, None), 2);
    assert_eq!(next_generation(2, Some(5)), 6);
    assert_eq!(next_generation(7, Some(5)), 7);
    assert_eq!(
        next_generation(1, Some(i64::MAX)),
        i64::MAX,
        "a hostile generation does not overflow"
    );
}

#[test]
fn the_digest_takes_a_kept_ahead_work_at_the_spokes_generation_until_the_store_passes_it() {
    let kept = vec![("up".to_string(), 3), ("gone".to_string(), 1)];
    let v = digest_versions([("up", 1), ("w", 2)], &kept);
    assert_eq!(
        v.into_iter().collect::<Vec<_>>(),
        [("gone", 1), ("up", 3), ("w", 2)]
    );
    let v = digest_versions([("up", 4)], &kept);
    assert_eq!(v.get("up"), Some(&4));
}

proptest! {
    /// Without a window and without records, the hub deletes exactly what it did before.
    #[test]
    fn closed_and_unrecorded_is_the_old_behaviour(
        held in proptest::collection::hash_map("[a-z]{1,4}", 1i64..5, 0..20),
        unknown in proptest::collection::btree_set("[a-z]{1,4}", 0..20),
    ) {
        let deletes: Vec<String> = unknown.iter().filter(|id| held.contains_key(*id)).cloned().collect();
        // The store holds the other ids, some older than the agent's: ignored as before.
        let stored: BTreeMap<String, i64> = held
            .iter()
            .filter(|(id, _)| !unknown.contains(*id))
            .map(|(id, g)| (id.clone(), g - 1))
            .collect();
        let a = answer(false, deletes.clone(), &held, &stored, &BTreeSet::new(), &BTreeSet::new(), &Known::new());
        prop_assert_eq!(a.delete, deletes);
        prop_assert!(a.record.is_empty() && a.settle.is_empty() && a.revert.is_empty());
    }

    /// In the window, nothing undecided is ever deleted.
    #[test]
    fn the_window_deletes_only_what_was_decided(
        held in proptest::collection::hash_map("[a-z]{1,4}", 1i64..5, 0..20),
        decided in proptest::collection::btree_map("[a-z]{1,4}", 0u8..3, 0..20),
    ) {
        let known: Known = decided
            .iter()
            .map(|(id, d)| (id.clone(), (OrphanKind::Work, match d { 0 => OrphanDecision::Undecided, 1 => OrphanDecision::Delete, _ => OrphanDecision::Keep })))
            .collect();
        let mut deletes: Vec<String> = held.keys().cloned().collect();
        deletes.sort();
        let a = answer(true, deletes, &held, &store(&[]), &BTreeSet::new(), &BTreeSet::new(), &known);
        for id in &a.delete {
            prop_assert_eq!(known.get(id), Some(&(OrphanKind::Work, OrphanDecision::Delete)));
        }
    }
}

fn behind(id: &str, held: i64, stored: i64) -> Stranger {
    Stranger {
        id: id.into(),
        kind: OrphanKind::Behind,
        agent_generation: held,
        store_generation: stored,
    }
}

#[test]
fn in_the_window_a_work_the_spoke_holds_older_or_the_store_deletes_is_held_back_and_recorded() {
    // "web" deleted and created again after the backup: the spoke holds the new incarnation at
    // generation 1, the restored store the old one at 4; "gone" is being deleted in the store.
    let held = agent(&[("web", 1), ("gone", 2), ("same", 2)]);
    let stored = store(&[("web", 4), ("gone", 2), ("same", 2)]);
    let deleting: BTreeSet<String> = ["gone".to_string()].into();
    let a = answer(
        true,
        Vec::new(),
        &held,
        &stored,
        &deleting,
        &BTreeSet::new(),
        &Known::new(),
    );
    assert_eq!(a.record, vec![behind("gone", 2, 2), behind("web", 1, 4)]);
    assert_eq!(a.hold, ids(&["gone", "web"]));
    // Outside the window the store's spec and deletion go as always.
    let closed = answer(
        false,
        Vec::new(),
        &held,
        &stored,
        &deleting,
        &BTreeSet::new(),
        &Known::new(),
    );
    assert_eq!(closed, Answer::default());
    // Undecided or kept: held back, window or not; reverted: sent (by the resync diff).
    let mut k = Known::new();
    for d in [OrphanDecision::Undecided, OrphanDecision::Keep] {
        k.insert("web".into(), (OrphanKind::Behind, d));
        let a = answer(
            false,
            Vec::new(),
            &held,
            &stored,
            &BTreeSet::new(),
            &BTreeSet::new(),
            &k,
        );
        assert_eq!(a.hold, ids(&["web"]), "{d:?}");
        assert!(a.record.is_empty() && a.settle.is_empty());
    }
    k.insert("web".into(), (OrphanKind::Behind, OrphanDecision::Revert));
    let a = answer(
        false,
        Vec::new(),
        &held,
        &stored,
        &BTreeSet::new(),
        &BTreeSet::new(),
        &k,
    );
    assert!(a.hold.is_empty());
    // Once the spoke holds the store's generation, the record settles.
    let a = answer(
        false,
        Vec::new(),
        &agent(&[("web", 4)]),
        &stored,
        &BTreeSet::new(),
        &BTreeSet::new(),
        &k,
    );
    assert_eq!(a.settle, ids(&["web"]));
    // A Behind orphan is reverted or kept, never deleted as a stranger; finishing reverts it.
    assert!(allowed(OrphanKind::Behind, OrphanDecision::Delete).is_err());
    assert_eq!(
        on_finish(OrphanKind::Behind, OrphanDecision::Delete),
        OrphanDecision::Revert
    );
}

#[test]
fn a_behind_record_settles_when_the_store_changes_the_work_and_keeps_the_map_full() {
    let mut o = orphan("web", "web", 1, OrphanDecision::Keep);
    o.set_kind(OrphanKind::Behind);
    o.store_generation = 4;
    let records: BTreeMap<String, Orphan> = [("web".to_string(), o)].into();
    assert!(changed_since(&records, &store(&[("web", 4)])).is_empty());
    assert_eq!(
        changed_since(&records, &store(&[("web", 5)])),
        ids(&["web"])
    );
    assert_eq!(digest(&records), Digest::Full);
}

#[test]
fn a_re_send_leaves_alone_what_a_behind_or_ahead_record_holds_unless_reverted() {
    let k: Known = [
        ("kept", OrphanKind::Behind, OrphanDecision::Keep),
        ("behind", OrphanKind::Behind, OrphanDecision::Undecided),
        ("reverted", OrphanKind::Behind, OrphanDecision::Revert),
        ("ahead", OrphanKind::Ahead, OrphanDecision::Undecided),
        ("ahead-reverted", OrphanKind::Ahead, OrphanDecision::Revert),
        ("stranger", OrphanKind::Work, OrphanDecision::Undecided),
    ]
    .into_iter()
    .map(|(id, kind, decision)| (id.to_string(), (kind, decision)))
    .collect();
    let held: Vec<String> = held_from_resend(&k).into_iter().collect();
    assert_eq!(held, ["ahead", "ahead-reverted", "behind", "kept"]);
    assert!(held_from_resend(&Known::new()).is_empty());
}

fn uids(ids: &[(&str, &str)]) -> HashMap<String, String> {
    ids.iter()
        .map(|(id, u)| (id.to_string(), u.to_string()))
        .collect()
}

#[test]
fn another_incarnation_is_told_by_its_uid_where_both_sides_know_one() {
    let held = uids(&[("web", "B"), ("same", "A"), ("old", ""), ("gone", "C")]);
    let store = [("web", "A"), ("same", "A"), ("old", "A"), ("blank", "")];
    let other: Vec<String> = other_incarnations(&held, store).into_iter().collect();
    assert_eq!(other, ["web"]);
    // An agent before uids sends none: generations only.
    assert!(other_incarnations(&HashMap::new(), store).is_empty());
}

#[test]
fn in_the_window_another_incarnation_at_the_stores_generation_is_recorded_and_held() {
    // "web" deleted and created again after the backup at the generation the store holds:
    // equal generations, other uids. "up" is another incarnation ahead of the store's, "down"
    // one behind it: the uid decides, not the generations.
    let held = agent(&[("web", 1), ("up", 5), ("down", 1)]);
    let stored = store(&[("web", 1), ("up", 2), ("down", 3)]);
    let other: BTreeSet<String> = ["web", "up", "down"].map(String::from).into();
    let a = answer(
        true,
        Vec::new(),
        &held,
        &stored,
        &BTreeSet::new(),
        &other,
        &Known::new(),
    );
    let incarnation = |id: &str, held: i64, stored: i64| Stranger {
        id: id.into(),
        kind: OrphanKind::Incarnation,
        agent_generation: held,
        store_generation: stored,
    };
    assert_eq!(
        a.record,
        vec![
            incarnation("down", 1, 3),
            incarnation("up", 5, 2),
            incarnation("web", 1, 1)
        ]
    );
    assert_eq!(a.hold, ids(&["down", "up", "web"]));
    assert!(a.delete.is_empty() && a.revert.is_empty());
    // Without uids the same generations read as in sync (web), ahead (up) and behind (down).
    let blind = answer(
        true,
        Vec::new(),
        &held,
        &stored,
        &BTreeSet::new(),
        &BTreeSet::new(),
        &Known::new(),
    );
    assert_eq!(
        blind
            .record
            .iter()
            .map(|s| (s.id.as_str(), s.kind))
            .collect::<Vec<_>>(),
        [("up", OrphanKind::Ahead), ("down", OrphanKind::Behind)]
    );
}

#[test]
fn another_incarnation_is_kept_or_reverted_when_decided_and_replaced_without_a_window() {
    let held = agent(&[("web", 1)]);
    let stored = store(&[("web", 1)]);
    let other: BTreeSet<String> = ["web".to_string()].into();
    let mut k = Known::new();
    for d in [OrphanDecision::Undecided, OrphanDecision::Keep] {
        k.insert("web".into(), (OrphanKind::Incarnation, d));
        for open in [true, false] {
            let a = answer(
                open,
                Vec::new(),
                &held,
                &stored,
                &BTreeSet::new(),
                &other,
                &k,
            );
            assert_eq!(a.hold, ids(&["web"]), "{d:?}");
            assert!(a.record.is_empty() && a.revert.is_empty() && a.settle.is_empty());
        }
    }
    k.insert(
        "web".into(),
        (OrphanKind::Incarnation, OrphanDecision::Revert),
    );
    let a = answer(
        true,
        Vec::new(),
        &held,
        &stored,
        &BTreeSet::new(),
        &other,
        &k,
    );
    assert_eq!(a.revert, vec![("web".to_string(), 1)]);
    assert!(a.hold.is_empty());
    // Once the spoke holds the store's incarnation the record settles.
    let a = answer(
        true,
        Vec::new(),
        &agent(&[("web", 2)]),
        &store(&[("web", 2)]),
        &BTreeSet::new(),
        &BTreeSet::new(),
        &k,
    );
    assert_eq!(a.settle, ids(&["web"]));
    // No window and no record: the store wins, above the spoke's generation.
    let a = answer(
        false,
        Vec::new(),
        &held,
        &stored,
        &BTreeSet::new(),
        &other,
        &Known::new(),
    );
    assert_eq!(a.revert, vec![("web".to_string(), 1)]);
    assert!(a.record.is_empty() && a.hold.is_empty());
    // Reverted or kept, never deleted as a stranger; finishing reverts it; a kept one keeps
    // the map full (the digest does not cover uids) and settles when the store changes it.
    assert!(allowed(OrphanKind::Incarnation, OrphanDecision::Delete).is_err());
    assert!(allowed(OrphanKind::Incarnation, OrphanDecision::Revert).is_ok());
    assert_eq!(
        on_finish(OrphanKind::Incarnation, OrphanDecision::Delete),
        OrphanDecision::Revert
    );
    let mut o = orphan("web", "web", 1, OrphanDecision::Keep);
    o.set_kind(OrphanKind::Incarnation);
    o.store_generation = 1;
    let records: BTreeMap<String, Orphan> = [("web".to_string(), o)].into();
    assert_eq!(digest(&records), Digest::Full);
    assert_eq!(
        changed_since(&records, &store(&[("web", 2)])),
        ids(&["web"])
    );
    let kept: Known = [(
        "web".to_string(),
        (OrphanKind::Incarnation, OrphanDecision::Keep),
    )]
    .into();
    assert_eq!(held_from_resend(&kept).len(), 1);
}

#[test]
fn the_fleet_records_no_more_than_its_cap_and_the_rest_are_withheld() {
    let held: HashMap<String, i64> = (0..10).map(|n| (rid(n), 1)).collect();
    let strangers: Vec<String> = (0..10).map(rid).collect();
    let fresh = || {
        answer(
            true,
            strangers.clone(),
            &held,
            &store(&[]),
            &BTreeSet::new(),
            &BTreeSet::new(),
            &Known::new(),
        )
    };
    let mut a = fresh();
    within_fleet(&mut a, MAX_ORPHANS - 4);
    assert_eq!(a.record.len(), 4);
    assert!(
        a.overflow,
        "the cluster stays covered until the rest are recorded"
    );
    assert!(a.delete.is_empty(), "withheld, not deleted");
    let mut full = fresh();
    within_fleet(&mut full, MAX_ORPHANS + 7);
    assert!(full.record.is_empty() && full.overflow && full.delete.is_empty());
    let mut roomy = fresh();
    within_fleet(&mut roomy, 0);
    assert_eq!(roomy.record.len(), 10);
    assert!(!roomy.overflow);
}
