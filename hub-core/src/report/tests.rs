use super::*;
use flotilla_api::v1::PolicyStatusReport;
use std::sync::Mutex;

/// A taker that does what it is told with every report, and remembers what it saw.
struct Scripted {
    does: Does,
    seen: Mutex<Vec<(String, String, bool)>>,
}

#[derive(Clone, Copy)]
enum Does {
    Take,
    Retry,
    Drop,
    Refuse(&'static str),
}

impl Scripted {
    fn new(does: Does) -> Arc<Self> {
        Arc::new(Self {
            does,
            seen: Mutex::default(),
        })
    }
}

impl Taker for Scripted {
    fn take(&self, report: Report, ack: Ack) -> BoxFuture<'_, Result<(), (Refusal, Ack)>> {
        Box::pin(async move {
            self.seen.lock().unwrap().push((
                report.event.cluster.clone(),
                report.resource_id.clone(),
                report.accepted,
            ));
            match self.does {
                Does::Take => ack.settle(Outcome::Taken).await,
                Does::Retry => ack.settle(Outcome::Retry).await,
                Does::Drop => drop(ack),
                Does::Refuse(reason) => return Err((Refusal::new(reason, "told to"), ack)),
            }
            Ok(())
        })
    }
}

/// A resource id (a UUID, as every one is).
const RID: &str = "0d4b7c2e-7e1a-4c3b-9d6f-1a2b3c4d5e6f";

const POLICY: Kind = Kind {
    name: flotilla_bus::policies::KIND_POLICY,
    event_type: flotilla_bus::policies::status_type,
};

fn report(cluster: &str) -> Report {
    let data = PolicyStatusReport {
        cluster_name: cluster.into(),
        ..Default::default()
    };
    let event = Event::new((POLICY.event_type)(), "agent", cluster, &data).with_resource_id(RID);
    let raw = event.encode(1 << 20).expect("encodes");
    Report {
        event,
        raw,
        resource_id: RID.into(),
        accepted: true,
    }
}

/// Routes one report through `sinks` (waiting for a forward) with an ack whose outcome the
/// test reads.
async fn route(sinks: &Sinks, r: Report) -> Result<Outcome, (Refusal, Option<Outcome>)> {
    let (tx, rx) = oneshot::channel();
    let routed = sinks
        .get(POLICY.name)
        .expect("a policy sink")
        .route(r, Ack::Forwarded(tx))
        .await;
    let refused = match routed {
        Routed::Settled => None,
        Routed::Refused(refusal, ack) => Some((refusal, ack)),
        Routed::Forwarding(f) => f.await,
    };
    match refused {
        None => Ok(rx.await.expect("the ack is settled")),
        Some((refusal, ack)) => {
            drop(ack);
            Err((refusal, rx.await.ok()))
        }
    }
}

#[test]
fn answers_map_each_outcome_and_refusal_reasons_stay_a_closed_set() {
    use report_answer::Outcome as O;
    assert_eq!(answer(Ok(Outcome::Taken)).outcome, Some(O::Taken(true)));
    assert_eq!(answer(Ok(Outcome::Retry)).outcome, Some(O::Busy(true)));
    let refused = answer(Err(Refusal::new(
        "not_accepted",
        "cluster \"c\" is not accepted",
    )));
    assert_eq!(
        refused.outcome,
        Some(O::Refused(ReportRefusal {
            reason: "not_accepted".into(),
            message: "cluster \"c\" is not accepted".into()
        }))
    );
    assert_eq!(known_reason("clustername_mismatch"), "clustername_mismatch");
    assert_eq!(known_reason("anything a newer hub says"), "refused");
}

#[test]
fn reports_not_taken_come_back_after_a_growing_delay() {
    assert_eq!(retry_after(0), Duration::from_secs(1));
    assert_eq!(retry_after(1), Duration::from_secs(1));
    assert_eq!(retry_after(2), Duration::from_secs(2));
    assert_eq!(retry_after(5), Duration::from_secs(16));
    assert_eq!(retry_after(6), Duration::from_secs(30));
    assert_eq!(retry_after(1_000), Duration::from_secs(30));
}

#[test]
fn a_forwarded_report_that_is_not_one_is_refused_as_invalid_not_taken() {
    let garbage = unwrap("policy", b"\xff\xff\xff", 1 << 20)
        .err()
        .expect("refused");
    assert_eq!(garbage.reason, "invalid_status");
    let not_an_event = ForwardedReport {
        event: b"not a cloudevent".to_vec(),
        resource_id: "rid".into(),
        accepted: true,
    };
    let refused = unwrap("policy", &not_an_event.encode_to_vec(), 1 << 20)
        .err()
        .expect("refused");
    assert_eq!(refused.reason, "invalid_status");
    // The holder bounds the event as the router does.
    let big = ForwardedReport {
        event: report("c1").raw.to_vec(),
        resource_id: RID.into(),
        accepted: true,
    };
    assert!(unwrap("policy", &big.encode_to_vec(), 8).is_err());
    let fine = unwrap("policy", &big.encode_to_vec(), 1 << 20).expect("unwraps");
    assert_eq!(
        (fine.event.cluster.as_str(), fine.resource_id.as_str()),
        ("c1", RID)
    );
}

#[tokio::test]
async fn a_local_taker_gets_the_report_without_nats() {
    // No server at this address: a local taker must not need one.
    let nats = async_nats::ConnectOptions::new()
        .retry_on_initial_connect()
        .connect("127.0.0.1:1")
        .await
        .expect("a lazy client");
    let sinks = Sinks::new(&nats, [POLICY]);
    let taker = Scripted::new(Does::Take);
    sinks
        .get(POLICY.name)
        .unwrap()
        .set_local(Some(taker.clone()));
    assert_eq!(route(&sinks, report("c1")).await.ok(), Some(Outcome::Taken));
    assert_eq!(
        taker.seen.lock().unwrap().as_slice(),
        [("c1".to_string(), RID.to_string(), true)]
    );
    assert!(
        sinks.get("score").is_none(),
        "only declared kinds have sinks"
    );
}

#[tokio::test]
async fn a_forwarded_report_is_answered_as_the_holders_family_settles_it() {
    let server = flotilla_testkit::NatsServer::start();
    let edge = async_nats::connect(server.url()).await.unwrap();
    let holder = async_nats::connect(server.url()).await.unwrap();
    let sinks = Sinks::new(&edge, [POLICY]);
    for (does, expect) in [
        (Does::Take, Ok(Outcome::Taken)),
        (Does::Retry, Ok(Outcome::Retry)),
        // A family that drops the ack did not take the report: delivered again.
        (Does::Drop, Ok(Outcome::Retry)),
        (Does::Refuse("not_accepted"), Err("not_accepted")),
        // A reason the edge does not know is counted as `refused`.
        (Does::Refuse("mystery"), Err("refused")),
    ] {
        let taker = Scripted::new(does);
        let (stop_tx, stop) = watch::channel(false);
        let takers = HashMap::from([(POLICY.name, taker.clone() as Arc<dyn Taker>)]);
        let task = tokio::spawn(serve(holder.clone(), takers, 1 << 20, stop));
        // Subscribed once a report comes back answered rather than timed out.
        let got = tokio::time::timeout(Duration::from_secs(10), async {
            loop {
                let got = route(&sinks, report("c7")).await;
                if !taker.seen.lock().unwrap().is_empty() {
                    return got;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
        .await
        .expect("the holder answers");
        match (got, expect) {
            (Ok(o), Ok(e)) => assert_eq!(o, e),
            (Err((refusal, _)), Err(reason)) => assert_eq!(refusal.reason, reason),
            (got, expect) => panic!("got {got:?}, expected {expect:?}"),
        }
        let seen = taker.seen.lock().unwrap().clone();
        assert_eq!(seen[0], ("c7".to_string(), RID.to_string(), true));
        stop_tx.send(true).unwrap();
        task.await.unwrap();
    }
}

#[tokio::test]
async fn a_kind_no_family_takes_is_refused_by_the_holder() {
    let server = flotilla_testkit::NatsServer::start();
    let edge = async_nats::connect(server.url()).await.unwrap();
    let (_stop_tx, stop) = watch::channel(false);
    let takers = HashMap::from([("msa", Scripted::new(Does::Take) as Arc<dyn Taker>)]);
    let task = tokio::spawn(serve(edge.clone(), takers, 1 << 20, stop));
    let sinks = Sinks::new(&edge, [POLICY]);
    let got = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match route(&sinks, report("c1")).await {
                Err(e) => return e,
                // Not subscribed yet: answered by no one.
                Ok(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
    })
    .await
    .expect("refused");
    assert_eq!(got.0.reason, "unknown_type");
    task.abort();
}

#[tokio::test]
async fn a_report_for_another_hub_is_handed_back_to_the_caller_unsent() {
    // No server at this address: routing must not wait on the holder — the caller owns the
    // forward and bounds how many are in flight.
    let nats = async_nats::ConnectOptions::new()
        .retry_on_initial_connect()
        .connect("127.0.0.1:1")
        .await
        .expect("a lazy client");
    let sinks = Sinks::new(&nats, [POLICY]);
    let (tx, mut rx) = oneshot::channel();
    let routed = tokio::time::timeout(
        Duration::from_secs(1),
        sinks
            .get(POLICY.name)
            .unwrap()
            .route(report("c1"), Ack::Forwarded(tx)),
    )
    .await
    .expect("routing returns at once");
    assert!(matches!(routed, Routed::Forwarding(_)), "{routed:?}");
    // Dropped unfinished: the ack is dropped unsettled, so the report comes again.
    drop(routed);
    assert!(rx.try_recv().is_err());
}
