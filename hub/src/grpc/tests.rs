use super::{WatchSettings, watch};
use crate::inventory::Inventory;
use flotilla_api::v1::EventType;
use futures::StreamExt;

type Event = (EventType, String);

/// A watch over an inventory of strings whose events carry the object.
fn watch_all(inventory: &Inventory<String>) -> super::WatchStream<Event> {
    watch_with(&WatchSettings::default(), inventory)
}

fn watch_with(
    settings: &WatchSettings,
    inventory: &Inventory<String>,
) -> super::WatchStream<Event> {
    watch(
        settings,
        inventory,
        |_, _| true,
        |kind, v: &String| (kind, v.clone()),
    )
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

#[tokio::test]
async fn a_watch_makes_its_initial_events_only_as_its_client_takes_them() {
    let inventory: Inventory<String> = Inventory::new(16);
    for i in 0..1000 {
        inventory.upsert(&format!("k{i:04}"), format!("v{i:04}"));
    }
    let made = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = made.clone();
    let settings = WatchSettings {
        queue: 4,
        ..WatchSettings::default()
    };
    let mut stream = watch(
        &settings,
        &inventory,
        |_, _| true,
        move |kind, v: &String| {
            counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            (kind, v.clone())
        },
    );
    assert_eq!(next(&mut stream).await, (EventType::Added, "v0000".into()));
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let n = made.load(std::sync::atomic::Ordering::Relaxed);
    assert!(
        n <= 1 + 4 + 1,
        "{n} events made for a client that took one (queue of 4)"
    );
    // The rest follow, in key order, as the client reads.
    for i in 1..1000 {
        assert_eq!(
            next(&mut stream).await,
            (EventType::Added, format!("v{i:04}"))
        );
    }
}

#[tokio::test(start_paused = true)]
async fn a_watcher_that_takes_nothing_is_dropped_after_the_deadline_with_a_clear_status() {
    let inventory = Inventory::new(16);
    for i in 0..100 {
        inventory.upsert(&format!("k{i:03}"), format!("v{i:03}"));
    }
    let settings = WatchSettings {
        queue: 4,
        slow_after: std::time::Duration::from_secs(30),
        metrics: None,
    };
    let mut stream = watch_with(&settings, &inventory);
    // Nothing read for longer than the deadline: the task gives up.
    tokio::time::sleep(std::time::Duration::from_secs(31)).await;
    let status = tokio::time::timeout(std::time::Duration::from_secs(5), stream.next())
        .await
        .expect("an answer")
        .expect("the stream is open")
        .expect_err("the status comes before what was queued");
    assert_eq!(status.code(), tonic::Code::ResourceExhausted);
    assert!(
        status.message().contains("--grpc-slow-watcher-seconds"),
        "{}",
        status.message()
    );
    assert!(
        tokio::time::timeout(std::time::Duration::from_secs(5), stream.next())
            .await
            .expect("an answer")
            .is_none(),
        "the stream ends after the status"
    );
}

#[tokio::test]
async fn a_change_made_while_a_watch_lists_is_not_sent_twice() {
    let inventory = Inventory::new(64);
    inventory.upsert("a", "a-0".to_string());
    let settings = WatchSettings {
        queue: 1,
        ..WatchSettings::default()
    };
    let mut stream = watch_with(&settings, &inventory);
    // Changed after the watch subscribed, before it listed "b": listed in its new state, and
    // the broadcast's copy of the same state is not sent again.
    inventory.upsert("b", "b-1".to_string());
    let mut events = Vec::new();
    while let Ok(Some(ev)) =
        tokio::time::timeout(std::time::Duration::from_millis(300), stream.next()).await
    {
        events.push(ev.expect("not an error"));
    }
    assert_eq!(
        events.iter().filter(|(_, v)| v == "b-1").count(),
        1,
        "{events:?}"
    );
}
