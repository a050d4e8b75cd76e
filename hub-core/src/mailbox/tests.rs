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

/// A receiver's owner for the parking tests: each wake spawns a task that takes what is queued
/// (counting it) and parks again.
struct Owner {
    rx: Receiver<u64>,
    got: std::sync::Arc<std::sync::Mutex<Vec<u64>>>,
    wakes: std::sync::Arc<AtomicUsize>,
    dropped: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Owner {
    async fn run(mut self: Box<Self>) {
        loop {
            match self.rx.parker().park(self) {
                Ok(()) => return,
                Err(owner) => self = owner,
            }
            match self.rx.recv().await {
                Some(v) => self.got.lock().unwrap().push(v),
                None => return,
            }
        }
    }
}

impl Parked for Owner {
    fn wake(self: Box<Self>) {
        self.wakes.fetch_add(1, Ordering::SeqCst);
        tokio::spawn(self.run());
    }
}

impl Drop for Owner {
    fn drop(&mut self) {
        self.dropped.store(true, Ordering::SeqCst);
    }
}

fn owner(rx: Receiver<u64>) -> Box<Owner> {
    Box::new(Owner {
        rx,
        got: Default::default(),
        wakes: Default::default(),
        dropped: Default::default(),
    })
}

#[tokio::test]
async fn a_parked_owner_is_woken_by_the_next_message_and_takes_it() {
    let (tx, rx) = channel(4);
    let o = owner(rx);
    let (got, wakes) = (o.got.clone(), o.wakes.clone());
    assert!(o.rx.parker().park(o).is_ok(), "nothing queued: it parks");
    assert_eq!(wakes.load(Ordering::SeqCst), 0);
    tx.send(7).await.unwrap();
    assert_eq!(wakes.load(Ordering::SeqCst), 1, "woken by the send itself");
    tokio::time::timeout(Duration::from_secs(5), async {
        while got.lock().unwrap().is_empty() {
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("the woken owner takes the message");
    assert_eq!(*got.lock().unwrap(), [7]);
    // Parked again: the next message wakes it again.
    tx.try_send(8).unwrap();
    tokio::time::timeout(Duration::from_secs(5), async {
        while got.lock().unwrap().len() < 2 {
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("woken again");
    assert_eq!(wakes.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn an_owner_with_a_message_waiting_or_no_sender_left_is_not_parked() {
    let (tx, rx) = channel(4);
    tx.try_send(1).unwrap();
    let o = owner(rx);
    let o = o.rx.parker().park(o).expect_err("a message is waiting");
    drop(tx);
    let mut o = o;
    assert_eq!(o.rx.recv().await, Some(1));
    o.rx.parker()
        .park(o)
        .expect_err("no sender left: nothing could wake it");
}

#[tokio::test]
async fn a_parked_owner_is_dropped_when_its_last_sender_leaves() {
    let (tx, rx) = channel(4);
    let tx2 = tx.clone();
    let o = owner(rx);
    let dropped = o.dropped.clone();
    assert!(o.rx.parker().park(o).is_ok());
    drop(tx);
    assert!(!dropped.load(Ordering::SeqCst), "a sender is left");
    drop(tx2);
    assert!(
        dropped.load(Ordering::SeqCst),
        "nothing can wake it: the owner (and the mailbox it holds) is freed"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn senders_racing_an_owner_that_parks_after_each_message_lose_nothing() {
    let (tx, rx) = channel(4);
    let o = owner(rx);
    let (got, wakes) = (o.got.clone(), o.wakes.clone());
    assert!(o.rx.parker().park(o).is_ok());
    let mut tasks = Vec::new();
    for s in 0..4u64 {
        let tx = tx.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..2_000u64 {
                tx.send(s * 10_000 + i).await.unwrap();
                if i % 7 == 0 {
                    tokio::task::yield_now().await;
                }
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    tokio::time::timeout(Duration::from_secs(20), async {
        while got.lock().unwrap().len() < 8_000 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .unwrap_or_else(|_| {
        panic!(
            "a wake-up was lost: {} of 8000 taken",
            got.lock().unwrap().len()
        )
    });
    let got = got.lock().unwrap().clone();
    assert_eq!(got.len(), 8_000);
    for s in 0..4u64 {
        let mine: Vec<u64> = got.iter().copied().filter(|v| v / 10_000 == s).collect();
        assert!(mine.windows(2).all(|w| w[0] < w[1]), "each sender in order");
    }
    assert!(wakes.load(Ordering::SeqCst) >= 1);
    drop(tx);
}
