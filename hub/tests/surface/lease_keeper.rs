//! A held unit's keeper against a real nats-server: it renews on its own (whatever else the
//! shard loop is waiting for), stops cleanly for a release, and stops the hub acting at once
//! when the lease turns out to be another hub's.

use flotilla_bus::jetstream::StreamOptions;
use flotilla_hub::ha::Fence;
use flotilla_hub::ha::keeper::{Keeper, Timing};
use flotilla_hub::ha::lease::{self, HubInfo, Leases};
use flotilla_testkit::{NatsServer, eventually};
use std::time::Duration;
use tokio::time::Instant;

const TIMING: Timing = Timing {
    renew: Duration::from_millis(300),
    ttl: Duration::from_millis(1500),
    margin: Duration::from_millis(300),
};

fn hub(id: &str) -> HubInfo {
    HubInfo {
        hub: id.into(),
        incarnation: format!("{id}-1"),
        grpc: String::new(),
        metrics: String::new(),
        draining: false,
        version: flotilla_api::version::VERSION.into(),
    }
}

async fn leases(nats: &NatsServer) -> Leases {
    let js = async_nats::jetstream::new(async_nats::connect(nats.url()).await.unwrap());
    let (kv, ttl) = lease::open_expiring(&js, lease::LEASES, TIMING.ttl, StreamOptions::default())
        .await
        .unwrap();
    assert_eq!(ttl, TIMING.ttl);
    Leases::new(kv, Duration::from_secs(2))
}

/// Takes unit 3 for `me` and starts its keeper.
async fn hold(leases: &Leases, me: &HubInfo) -> (Keeper, Fence, u64) {
    let sent = Instant::now();
    let epoch = leases.create(3, me).await.unwrap();
    let fence = Fence::new(3, epoch, TIMING.deadline(sent));
    let keeper = Keeper::spawn(
        leases.clone(),
        me.clone(),
        3,
        epoch,
        sent,
        fence.clone(),
        TIMING,
    );
    (keeper, fence, epoch)
}

#[tokio::test]
async fn a_keeper_holds_a_lease_past_its_ttl_and_stops_at_the_revision_it_wrote() {
    let nats = NatsServer::start();
    let leases = leases(&nats).await;
    let me = hub("a");
    let (keeper, fence, epoch) = hold(&leases, &me).await;
    // Three TTLs with nobody but the keeper renewing.
    tokio::time::sleep(TIMING.ttl * 3).await;
    assert!(
        fence.is_valid(),
        "the fence ran out while the keeper renewed"
    );
    assert!(keeper.revision() > epoch, "no renewal recorded");
    let (holder, stored) = leases.read(3).await.unwrap().expect("the lease is held");
    assert_eq!(holder, me);

    let last = keeper.stop().await;
    assert!(
        last >= stored,
        "stop returned {last}, the store holds {stored}"
    );
    tokio::time::sleep(TIMING.renew * 3).await;
    let (_, after) = leases.read(3).await.unwrap().expect("not expired yet");
    assert_eq!(after, last, "a stopped keeper renewed again");
    // Released at the revision stop returned: nothing moved it.
    leases.release(3, last).await.unwrap();
    assert!(leases.read(3).await.unwrap().is_none());
}

#[tokio::test]
async fn a_keeper_that_finds_its_lease_taken_ends_the_fence_at_once() {
    let nats = NatsServer::start();
    let leases = leases(&nats).await;
    let (keeper, fence, _) = hold(&leases, &hub("a")).await;
    // The lease is deleted behind the keeper's back and another hub takes it.
    // (A renewal may land between reading the revision and the delete: then try again.)
    eventually(Duration::from_secs(5), "the lease deleted", || async {
        leases.release(3, keeper.revision()).await.ok()
    })
    .await;
    leases.create(3, &hub("b")).await.unwrap();
    eventually(Duration::from_secs(5), "the fence ended", || async {
        (!fence.is_valid()).then_some(())
    })
    .await;
    // Well before the fence's own deadline.
    assert!(
        fence.deadline().is_some_and(|d| d > Instant::now()),
        "the fence only ran out; it should have been ended when the lease was seen taken"
    );
    let (holder, _) = leases.read(3).await.unwrap().unwrap();
    assert_eq!(
        holder.hub, "b",
        "the keeper overwrote the other hub's lease"
    );
}
