//! The fetch pool with the real worker binary: one fetch per host at a time, hosts in parallel,
//! a queued request replaced by a newer one for the same GitRepo, and a real fetch through it.

mod support;

use std::{net::TcpListener, time::Duration, time::Instant};

use flotilla_gitfetch::pool::{Pool, PoolError};
use support::{Daemon, Repo, main, request};

/// A server that accepts and never answers: each fetch against it lasts the 1 s deadline.
fn silent() -> (TcpListener, String) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("git://127.0.0.1:{}/r", l.local_addr().unwrap().port());
    (l, url)
}

fn pool() -> Pool {
    let mut worker = support::worker();
    worker.timeout = Duration::from_secs(1);
    Pool::spawn(worker, 2, 16, std::future::pending()).0
}

#[tokio::test]
async fn one_host_is_fetched_from_one_at_a_time_and_two_hosts_at_once() {
    let base = tempfile::tempdir().unwrap();
    let pool = pool();
    let (_a, url_a) = silent();
    let (_b, url_b) = silent();
    let c = |n: &str| base.path().join(n);

    let started = Instant::now();
    let (x, y) = tokio::join!(
        pool.fetch("ns.x", c("x"), request(&url_a, main("main"), &[])),
        pool.fetch("ns.y", c("y"), request(&url_a, main("main"), &[])),
    );
    let same_host = started.elapsed();
    assert!(matches!(x, Err(PoolError::Launch(_))) && matches!(y, Err(PoolError::Launch(_))));
    assert!(
        same_host >= Duration::from_millis(1900),
        "serialised: {same_host:?}"
    );

    let started = Instant::now();
    let (x, y) = tokio::join!(
        pool.fetch("ns.x", c("x"), request(&url_a, main("main"), &[])),
        pool.fetch("ns.y", c("y"), request(&url_b, main("main"), &[])),
    );
    let two_hosts = started.elapsed();
    assert!(x.is_err() && y.is_err());
    assert!(
        two_hosts < Duration::from_millis(1900),
        "in parallel: {two_hosts:?}"
    );
}

#[tokio::test]
async fn a_queued_request_is_replaced_by_a_newer_one_for_the_same_gitrepo() {
    let base = tempfile::tempdir().unwrap();
    let pool = pool();
    let (_a, url) = silent();
    let c = |n: &str| base.path().join(n);
    // join! polls in order, so the pool receives: x (starts), k (queued: host busy), k again.
    let (x, old, new) = tokio::join!(
        pool.fetch("ns.x", c("x"), request(&url, main("main"), &[])),
        pool.fetch("ns.k", c("k"), request(&url, main("main"), &[])),
        pool.fetch("ns.k", c("k"), request(&url, main("main"), &[])),
    );
    assert!(matches!(old, Err(PoolError::Superseded)), "{old:?}");
    assert!(matches!(x, Err(PoolError::Launch(_))), "{x:?}");
    assert!(matches!(new, Err(PoolError::Launch(_))), "{new:?}");
}

#[tokio::test]
async fn a_fetch_through_the_pool_answers_like_the_worker() {
    let base = tempfile::tempdir().unwrap();
    let repo = Repo::init(base.path(), "r");
    repo.write("apps/web/cm.yaml", "kind: ConfigMap\n");
    let head = repo.commit("one");
    let daemon = Daemon::serve(base.path());
    let pool = pool();
    let done = tokio::time::timeout(
        Duration::from_secs(30),
        pool.fetch(
            "ns.r",
            base.path().join("c.git"),
            request(&daemon.url("r"), main("main"), &["apps"]),
        ),
    )
    .await
    .unwrap()
    .unwrap();
    assert_eq!(done.result.commit, head);
}
