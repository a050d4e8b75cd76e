use super::*;
use futures::StreamExt;

fn obj(name: &str, rv: &str) -> Value {
    json!({"metadata": {"name": name, "namespace": "a", "resourceVersion": rv}})
}

fn kinds(events: &[Bytes]) -> Vec<String> {
    events
        .iter()
        .map(|e| {
            let v: Value = serde_json::from_slice(e).unwrap();
            format!(
                "{} {}",
                v["type"].as_str().unwrap(),
                v["object"]["metadata"]["name"].as_str().unwrap()
            )
        })
        .collect()
}

#[test]
fn a_huge_timeout_is_capped_instead_of_overflowing() {
    let now = Instant::now();
    assert_eq!(deadline(now, 30), now + Duration::from_secs(30));
    assert_eq!(deadline(now, u64::MAX), now + MAX_WATCH_TIMEOUT);
    assert_eq!(deadline(now, 3601), now + MAX_WATCH_TIMEOUT);
}

#[test]
fn changes_become_added_modified_and_deleted_events() {
    let mut seen = Seen::new();
    assert_eq!(
        kinds(&diff(&mut seen, vec![obj("x", "1"), obj("y", "2")])),
        ["ADDED x", "ADDED y"]
    );
    assert!(diff(&mut seen, vec![obj("x", "1"), obj("y", "2")]).is_empty());
    assert_eq!(
        kinds(&diff(&mut seen, vec![obj("x", "3"), obj("z", "4")])),
        ["MODIFIED x", "ADDED z", "DELETED y"]
    );
    assert!(diff(&mut seen, vec![obj("x", "3"), obj("z", "4")]).is_empty());
    assert!(diff(&mut seen, vec![]).iter().all(|e| e.ends_with(b"\n")));
}

fn ev(revision: u64, namespace: &str, name: &str) -> WatchEvent {
    WatchEvent {
        revision,
        group: String::new(),
        resource: "configmaps".into(),
        namespace: namespace.into(),
        kind: "ADDED",
        object: json!({"metadata": {"name": name, "namespace": namespace}}),
    }
}

#[tokio::test]
async fn a_history_watch_replays_then_follows_without_repeats_and_filters() {
    let (tx, rx) = broadcast::channel(16);
    let filter = Filter {
        group: String::new(),
        plural: "configmaps".into(),
        namespace: "a".into(),
        selectors: Selectors::default(),
    };
    let until = Instant::now() + Duration::from_millis(200);
    let stream = from_history(rx, vec![ev(1, "a", "x"), ev(2, "b", "y")], filter, until);
    // Sent live after the replay was read, and once more (already replayed): seen once.
    tx.send(ev(1, "a", "x")).unwrap();
    tx.send(ev(3, "a", "z")).unwrap();
    let lines: Vec<Bytes> = tokio::time::timeout(Duration::from_secs(5), stream.collect())
        .await
        .expect("the watch ends at its deadline");
    assert_eq!(kinds(&lines), ["ADDED x", "ADDED z"]);
    let gone: Value = serde_json::from_slice(&expired()).unwrap();
    assert_eq!(
        (&gone["type"], &gone["object"]["code"]),
        (&json!("ERROR"), &json!(410))
    );
}
