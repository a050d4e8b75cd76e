use super::*;
use flotilla_api::v1::{AppliedPeerSecret, ObjectMeta, PeerSourceError, StorageClusterRef};

fn key() -> String {
    nkeys::XKey::new().public_key()
}

fn peer(name: &str, clusters: &[&str]) -> MirrorPeer {
    MirrorPeer {
        metadata: Some(ObjectMeta {
            name: name.into(),
            generation: 1,
            ..Default::default()
        }),
        spec: Some(flotilla_api::v1::MirrorPeerSpec {
            items: clusters
                .iter()
                .map(|c| PeerRef {
                    cluster_name: c.to_string(),
                    storage_cluster_ref: Some(StorageClusterRef {
                        name: "ocs".into(),
                        namespace: "openshift-storage".into(),
                    }),
                    ..Default::default()
                })
                .collect(),
            r#type: "async".into(),
            scheduling_intervals: vec!["5m".into()],
            manage_s3: false,
        }),
        status: None,
    }
}

struct World {
    peers: BTreeMap<String, MirrorPeer>,
    records: BTreeMap<String, SealedPeerSecret>,
    keys: BTreeMap<String, String>,
}

impl World {
    fn new() -> Self {
        let mut peers = BTreeMap::new();
        peers.insert("dr".to_string(), peer("dr", &["a", "b"]));
        peers.insert("other".to_string(), peer("other", &["c", "d"]));
        let keys = ["a", "b", "c", "d"]
            .iter()
            .map(|c| (c.to_string(), key()))
            .collect();
        Self {
            peers,
            records: BTreeMap::new(),
            keys,
        }
    }

    fn view(&self) -> View<'_> {
        View {
            peers: &self.peers,
            records: &self.records,
            keys: &self.keys,
        }
    }

    /// A box from `from` to `to` as its agent would send it.
    fn sealed(&self, mp: &str, from: &str, to: &str, revision: u64) -> SealedPeerSecret {
        SealedPeerSecret {
            mirror_peer: mp.into(),
            from: from.into(),
            to: to.into(),
            sender_xkey: self.keys[from].clone(),
            recipient_xkey: self.keys[to].clone(),
            revision,
            sealed: vec![7; 100],
            ..Default::default()
        }
    }

    fn request(&self, cluster: &str, outbound: Vec<SealedPeerSecret>) -> PeerSyncRequest {
        PeerSyncRequest {
            cluster_name: cluster.into(),
            xkey: self.keys[cluster].clone(),
            outbound,
            ..Default::default()
        }
    }
}

#[test]
fn a_peers_own_box_is_taken() {
    let w = World::new();
    let c = check(
        "a",
        &w.request("a", vec![w.sealed("dr", "a", "b", 1)]),
        w.view(),
    )
    .unwrap();
    assert_eq!(c.boxes.len(), 1);
    assert!(c.refused.is_empty() && c.new_key.is_none());
}

#[test]
fn forged_boxes_are_refused_naming_what_and_why_and_the_rest_is_taken() {
    let w = World::new();
    let mut wrong_sender_key = w.sealed("dr", "a", "b", 1);
    wrong_sender_key.sender_xkey = key();
    let mut wrong_recipient_key = w.sealed("dr", "a", "b", 1);
    wrong_recipient_key.recipient_xkey = key();
    let mut empty = w.sealed("dr", "a", "b", 1);
    empty.sealed.clear();
    let outbound = vec![
        w.sealed("dr", "b", "a", 1),    // another cluster's box
        w.sealed("other", "c", "d", 1), // a MirrorPeer a is not in
        SealedPeerSecret {
            to: "c".into(),
            ..w.sealed("dr", "a", "b", 1)
        }, // not a peer of dr
        SealedPeerSecret {
            mirror_peer: "nope".into(),
            ..w.sealed("dr", "a", "b", 1)
        },
        wrong_sender_key,
        wrong_recipient_key,
        empty,
        w.sealed("dr", "a", "b", 1), // the good one
    ];
    let c = check("a", &w.request("a", outbound), w.view()).unwrap();
    assert_eq!(c.boxes.len(), 1, "{:?}", c.refused);
    let refused = c.refused.join("\n");
    for needle in [
        "outbound[0] (dr: b → a): from must be the asking cluster",
        "outbound[1] (other: c → d)",
        "outbound[2] (dr: a → c): \"c\" is not another peer",
        "outbound[3] (nope: a → b): no such MirrorPeer",
        "outbound[4] (dr: a → b): senderXkey",
        "outbound[5] (dr: a → b): recipientXkey is not \"b\"'s current key",
        "outbound[6] (dr: a → b): sealed: 0 bytes",
    ] {
        assert!(refused.contains(needle), "{needle} missing in {refused}");
    }
}

#[test]
fn a_request_under_another_name_or_without_a_key_is_refused_whole() {
    let w = World::new();
    let mut r = w.request("a", vec![]);
    r.cluster_name = "b".into();
    assert!(
        check("a", &r, w.view())
            .unwrap_err()
            .contains("clusterName")
    );
    let mut r = w.request("a", vec![]);
    r.xkey = "UABC".into();
    assert!(check("a", &r, w.view()).unwrap_err().contains("xkey"));
    let mut r = w.request("a", vec![]);
    r.outbound = vec![w.sealed("dr", "a", "b", 1); MAX_OUTBOUND + 1];
    assert!(check("a", &r, w.view()).unwrap_err().contains("outbound"));
}

#[test]
fn older_revisions_are_refused_and_a_newer_applied_revision_is_the_pairs_floor() {
    let mut w = World::new();
    let stored = w.sealed("dr", "a", "b", 3);
    w.records.insert(record_key("dr", "a", "b"), stored);
    let c = check(
        "a",
        &w.request("a", vec![w.sealed("dr", "a", "b", 3)]),
        w.view(),
    )
    .unwrap();
    assert!(c.boxes.is_empty() && c.refused[0].contains("not newer than the stored revision 3"));
    // A jump to the top of the range is refused: the pair's next revision must have room.
    let c = check(
        "a",
        &w.request("a", vec![w.sealed("dr", "a", "b", u64::MAX)]),
        w.view(),
    )
    .unwrap();
    assert!(
        c.boxes.is_empty() && c.refused[0].contains("more than 1024 past"),
        "{:?}",
        c.refused
    );
    let mut r = w.request("b", vec![]);
    r.applied = vec![
        AppliedPeerSecret {
            mirror_peer: "dr".into(),
            from: "a".into(),
            revision: 9,
            error: String::new(),
            sender_xkey: w.keys["a"].clone(),
        },
        AppliedPeerSecret {
            mirror_peer: "other".into(),
            from: "c".into(),
            revision: 1,
            error: String::new(),
            sender_xkey: w.keys["c"].clone(),
        },
    ];
    r.source_errors = vec![PeerSourceError {
        mirror_peer: "other".into(),
        error: "x".into(),
    }];
    let c = check("b", &r, w.view()).unwrap();
    let refused = c.refused.join("\n");
    assert!(
        refused.contains("applied[1] (other: c → b): not an exchange"),
        "{refused}"
    );
    assert!(refused.contains("sourceErrors[0] (other)"), "{refused}");
    assert!(c.applied.is_empty());
    // b holds revision 9 of a's, newer than the hub's 3 (a restarted and counted again from
    // what the hub held): the pair's floor, a record with no box, applied, that a counts on
    // from.
    assert_eq!(c.floors.len(), 1, "{c:?}");
    let f = &c.floors[0];
    assert_eq!((f.revision, f.applied_revision), (9, 9));
    assert!(f.sealed.is_empty());
    assert_eq!(
        (&f.sender_xkey, &f.recipient_xkey),
        (&w.keys["a"], &w.keys["b"])
    );
    // Not from a report of a failure, nor under a key of a's it replaced; a failure's
    // revision must still be one the hub handed out.
    let mut failed = r.clone();
    failed.applied[0].error = "could not write".into();
    let c = check("b", &failed, w.view()).unwrap();
    assert!(c.floors.is_empty());
    assert!(
        c.refused
            .join("\n")
            .contains("revision 9 was never handed out"),
        "{:?}",
        c.refused
    );
    let mut old_key = r.clone();
    old_key.applied[0].sender_xkey = nkeys::XKey::new().public_key();
    let c = check("b", &old_key, w.view()).unwrap();
    assert!(c.floors.is_empty() && c.applied.is_empty(), "{c:?}");
    // No box held at all (purged while b was deleted): the same floor.
    let held = std::mem::take(&mut w.records);
    let c = check("b", &r, w.view()).unwrap();
    assert_eq!(c.floors.len(), 1, "{c:?}");
    w.records = held;
    r.applied[0].revision = 3;
    let c = check("b", &r, w.view()).unwrap();
    assert_eq!(
        c.applied,
        vec![(record_key("dr", "a", "b"), 3, String::new())]
    );
}

#[test]
fn a_new_key_is_noticed_and_boxes_to_an_old_key_are_not_delivered() {
    let mut w = World::new();
    w.records
        .insert(record_key("dr", "a", "b"), w.sealed("dr", "a", "b", 1));
    let (d, more) = deliveries("b", w.view(), 1 << 20);
    assert_eq!(d[0].inbound.len(), 1);
    assert!(!more);
    assert_eq!(d[0].peers[0].xkey, w.keys["a"]);
    // b comes back with a new key: the box sealed to its old key waits for a new one.
    let new = key();
    let mut r = w.request("b", vec![]);
    r.xkey = new.clone();
    assert_eq!(check("b", &r, w.view()).unwrap().new_key, Some(new.clone()));
    w.keys.insert("b".into(), new);
    assert!(deliveries("b", w.view(), 1 << 20).0[0].inbound.is_empty());
    assert!(has_work("a", w.view()), "a must seal again");
    let s = status(&w.peers["dr"], w.view(), &Observed::default());
    let e = s.exchanges.iter().find(|e| e.from == "a").unwrap();
    assert_eq!(e.phase, exchange::PENDING);
    assert!(e.message.contains("old key of b"), "{}", e.message);
}

#[test]
fn answers_stay_within_their_budget() {
    let mut w = World::new();
    w.peers.insert("big".into(), peer("big", &["a", "b", "c"]));
    for from in ["b", "c"] {
        let mut r = w.sealed("big", from, "a", 1);
        r.sealed = vec![1; 1000];
        w.records.insert(record_key("big", from, "a"), r);
    }
    let (d, more) = deliveries("a", w.view(), 1500);
    let big = d.iter().find(|d| d.mirror_peer == "big").unwrap();
    assert_eq!(big.inbound.len(), 1);
    assert!(more);
}

#[test]
fn the_phase_table() {
    let mut w = World::new();
    let delivered = BTreeSet::new();
    let errors = BTreeMap::new();
    let mut seen = Observed {
        available: ["a", "b"].into(),
        delivered: &delivered,
        source_errors: &errors,
        insecure: false,
    };
    let phase = |w: &World, seen: &Observed<'_>, from: &str| {
        let s = status(&w.peers["dr"], w.view(), seen);
        let e = s.exchanges.into_iter().find(|e| e.from == from).unwrap();
        (s.phase, e.phase, e.message)
    };
    let (p, e, m) = phase(&w, &seen, "a");
    assert_eq!(
        (p.as_str(), e.as_str()),
        (phase::EXCHANGING, exchange::PENDING)
    );
    assert!(m.contains("waiting for a to seal"), "{m}");
    w.records
        .insert(record_key("dr", "a", "b"), w.sealed("dr", "a", "b", 1));
    assert_eq!(phase(&w, &seen, "a").1, exchange::SEALED);
    let delivered: BTreeSet<String> = [record_key("dr", "a", "b")].into();
    seen.delivered = &delivered;
    assert_eq!(phase(&w, &seen, "a").1, exchange::DELIVERED);
    w.records
        .get_mut(&record_key("dr", "a", "b"))
        .unwrap()
        .applied_error = "no namespace".into();
    let (_, e, m) = phase(&w, &seen, "a");
    assert_eq!(e, exchange::DELIVERED);
    assert!(m.contains("b could not apply it: no namespace"), "{m}");
    let r = w.records.get_mut(&record_key("dr", "a", "b")).unwrap();
    r.applied_error.clear();
    r.applied_revision = 1;
    assert_eq!(phase(&w, &seen, "a").1, exchange::APPLIED);
    w.records.insert(
        record_key("dr", "b", "a"),
        SealedPeerSecret {
            applied_revision: 1,
            ..w.sealed("dr", "b", "a", 1)
        },
    );
    let s = status(&w.peers["dr"], w.view(), &seen);
    assert_eq!(s.phase, phase::EXCHANGED);
    assert!(!has_work("a", w.view()) && !has_work("b", w.view()));
    let reachable = |s: &MirrorPeerStatus| {
        s.conditions
            .iter()
            .find(|c| c.r#type == mp::CONDITION_PEERS_REACHABLE)
            .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
            .unwrap()
    };
    assert_eq!(reachable(&s).0, "True");
    seen.available = ["a"].into();
    let s = status(&w.peers["dr"], w.view(), &seen);
    assert_eq!(
        reachable(&s),
        (
            "False".into(),
            "PeerOffline".into(),
            "not Available: b".into()
        )
    );
}

#[test]
fn manage_s3_is_reported_unsupported() {
    let mut w = World::new();
    w.peers
        .get_mut("dr")
        .unwrap()
        .spec
        .as_mut()
        .unwrap()
        .manage_s3 = true;
    let s = status(&w.peers["dr"], w.view(), &Observed::default());
    let c = s
        .conditions
        .iter()
        .find(|c| c.r#type == mp::CONDITION_S3)
        .unwrap();
    assert_eq!(
        (c.status.as_str(), c.reason.as_str()),
        ("False", "Unsupported")
    );
}

#[test]
fn outside_secure_mode_the_status_says_the_keys_are_not_authenticated() {
    let w = World::new();
    let keys_condition = |insecure| {
        let seen = Observed {
            insecure,
            ..Observed::default()
        };
        status(&w.peers["dr"], w.view(), &seen)
            .conditions
            .into_iter()
            .find(|c| c.r#type == mp::CONDITION_KEYS_AUTHENTICATED)
    };
    let c = keys_condition(true).expect("the condition is set");
    assert_eq!(
        (c.status.as_str(), c.reason.as_str()),
        ("False", "InsecureMode")
    );
    assert!(
        c.message.contains("not in secure mode") && c.message.contains("--secure-dir"),
        "{}",
        c.message
    );
    assert!(keys_condition(false).is_none());
}

#[test]
fn a_cluster_without_a_key_or_with_a_box_to_apply_has_work() {
    let mut w = World::new();
    assert!(!has_work("x", w.view()), "in no MirrorPeer");
    w.keys.remove("a");
    assert!(has_work("a", w.view()));
    assert!(!has_work("b", w.view()), "b cannot seal for a keyless a");
}

#[test]
fn a_new_key_drops_the_boxes_sealed_with_or_to_the_old_one() {
    let mut w = World::new();
    w.peers.insert("tri".into(), peer("tri", &["a", "b", "c"]));
    for (mp, from, to) in [
        ("dr", "a", "b"),
        ("dr", "b", "a"),
        ("tri", "a", "c"),
        ("tri", "c", "b"),
    ] {
        w.records
            .insert(record_key(mp, from, to), w.sealed(mp, from, to, 3));
    }
    // a comes back with a new key: what it sealed with the old one and what was sealed to the
    // old one go; c → b, not a's, stays.
    let new = key();
    let mut dropped = replaced_boxes("a", &new, w.view());
    dropped.sort();
    assert_eq!(
        dropped,
        [
            record_key("dr", "a", "b"),
            record_key("dr", "b", "a"),
            record_key("tri", "a", "c"),
        ]
    );
    assert!(
        replaced_boxes("a", &w.keys["a"], w.view()).is_empty(),
        "same key: nothing goes"
    );
    for k in &dropped {
        w.records.remove(k);
    }
    w.keys.insert("a".into(), new);
    // The status waits for a fresh box each way, and says so (not an old key's box).
    let s = status(&w.peers["dr"], w.view(), &Observed::default());
    for e in &s.exchanges {
        assert_eq!(
            (e.phase.as_str(), e.revision),
            (exchange::PENDING, 0),
            "{e:?}"
        );
        assert!(e.message.contains("to seal its Secret"), "{}", e.message);
    }
    assert!(has_work("a", w.view()) && has_work("b", w.view()));
}

#[test]
fn a_deleted_clusters_boxes_are_every_box_from_or_to_it() {
    let mut w = World::new();
    w.peers.insert("tri".into(), peer("tri", &["a", "b", "c"]));
    for (mp, from, to) in [("dr", "a", "b"), ("dr", "b", "a"), ("tri", "c", "b")] {
        w.records
            .insert(record_key(mp, from, to), w.sealed(mp, from, to, 1));
    }
    let mut of_a = boxes_of("a", w.view());
    of_a.sort();
    assert_eq!(
        of_a,
        [record_key("dr", "a", "b"), record_key("dr", "b", "a")]
    );
    assert_eq!(boxes_of("c", w.view()), [record_key("tri", "c", "b")]);
    assert!(boxes_of("d", w.view()).is_empty());
}

#[test]
fn revisions_count_per_sender_key() {
    let mut w = World::new();
    // A box of a's old key is still held (its drop failed) at a high revision.
    let old_key = key();
    w.records.insert(
        record_key("dr", "a", "b"),
        SealedPeerSecret {
            sender_xkey: old_key.clone(),
            ..w.sealed("dr", "a", "b", 2000)
        },
    );
    // a's current key starts again at 1, and its ceiling is counted from there.
    let c = check(
        "a",
        &w.request("a", vec![w.sealed("dr", "a", "b", 1)]),
        w.view(),
    )
    .unwrap();
    assert_eq!(c.boxes.len(), 1, "{:?}", c.refused);
    let c = check(
        "a",
        &w.request("a", vec![w.sealed("dr", "a", "b", 1 + MAX_REVISION_STEP)]),
        w.view(),
    )
    .unwrap();
    assert!(
        c.refused[0].contains("more than 1024 past the stored revision 0"),
        "{:?}",
        c.refused
    );
    // The old key's box is neither delivered nor shown as applied or current.
    assert!(deliveries("b", w.view(), 1 << 20).0[0].inbound.is_empty());
    let s = status(&w.peers["dr"], w.view(), &Observed::default());
    let e = s.exchanges.iter().find(|e| e.from == "a").unwrap();
    assert_eq!(e.phase, exchange::PENDING);
    assert!(e.message.contains("old key of a"), "{}", e.message);
    // b reports having applied revision 1 of the old key's box: it says nothing of a box of
    // the new key at revision 1, which stays to deliver.
    w.records
        .insert(record_key("dr", "a", "b"), w.sealed("dr", "a", "b", 1));
    let mut r = w.request("b", vec![]);
    r.applied = vec![AppliedPeerSecret {
        mirror_peer: "dr".into(),
        from: "a".into(),
        revision: 1,
        error: String::new(),
        sender_xkey: old_key,
    }];
    let c = check("b", &r, w.view()).unwrap();
    assert!(c.applied.is_empty() && c.refused.is_empty(), "{c:?}");
    r.applied[0].sender_xkey = w.keys["a"].clone();
    assert_eq!(
        check("b", &r, w.view()).unwrap().applied,
        vec![(record_key("dr", "a", "b"), 1, String::new())]
    );
    r.applied[0].sender_xkey = String::new();
    let c = check("b", &r, w.view()).unwrap();
    assert!(
        c.applied.is_empty() && c.refused[0].contains("senderXkey"),
        "{c:?}"
    );
}

mod limits {
    use super::limit::{Limiter, RequestLimits};
    use std::time::Duration;
    use std::time::Instant;

    fn limiter(per_second: f64, burst: u32) -> Limiter {
        Limiter::new(RequestLimits {
            per_second,
            burst,
            warn_interval: Duration::from_secs(60),
            max_clusters: 3,
        })
    }

    #[test]
    fn each_cluster_has_its_own_bucket_refilled_at_its_rate() {
        let mut l = limiter(2.0, 3);
        let t0 = Instant::now();
        for _ in 0..3 {
            l.admit("a", t0).unwrap();
        }
        let e = l.admit("a", t0).unwrap_err();
        assert!(
            e.contains(
                "\"a\" is over the hub's MirrorPeer request limit (2 a second, bursts of 3)"
            ) && e.ends_with("ask again later"),
            "{e}"
        );
        l.admit("b", t0).expect("b has its own bucket");
        // Half a second refills one request, not more.
        let t1 = t0 + Duration::from_millis(500);
        l.admit("a", t1).unwrap();
        assert!(l.admit("a", t1).is_err());
        // Idle for long, the bucket holds its burst, never more.
        let t2 = t1 + Duration::from_secs(3600);
        for _ in 0..3 {
            l.admit("a", t2).unwrap();
        }
        assert!(l.admit("a", t2).is_err());
    }

    #[test]
    fn one_warning_per_cluster_per_interval_with_the_count_left_out() {
        let mut l = limiter(5.0, 20);
        let t0 = Instant::now();
        assert_eq!(l.warn("a", t0), Some(0));
        for i in 1..=4 {
            assert_eq!(l.warn("a", t0 + Duration::from_secs(i)), None);
        }
        assert_eq!(l.warn("b", t0), Some(0), "b's warnings are its own");
        assert_eq!(l.warn("a", t0 + Duration::from_secs(60)), Some(4));
        assert_eq!(l.warn("a", t0 + Duration::from_secs(61)), None);
    }

    #[test]
    fn entries_forget_themselves_when_idle_and_stay_under_the_cap() {
        let mut l = limiter(5.0, 20);
        let t0 = Instant::now();
        l.admit("a", t0).unwrap();
        l.warn("b", t0);
        assert_eq!(l.warn("b", t0), None);
        assert_eq!(l.len(), 2);
        // Not yet idle: nothing goes.
        assert!(l.sweep(t0 + Duration::from_secs(30), false).is_empty());
        assert_eq!(l.len(), 2);
        // Idle (and a sweep due, one idle period after the last): both go, and what b's left
        // out is reported.
        assert!(
            l.sweep(t0 + Duration::from_secs(61), false).is_empty(),
            "not due"
        );
        let later = t0 + Duration::from_secs(91);
        assert_eq!(l.sweep(later, false), [("b".to_string(), 1)]);
        assert!(l.is_empty());
        // A flood of names never holds more than the cap; the one used longest ago goes.
        for (i, c) in ["c", "d", "e", "f", "g"].iter().enumerate() {
            l.admit(c, later + Duration::from_millis(i as u64)).unwrap();
            assert!(l.len() <= 3);
        }
        assert_eq!(l.len(), 3);
        // The entries kept go on counting: g has its burst less the request it made.
        for _ in 0..19 {
            l.admit("g", later + Duration::from_millis(4)).unwrap();
        }
        assert!(l.admit("g", later + Duration::from_millis(4)).is_err());
    }
}

#[test]
fn an_applied_failure_keeps_the_applied_revision_and_records_the_error_once() {
    let mut w = World::new();
    let mut stored = w.sealed("dr", "a", "b", 4);
    stored.applied_revision = 2;
    w.records.insert(record_key("dr", "a", "b"), stored);
    let report = |revision: u64, error: &str| AppliedPeerSecret {
        mirror_peer: "dr".into(),
        from: "a".into(),
        revision,
        error: error.into(),
        sender_xkey: w.keys["a"].clone(),
    };
    let xkey = w.keys["b"].clone();
    assert_eq!(
        check_applied("b", &xkey, &report(4, "no room"), w.view()),
        Applied::Record {
            key: record_key("dr", "a", "b"),
            revision: 2,
            error: "no room".into(),
        }
    );
    assert_eq!(
        check_applied("b", &xkey, &report(2, ""), w.view()),
        Applied::Unchanged,
        "what the hub already holds changes nothing"
    );
    assert_eq!(
        check_applied("b", &xkey, &report(1, ""), w.view()),
        Applied::Unchanged,
        "an older applied revision never lowers the record's"
    );
    assert!(matches!(
        check_applied("c", &w.keys["c"].clone(), &report(1, ""), w.view()),
        Applied::Refused(why) if why.contains("not an exchange")
    ));
}
