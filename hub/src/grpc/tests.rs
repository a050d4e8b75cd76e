use super::watch;
use crate::inventory::Inventory;
use flotilla_api::v1::EventType;
use futures::StreamExt;

type Event = (EventType, String);

/// A watch over an inventory of strings whose events carry the object.
fn watch_all(inventory: &Inventory<String>) -> super::WatchStream<Event> {
    watch(inventory, |_, _| true, |kind, v: &String| (kind, v.clone()))
}

async fn next(stream: &mut super::WatchStream<Event>) -> Event {
    tokio::time::timeout(std::time::Duration::from_secs(5), stream.next())
        .await
        .expect("an event within 5 s")
        .expect("the stream is open")
        .expect("not an error")
}

#[tokio::test]
async fn a_watcher_that_fell_behind_is_sent_only_what_changed_meanwhile() {
    let inventory = Inventory::new(16);
    for k in ["a", "b", "c"] {
        inventory.upsert(k, format!("{k}-0"));
    }
    let mut stream = watch_all(&inventory);
    let mut initial: Vec<Event> = Vec::new();
    for _ in 0..3 {
        initial.push(next(&mut stream).await);
    }
    assert!(initial.iter().all(|(kind, _)| *kind == EventType::Added));

    // The watch task cannot run while this burst overflows the broadcast (16) and its
    // stream's buffer: it falls behind.
    for i in 1..=600 {
        inventory.upsert("a", format!("a-{i}"));
    }
    inventory.remove("c");

    let mut after = Vec::new();
    while let Ok(Some(ev)) =
        tokio::time::timeout(std::time::Duration::from_millis(300), stream.next()).await
    {
        after.push(ev.expect("not an error"));
    }
    assert!(
        after.iter().all(|(_, v)| !v.starts_with('b')),
        "b did not change and was not sent again: {after:?}"
    );
    assert_eq!(
        after
            .iter()
            .filter(|(kind, v)| *kind == EventType::Deleted && v == "c-0")
            .count(),
        1,
        "c's deletion is sent once: {after:?}"
    );
    assert_eq!(
        after.iter().rev().find(|(_, v)| v.starts_with('a')),
        Some(&(EventType::Modified, "a-600".to_string())),
        "the watcher ends on a's last state"
    );
    assert!(
        after.len() < 600,
        "the burst was skipped over, not replayed: {} events",
        after.len()
    );
}

#[tokio::test]
async fn a_watcher_that_fell_behind_is_sent_objects_it_has_not_seen() {
    let inventory = Inventory::new(16);
    inventory.upsert("a", "a-0".to_string());
    let mut stream = watch_all(&inventory);
    assert_eq!(next(&mut stream).await, (EventType::Added, "a-0".into()));
    for i in 0..100 {
        inventory.upsert(&format!("n{i:03}"), format!("n{i:03}-0"));
    }
    let mut seen = std::collections::BTreeSet::new();
    while let Ok(Some(ev)) =
        tokio::time::timeout(std::time::Duration::from_millis(300), stream.next()).await
    {
        let (_, v) = ev.expect("not an error");
        seen.insert(v);
    }
    assert_eq!(
        seen.len(),
        100,
        "every new object reaches the watcher once caught up"
    );
    assert!(
        !seen.contains("a-0"),
        "a did not change and was not sent again"
    );
}
