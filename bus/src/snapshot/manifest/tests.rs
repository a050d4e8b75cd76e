use super::*;
use serde_json::json;

fn record(name: &str, kind: Kind) -> StreamRecord {
    StreamRecord {
        name: name.into(),
        kind,
        restore: OnRestore::AsIs,
        bytes: 10,
        sha256: "ab".repeat(32),
        messages: 3,
        first_seq: 1,
        last_seq: 3,
        last_seq_before: 3,
        last_seq_after: 4,
    }
}

fn manifest(streams: Vec<StreamRecord>) -> Manifest {
    Manifest {
        format: FORMAT,
        flotilla: "0.1.0".into(),
        nats_server: "2.9.10".into(),
        taken_at: "2026-11-30T01:02:03Z".into(),
        duration_ms: 5,
        streams,
        skipped: vec![Skipped {
            name: "KV_hubmembers".into(),
            why: "heartbeats".into(),
        }],
    }
}

#[test]
fn a_manifest_round_trips_in_the_documented_shape() {
    let m = manifest(vec![
        record("KV_works", Kind::Bucket),
        record(STATUS_STREAM, Kind::Stream),
    ]);
    let text = serde_json::to_vec_pretty(&m).unwrap();
    let value: Value = serde_json::from_slice(&text).unwrap();
    assert_eq!(value["streams"][0]["kind"], "bucket");
    assert_eq!(value["streams"][0]["restore"], "as-is");
    assert_eq!(value["streams"][1]["kind"], "stream");
    assert_eq!(value["skipped"][0]["name"], "KV_hubmembers");
    assert_eq!(Manifest::parse(&text).unwrap(), m);
}

#[test]
fn a_newer_format_is_refused_naming_the_version_that_wrote_it() {
    let mut m = manifest(vec![]);
    m.format = 2;
    m.flotilla = "0.4.0".into();
    let err = Manifest::parse(&serde_json::to_vec(&m).unwrap()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "format 2, written by flotilla 0.4.0; this flotilla-hub reads format 1 — restore with \
         flotilla 0.4.0 or later"
    );
}

#[test]
fn foreign_duplicate_mislabelled_or_undigested_streams_are_refused() {
    let cases = [
        (
            vec![record("ORDERS", Kind::Bucket)],
            "not a Flotilla stream",
        ),
        (
            vec![record("KV_../x", Kind::Bucket)],
            "not a Flotilla stream",
        ),
        (
            vec![record("KV_a", Kind::Bucket), record("KV_a", Kind::Bucket)],
            "listed twice",
        ),
        (vec![record("KV_a", Kind::Stream)], "kind does not match"),
        (
            vec![StreamRecord {
                sha256: "AB".repeat(32),
                ..record("KV_a", Kind::Bucket)
            }],
            "sha256",
        ),
        (
            vec![StreamRecord {
                sha256: "ab".into(),
                ..record("KV_a", Kind::Bucket)
            }],
            "sha256",
        ),
    ];
    for (streams, says) in cases {
        let err = manifest(streams).check().unwrap_err().to_string();
        assert!(err.contains(says), "{err:?} should say {says:?}");
    }
}

#[test]
fn text_that_is_not_a_manifest_is_refused() {
    let err = Manifest::parse(b"{\"format\": 1}").unwrap_err();
    assert!(
        err.to_string().starts_with("not a backup manifest: "),
        "{err}"
    );
}

fn request(name: &str, subjects: &[&str]) -> Value {
    json!({
        "config": {"name": name, "subjects": subjects, "num_replicas": 1, "sources": null},
        "state": {"messages": 3, "first_seq": 1, "last_seq": 3}
    })
}

#[test]
fn a_request_matching_its_stream_passes() {
    check_request("KV_works", &request("KV_works", &["$KV.works.>"])).unwrap();
    check_request(
        STATUS_STREAM,
        &request(STATUS_STREAM, &["flotilla.status.>"]),
    )
    .unwrap();
}

#[test]
fn a_request_for_another_stream_or_other_subjects_is_refused() {
    let cases = [
        (
            request("KV_clusters", &["$KV.clusters.>"]),
            "configures stream \"KV_clusters\"",
        ),
        (
            request("KV_works", &["$KV.works.>", "flotilla.status.>"]),
            "must have exactly",
        ),
        (
            request("KV_works", &["flotilla.status.>"]),
            "must have exactly",
        ),
        (json!({"config": {"name": "KV_works"}}), "no \"state\""),
        (json!({"state": {}}), "no \"config\""),
    ];
    for (req, says) in cases {
        let err = check_request("KV_works", &req).unwrap_err().to_string();
        assert!(err.contains(says), "{err:?} should say {says:?}");
    }
}

#[test]
fn a_request_that_mirrors_sources_or_republishes_is_refused() {
    for (field, value) in [
        ("republish", json!({"src": ">", "dest": "flotilla.to.c1.x"})),
        ("sources", json!([{"name": "ORDERS"}])),
        ("mirror", json!({"name": "ORDERS"})),
    ] {
        let mut req = request("KV_works", &["$KV.works.>"]);
        req["config"][field] = value;
        let err = check_request("KV_works", &req).unwrap_err().to_string();
        assert!(err.contains(field), "{err}");
    }
}

#[test]
fn replicas_are_rewritten_and_nothing_else() {
    let req = request("KV_works", &["$KV.works.>"]);
    let three = with_replicas(&req, 3);
    assert_eq!(three["config"]["num_replicas"], 3);
    let mut back = three.clone();
    back["config"]["num_replicas"] = json!(1);
    assert_eq!(back, req);
}

#[test]
fn a_server_older_than_the_backups_is_told_apart() {
    assert!(server_can_restore("2.9.10", "2.9.10"));
    assert!(server_can_restore("2.15.1", "2.9.10"));
    assert!(server_can_restore("2.10.0", "2.9.25"));
    assert!(!server_can_restore("2.9.10", "2.15.1"));
    assert!(!server_can_restore("v2.15.0-dev", "2.15.1"));
    assert!(
        server_can_restore("", "2.15.1"),
        "unknown: the server decides"
    );
}

#[test]
fn hex_is_lowercase_two_digits_a_byte() {
    assert_eq!(hex(&[0, 1, 0xab, 0xff]), "0001abff");
}
