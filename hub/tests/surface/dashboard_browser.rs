//! The web dashboard in a real Chromium (Debian's `chromium` over WebDriver): what an operator
//! sees — a simulated fleet listed, a cluster whose agent stops turning Unknown on an open page
//! without a reload, a placement's decisions and reasons, a rollout followed live, a read-only
//! token that sees a rollout but cannot pause it.

use crate::browser;
use crate::common;
use crate::dashboard_fixture as dashboard;

use browser::{Browser, PAGE};
use common::tokens::{ADMIN, Bearer, VIEWER};
use common::*;
use dashboard::*;
use flotilla_api::ocm::{Document, parse_documents};
use flotilla_api::v1::cluster_service_client::ClusterServiceClient;
use flotilla_api::v1::cluster_set_service_client::ClusterSetServiceClient;
use flotilla_api::v1::placement_service_client::PlacementServiceClient;
use flotilla_api::v1::replica_set_service_client::ReplicaSetServiceClient;
use flotilla_api::v1::{ClusterNamesRequest, LabelClusterRequest};
use flotilla_hub::dashboard::history::Availability;
use flotilla_testkit::NatsServer;
use std::time::Duration;

/// Signs in at the form the browser was sent to.
async fn sign_in(b: &Browser, token: &str) {
    b.wait_until(
        "return !!document.getElementById('token')",
        "the sign-in form",
        PAGE,
    )
    .await;
    b.type_into("#token", token).await;
    b.click("#sign-in").await;
    b.wait_until(
        "return !document.getElementById('token')",
        "signed in",
        PAGE,
    )
    .await;
}

/// The fleet of these tests, set up as the admin through `hub`'s API: edge-1, edge-2 and
/// edge-3 accepted and Available, edge-pending waiting for an admin, the clusters `selected`
/// labelled for [`PLACEMENT`] ([`rollout`]), the default set bound to `default`, and the
/// placement and [`replica_set`] applied. The admin's cluster client, and the agents.
async fn fleet(
    hub: &flotilla_hub::Hub,
    nats: &NatsServer,
    selected: &[&str],
) -> (ClusterServiceClient<Admin>, Vec<TestAgent>) {
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{}", hub.grpc_addr))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut clusters = ClusterServiceClient::with_interceptor(channel.clone(), Bearer(ADMIN));
    let names = ["edge-1", "edge-2", "edge-3"];
    let agents: Vec<_> = names
        .iter()
        .chain(&["edge-pending"])
        .map(|n| start_agent(agent_config(n, &nats.url())))
        .collect();
    for n in names.iter().chain(&["edge-pending"]) {
        wait_state(hub, n, Availability::Pending).await;
    }
    clusters
        .accept_clusters(ClusterNamesRequest {
            names: names.iter().map(|n| n.to_string()).collect(),
            ..Default::default()
        })
        .await
        .unwrap();
    for n in names {
        wait_state(hub, n, Availability::Available).await;
    }
    for n in selected {
        clusters.label_cluster(rollout(n)).await.unwrap();
    }
    ClusterSetServiceClient::with_interceptor(channel.clone(), Bearer(ADMIN))
        .apply_binding(set_binding("default", "default"))
        .await
        .unwrap();
    let Ok(Document::Placement(p)) = parse_documents(PLACEMENT).remove(0) else {
        panic!("placement fixture");
    };
    PlacementServiceClient::with_interceptor(channel.clone(), Bearer(ADMIN))
        .apply_placement(p)
        .await
        .unwrap();
    ReplicaSetServiceClient::with_interceptor(channel.clone(), Bearer(ADMIN))
        .apply_replica_set(replica_set())
        .await
        .unwrap();
    (clusters, agents)
}

/// The admin's channel: every call with the admin token.
type Admin = tonic::service::interceptor::InterceptedService<tonic::transport::Channel, Bearer>;

/// Labels cluster `name` `rollout=yes`: [`PLACEMENT`] selects it.
fn rollout(name: &str) -> LabelClusterRequest {
    LabelClusterRequest {
        name: name.into(),
        set: [("rollout".to_string(), "yes".to_string())].into(),
        remove: vec![],
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn chromium_sees_the_fleet_live_a_placements_reasons_and_a_read_only_token_cannot_pause() {
    // The browser first: without one the test fails at once with the install hint.
    let b = Browser::start().await;
    let nats = NatsServer::start();
    let hub = hub(&nats, |c| {
        c.dashboard.live.sample_every = Duration::from_millis(500)
    })
    .await;
    let (_, mut agents) = fleet(&hub, &nats, &["edge-1", "edge-2"]).await;
    let base = format!("http://{}", hub.dashboard_addr.unwrap());

    // The clusters view lists the simulated fleet, after signing in with a read-only token.
    b.goto(&format!("{base}/clusters")).await;
    sign_in(&b, VIEWER).await;
    b.wait_until(
        "return ['edge-1','edge-2','edge-3','edge-pending'].every(n => \
         document.querySelector('#clusters tr[data-cluster=\"' + n + '\"]'))",
        "every cluster listed",
        PAGE,
    )
    .await;
    assert!(b.text("#who").await.contains("bob (read-only)"));
    assert_eq!(
        b.text("tr[data-cluster=\"edge-1\"] [data-field=availability]")
            .await,
        "Available"
    );
    assert_eq!(
        b.text("tr[data-cluster=\"edge-pending\"] [data-field=availability]")
            .await,
        "Pending"
    );
    b.screenshot("clusters").await;

    // A filter is a URL: the label selector of the API, and the back button comes back.
    b.goto(&format!("{base}/clusters?selector=rollout%3Dyes"))
        .await;
    assert_eq!(b.text("#count").await.split(' ').next(), Some("2"));
    b.goto(&format!("{base}/clusters/edge-1")).await;
    assert!(b.text("h1").await.contains("edge-1"));
    b.screenshot("cluster").await;
    tokio::time::timeout(PAGE, b.client.back())
        .await
        .unwrap()
        .unwrap();
    b.wait_until(
        "return location.search === '?selector=rollout%3Dyes'",
        "back on the filtered list",
        PAGE,
    )
    .await;

    // A placement's decisions and, per cluster, the filters and scores that made them.
    b.goto(&format!("{base}/placements/default/edge")).await;
    b.wait_until(
        "const d = document.getElementById('decisions').innerText; \
         return d.includes('edge-1') && d.includes('edge-2') && !d.includes('edge-3')",
        "the decisions",
        PAGE,
    )
    .await;
    let reasons = b.text("#reasons").await;
    assert!(
        reasons.contains("edge-3") && reasons.contains("failed"),
        "{reasons}"
    );
    assert!(reasons.contains("selected"), "{reasons}");
    b.screenshot("placement").await;

    // A read-only token sees the rollout but cannot pause it: the button is disabled, and a
    // form sent anyway is refused.
    b.goto(&format!("{base}/rollouts/default/settings")).await;
    b.wait_until(
        "return document.getElementById('action-pause').disabled",
        "a disabled pause",
        PAGE,
    )
    .await;
    assert!(b.text("#may-not").await.contains("bob (read-only) may not"));
    b.js("const p = document.getElementById('action-pause'); p.disabled = false; p.click(); return true").await;
    b.wait_until(
        "return document.title.startsWith('Forbidden')",
        "the refusal",
        PAGE,
    )
    .await;
    let rs = hub.replicasets().get("default", "settings").unwrap();
    assert!(
        !rs.hub.as_ref().is_some_and(|h| h.paused),
        "a read-only token paused a rollout"
    );

    // Live: a cluster whose agent stops turns Unknown on the open page, without a reload,
    // within two seconds of the hub seeing it.
    b.goto(&format!("{base}/clusters")).await;
    b.wait_until(
        "return document.body.dataset.live === 'on'",
        "the live feed",
        PAGE,
    )
    .await;
    b.js("window.__notReloaded = true; return true").await;
    agents.remove(2).stop().await;
    let hub_saw = wait_state(&hub, "edge-3", Availability::Unknown).await;
    b.wait_until(
        "return document.querySelector('tr[data-cluster=\"edge-3\"] [data-field=availability]').innerText === 'Unknown'",
        "edge-3 Unknown on the page",
        PAGE,
    )
    .await;
    let lag = hub_saw.elapsed();
    assert!(
        lag < Duration::from_secs(2),
        "the page showed Unknown {lag:?} after the hub"
    );
    assert_eq!(
        b.js("return window.__notReloaded === true").await,
        true,
        "the page reloaded"
    );

    // A cluster's works, and a work's conditions and feedback per manifest.
    b.goto(&format!("{base}/clusters/edge-1")).await;
    b.wait_until(
        "return !!document.querySelector('#works a')",
        "edge-1's work",
        PAGE,
    )
    .await;
    b.click("#works a").await;
    b.wait_until(
        "return document.body.innerText.includes('Manifests (1)') && \
         document.body.innerText.includes('ConfigMap default/settings')",
        "the work's manifest",
        PAGE,
    )
    .await;
    b.screenshot("work").await;

    // The overview counts it, and lists the transition.
    b.goto(&format!("{base}/")).await;
    assert_eq!(b.text("[data-count=\"Unknown\"]").await, "1");
    assert_eq!(b.text("[data-count=\"Pending\"]").await, "1");
    assert!(b.text("#transitions").await.contains("edge-3"));
    b.screenshot("overview").await;

    // An admin may pause. Signed out first — the sign-out's redirect to the sign-in page is
    // waited for, or it could land after the next page load and take the browser away from it.
    b.click("header form button").await;
    b.wait_until(
        "return !!document.getElementById('token')",
        "signed out",
        PAGE,
    )
    .await;
    b.goto(&format!("{base}/rollouts/default/settings")).await;
    sign_in(&b, ADMIN).await;
    b.click("#action-pause").await;
    b.wait_until(
        "return !!document.getElementById('notice')",
        "the pause done",
        PAGE,
    )
    .await;
    let rs = hub.replicasets().get("default", "settings").unwrap();
    assert!(
        rs.hub.as_ref().is_some_and(|h| h.paused),
        "the admin's pause did not land"
    );
    assert!(b.text("#state").await.contains("Paused"));
    b.screenshot("rollout").await;

    b.stop().await;
    for a in agents {
        a.stop().await;
    }
    hub.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn chromium_follows_a_placement_and_a_rollout_live_lists_works_and_accepts_a_registration() {
    let b = Browser::start().await;
    let nats = NatsServer::start();
    let hub = hub(&nats, |_| {}).await;
    let (mut clusters, agents) = fleet(&hub, &nats, &["edge-1"]).await;
    apply_addon(&hub).await;
    let base = format!("http://{}", hub.dashboard_addr.unwrap());

    // An admin accepts the pending registration from the overview.
    b.goto(&format!("{base}/")).await;
    sign_in(&b, ADMIN).await;
    b.wait_until(
        "return !!document.querySelector('tr[data-pending=\"edge-pending\"] button.accept')",
        "the Accept button",
        PAGE,
    )
    .await;
    b.screenshot("pending").await;
    b.click("tr[data-pending=\"edge-pending\"] button.accept")
        .await;
    b.wait_until(
        "return (document.getElementById('notice') || {}).innerText === 'Cluster edge-pending accepted.'",
        "the accept done",
        PAGE,
    )
    .await;
    wait_state(&hub, "edge-pending", Availability::Available).await;

    // A placement's page follows its decisions live: a cluster labelled joins them, the page
    // not reloaded; its scores' distributions per prioritizer are drawn.
    b.goto(&format!("{base}/placements/default/edge")).await;
    b.wait_until(
        "const d = document.getElementById('decisions').innerText; \
         return d.includes('edge-1') && !d.includes('edge-2') && document.body.dataset.live === 'on'",
        "edge-1 decided, and the live feed",
        PAGE,
    )
    .await;
    b.js("window.__notReloaded = true; return true").await;
    clusters.label_cluster(rollout("edge-2")).await.unwrap();
    b.wait_until(
        "return document.getElementById('decisions').innerText.includes('edge-2')",
        "edge-2 decided on the open page",
        PAGE,
    )
    .await;
    assert_eq!(
        b.js("return window.__notReloaded === true").await,
        true,
        "the page reloaded"
    );
    assert!(
        b.js("return document.querySelectorAll('#distributions figure').length")
            .await
            .as_u64()
            .unwrap()
            >= 2
    );
    b.screenshot("placement").await;

    // A rollout's page follows it live: paused through the API, it shows Paused without a
    // reload; its groups and its progress over time are drawn.
    b.goto(&format!("{base}/rollouts/default/settings")).await;
    b.wait_until(
        "return !!document.getElementById('progress-over-time') && \
         !!document.querySelector('.group-bar') && document.body.dataset.live === 'on'",
        "the rollout's plots",
        PAGE,
    )
    .await;
    b.js("window.__notReloaded = true; return true").await;
    hub.replicasets()
        .rollout("default", "settings", "pause")
        .await
        .unwrap();
    b.wait_until(
        "return document.getElementById('state').innerText.includes('Paused')",
        "Paused on the open page",
        PAGE,
    )
    .await;
    assert_eq!(b.js("return window.__notReloaded === true").await, true);
    b.screenshot("rollout").await;

    // The add-on's rollout, read-only.
    b.goto(&format!("{base}/addons/probe")).await;
    b.wait_until(
        "return !!document.getElementById('read-only') && \
         !!document.querySelector('section.progression')",
        "the add-on's rollout",
        PAGE,
    )
    .await;
    b.screenshot("addon").await;

    // Every work of the fleet; a filter is a URL, a work's page is a click, back comes back.
    b.goto(&format!("{base}/works")).await;
    b.wait_until(
        "return document.querySelectorAll('#works tbody tr').length >= 3",
        "the fleet's works",
        PAGE,
    )
    .await;
    b.type_into("input[name=cluster]", "edge-2").await;
    b.click("form.filters button").await;
    b.wait_until(
        "return location.search.includes('cluster=edge-2') && \
         [...document.querySelectorAll('#works tbody tr')].every(r => r.dataset.work.startsWith('edge-2/'))",
        "the works of edge-2",
        PAGE,
    )
    .await;
    b.screenshot("works").await;
    b.click("#works tbody tr td:nth-child(2) a").await;
    b.wait_until(
        "return location.pathname.startsWith('/clusters/edge-2/works/')",
        "a work's page",
        PAGE,
    )
    .await;
    tokio::time::timeout(PAGE, b.client.back())
        .await
        .unwrap()
        .unwrap();
    b.wait_until(
        "return location.pathname === '/works' && location.search.includes('cluster=edge-2')",
        "back on the filtered works",
        PAGE,
    )
    .await;

    b.stop().await;
    for a in agents {
        a.stop().await;
    }
    hub.stop().await;
}
