use super::*;
use std::time::Duration;

#[tokio::test]
async fn messages_arrive_in_order_and_a_full_mailbox_says_so() {
    let (tx, mut rx) = channel(2);
    tx.try_send(1).unwrap();
    tx.send(2).await.unwrap();
    match tx.try_send(3) {
        Err(TrySendError::Full(3)) => {}
        other => panic!("expected Full(3), got {other:?}"),
    }
    assert_eq!(rx.len(), 2);
    assert_eq!(rx.recv().await, Some(1));
    // Room again.
    tx.try_send(3).unwrap();
    assert_eq!(rx.recv().await, Some(2));
    assert_eq!(rx.recv().await, Some(3));
    assert!(rx.is_empty());
}

#[tokio::test]
async fn a_sender_waits_for_room() {
    let (tx, mut rx) = channel(1);
    tx.send(1).await.unwrap();
    let waiting = tokio::spawn({
        let tx = tx.clone();
        async move { tx.send(2).await }
    });
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert!(!waiting.is_finished(), "no room: the send waits");
    assert_eq!(rx.recv().await, Some(1));
    waiting.await.unwrap().unwrap();
    assert_eq!(rx.recv().await, Some(2));
}

#[tokio::test]
async fn the_receiver_sees_none_once_every_sender_left_and_the_queue_drained() {
    let (tx, mut rx) = channel(4);
    let tx2 = tx.clone();
    tx.send("a").await.unwrap();
    drop(tx);
    tx2.send("b").await.unwrap();
    drop(tx2);
    assert_eq!(rx.recv().await, Some("a"));
    assert_eq!(rx.recv().await, Some("b"));
    assert_eq!(rx.recv().await, None);
}

#[tokio::test]
async fn a_waiting_receiver_wakes_when_the_last_sender_leaves() {
    let (tx, mut rx) = channel::<u32>(4);
    let recv = tokio::spawn(async move { rx.recv().await });
    tokio::time::sleep(Duration::from_millis(20)).await;
    drop(tx);
    assert_eq!(
        tokio::time::timeout(Duration::from_secs(5), recv)
            .await
            .expect("woken")
            .unwrap(),
        None
    );
}

#[tokio::test]
async fn without_a_receiver_messages_come_back_and_queued_ones_are_dropped() {
    let (tx, rx) = channel(4);
    let (reply, answered) = tokio::sync::oneshot::channel::<()>();
    tx.send(reply).await.unwrap();
    drop(rx);
    // The queued message is gone with the receiver: whoever waits on its answer hears so.
    assert!(answered.await.is_err());
    assert!(tx.is_closed());
    let (again, _) = tokio::sync::oneshot::channel::<()>();
    assert!(matches!(tx.try_send(again), Err(TrySendError::Closed(_))));
    let (again, _) = tokio::sync::oneshot::channel::<()>();
    assert!(tx.send(again).await.is_err());
}

#[tokio::test]
async fn a_sender_waiting_for_room_is_told_when_the_receiver_goes() {
    let (tx, rx) = channel(1);
    tx.send(1).await.unwrap();
    let waiting = tokio::spawn({
        let tx = tx.clone();
        async move { tx.send(2).await }
    });
    tokio::time::sleep(Duration::from_millis(20)).await;
    drop(rx);
    let SendError(back) = tokio::time::timeout(Duration::from_secs(5), waiting)
        .await
        .expect("woken")
        .unwrap()
        .unwrap_err();
    assert_eq!(back, 2);
}

#[tokio::test]
async fn a_cancelled_recv_takes_nothing() {
    let (tx, mut rx) = channel(4);
    // A recv dropped while waiting, then a message: the next recv has it.
    assert!(
        tokio::time::timeout(Duration::from_millis(20), rx.recv())
            .await
            .is_err()
    );
    tx.send(7).await.unwrap();
    assert_eq!(rx.recv().await, Some(7));
    // In a select! that another branch wins, as the actor loop uses it.
    tx.send(8).await.unwrap();
    tokio::select! {
        biased;
        () = std::future::ready(()) => {}
        _ = rx.recv() => panic!("the ready branch wins"),
    }
    assert_eq!(rx.recv().await, Some(8));
}

#[tokio::test]
async fn an_empty_mailbox_holds_no_buffer_after_a_burst() {
    let (tx, mut rx) = channel(1024);
    assert_eq!(rx.shared.lock().items.capacity(), 0, "nothing allocated");
    for i in 0..100 {
        tx.send(i).await.unwrap();
    }
    for i in 0..100 {
        assert_eq!(rx.recv().await, Some(i));
    }
    assert_eq!(rx.shared.lock().items.capacity(), 0, "freed once drained");
    // One message at a time keeps a small buffer rather than allocating each time.
    tx.send(1).await.unwrap();
    rx.recv().await;
    assert!(rx.shared.lock().items.capacity() <= KEEP_CAPACITY);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_senders_lose_nothing() {
    let (tx, mut rx) = channel(8);
    let mut tasks = Vec::new();
    for s in 0..8u64 {
        let tx = tx.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..500u64 {
                tx.send(s * 1000 + i).await.unwrap();
            }
        }));
    }
    drop(tx);
    let mut got = Vec::new();
    while let Some(v) = rx.recv().await {
        got.push(v);
    }
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(got.len(), 4000);
    // Each sender's messages in its own order.
    for s in 0..8u64 {
        let mine: Vec<u64> = got.iter().copied().filter(|v| v / 1000 == s).collect();
        assert!(mine.windows(2).all(|w| w[0] < w[1]));
    }
}
