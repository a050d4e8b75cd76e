//! Versions (issue 49 §6): a hub refuses the registration of an agent whose version it does not
//! accept — older or newer than its window, or not a version — before anything is stored,
//! answering the request with what to upgrade; it counts the refusals and exports its own
//! version; `flotilla version` shows the CLI's and the hub's. A known cluster's own agent refused
//! is marked on the cluster (`AgentVersionAccepted=False` with the refusal, `(refused)` in
//! `get clusters -o wide`), and accepted again when a hub takes it.

mod common;

use common::*;
use flotilla_api::meta::{COND_AGENT_VERSION_ACCEPTED, find_condition};
use flotilla_api::v1::{
    Condition, ListClustersRequest, ManagedCluster, RegistrationRequest, RegistrationResponse,
    RegistrationState,
};
use flotilla_api::version::{self, Accepts, Version};
use flotilla_bus::envelope::{Event, types};
use flotilla_testkit::{NatsServer, binary};

/// The cluster's `AgentVersionAccepted` condition.
fn version_condition(c: &ManagedCluster) -> Option<Condition> {
    let conditions = &c.status.as_ref()?.conditions;
    find_condition(conditions, COND_AGENT_VERSION_ACCEPTED).cloned()
}

/// `flotilla get clusters -o wide`: the AGENT column of `cluster`'s row.
async fn agent_column(hub: &flotilla_hub::Hub, cluster: &str) -> String {
    let wide = tokio::process::Command::new(binary("flotilla"))
        .args(["--hub", &format!("http://{}", hub.grpc_addr)])
        .args(["get", "clusters", "-o", "wide"])
        .output()
        .await
        .unwrap();
    let table = String::from_utf8_lossy(&wide.stdout);
    let lines: Vec<&str> = table.lines().collect();
    let column = lines[0].find("AGENT").expect("an AGENT column");
    let row = lines
        .iter()
        .find(|l| l.starts_with(&format!("{cluster} ")))
        .unwrap_or_else(|| panic!("no row for {cluster} in {table}"));
    // The column runs up to the next one (KEY).
    let end = lines[0].find("KEY").expect("a KEY column");
    row[column..end].trim().to_string()
}

/// Registers `cluster` saying it is agent `agent_version`; the hub's answer.
async fn register(nats: &NatsServer, cluster: &str, agent_version: &str) -> RegistrationResponse {
    let client = async_nats::connect(nats.url()).await.unwrap();
    let request = RegistrationRequest {
        cluster_name: cluster.into(),
        agent_version: agent_version.into(),
        request_id: format!("req-{cluster}"),
        ..Default::default()
    };
    let ev = Event::new(types::registration_request(), "test", cluster, &request);
    let answer = tokio::time::timeout(
        SOON,
        client.request(
            flotilla_bus::subjects::register(cluster),
            ev.encode(1 << 20).unwrap(),
        ),
    )
    .await
    .expect("answered in time")
    .expect("answered");
    Event::decode(&answer.payload, 1 << 20)
        .unwrap()
        .decode_data("RegistrationResponse")
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hub_refuses_agents_outside_its_versions_saying_what_to_upgrade_and_the_cli_shows_both_versions()
 {
    let nats = NatsServer::start();
    let current = Version::current();
    let (major, minor) = current.line();
    // This hub accepts the next two minor lines only: this build's agents are too old.
    let accepts = Accepts::parse(&format!("{major}.{}-{major}.{}", minor + 1, minor + 2)).unwrap();
    let mut config = hub_config(&nats.url());
    config.router.agent_versions = accepts;
    let hub = start_hub(config).await;
    let window = format!("{major}.{}.x to {major}.{}.x", minor + 1, minor + 2);

    let old = register(&nats, "old", version::VERSION).await;
    assert_eq!(old.state(), RegistrationState::Rejected);
    assert_eq!(
        old.in_reply_to, "req-old",
        "the agent takes the answer as its own"
    );
    assert_eq!(
        old.message,
        format!(
            "agent version {current} is older than this hub accepts (hub {current} accepts \
             agents {window}): upgrade the agent (docs/operations.md#versions)"
        )
    );
    let newer = format!("{major}.{}.0", minor + 3);
    let new = register(&nats, "new", &newer).await;
    assert_eq!(new.state(), RegistrationState::Rejected);
    assert!(
        new.message.starts_with(&format!(
            "agent version {newer} is newer than this hub accepts"
        )) && new.message.contains("upgrade the hubs first"),
        "{}",
        new.message
    );
    let junk = register(&nats, "junk", "attacker").await;
    assert_eq!(
        junk.message,
        "agent \"attacker\" is not a version (major.minor.patch, such as 0.2.1)"
    );
    let fits = register(&nats, "fits", &format!("{major}.{}.4-rc1", minor + 1)).await;
    assert_eq!(fits.state(), RegistrationState::Pending, "{}", fits.message);

    // Nothing was stored for the refused ones.
    let mut clusters = clusters_client(&hub).await;
    let names: Vec<String> = clusters
        .list_clusters(ListClustersRequest::default())
        .await
        .unwrap()
        .into_inner()
        .items
        .into_iter()
        .filter_map(|c| c.metadata.map(|m| m.name))
        .collect();
    assert_eq!(names, ["fits"]);
    // The accepted agent's version is recorded on its cluster and counted.
    let fits_version = format!("{major}.{}.4-rc1", minor + 1);
    let metrics = metrics_text(&hub).await;
    for line in [
        "flotilla_hub_registration_refusals_total{reason=\"agent_version\"} 3".to_string(),
        format!("flotilla_hub_build_info{{version=\"{current}\"}} 1"),
        format!("flotilla_hub_agent_versions{{version=\"{fits_version}\"}} 1"),
    ] {
        assert!(
            metrics.lines().any(|l| l == line),
            "no {line:?} in\n{metrics}"
        );
    }

    assert_eq!(agent_column(&hub, "fits").await, fits_version);
    let fits = get(&mut clusters, "fits").await.unwrap();
    let accepted = version_condition(&fits).expect("AgentVersionAccepted on fits");
    assert_eq!(
        (accepted.status.as_str(), accepted.reason.as_str()),
        ("True", "AgentVersionAccepted"),
        "{accepted:?}"
    );

    let out = tokio::process::Command::new(binary("flotilla"))
        .args(["--hub", &format!("http://{}", hub.grpc_addr), "version"])
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines[0], format!("Client: flotilla {current}"));
    assert!(
        lines[1].starts_with(&format!("Hub:    flotilla-hub {current} (hub "))
            && lines[1].ends_with(&format!("; accepts agents {window})")),
        "{stdout}"
    );
    assert!(
        out.stderr.is_empty(),
        "no skew warning between one build's CLI and hub"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_accepted_agent_refused_for_its_version_stops_renewing_until_a_hub_takes_it_again() {
    let mut nats = NatsServer::start();
    let hub = start_hub(hub_config(&nats.url())).await;
    let mut api = clusters_client(&hub).await;
    let _agent = accepted_cluster(&mut api, &nats.url(), "edge-1").await;
    hub.stop().await;

    // The hubs come back accepting only newer agents; the agent reconnects and re-registers.
    nats.restart();
    let (major, minor) = Version::current().line();
    let mut narrowed = hub_config(&nats.url());
    narrowed.router.agent_versions =
        Accepts::parse(&format!("{major}.{}-{major}.{}", minor + 1, minor + 2)).unwrap();
    let hub = start_hub(narrowed).await;
    let mut api = clusters_client(&hub).await;
    wait_metric(
        &hub,
        "flotilla_hub_registration_refusals_total{reason=\"agent_version\"}",
    )
    .await;
    // Refused, it renews no more: its lease lapses and the cluster goes Unknown.
    wait_cluster(&mut api, "edge-1", "Unknown after its refusal", |c| {
        available(c).as_deref() == Some("Unknown")
    })
    .await;
    // And it stays so: three lease periods with no renewal (one would make it Available).
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    let c = get(&mut api, "edge-1").await.unwrap();
    assert_eq!(available(&c).as_deref(), Some("Unknown"), "{c:#?}");
    // The cluster says why: its own agent's refusal is recorded on it.
    let c = wait_cluster(&mut api, "edge-1", "marked refused", |c| {
        version_condition(c).is_some_and(|v| v.status == "False")
    })
    .await;
    let refused = version_condition(&c).expect("AgentVersionAccepted on edge-1");
    assert_eq!(
        (refused.status.as_str(), refused.reason.as_str()),
        ("False", "AgentVersionRefused"),
        "{refused:?}"
    );
    assert!(
        refused.message.starts_with(&format!(
            "agent version {} is older than this hub accepts",
            Version::current()
        )),
        "{refused:?}"
    );
    assert_eq!(
        agent_column(&hub, "edge-1").await,
        format!("{} (refused)", Version::current())
    );
    hub.stop().await;

    // A hub that accepts it again: it is taken at its next registration and renews again.
    let hub = start_hub(hub_config(&nats.url())).await;
    let mut api = clusters_client(&hub).await;
    wait_available(&mut api, "edge-1").await;
    wait_cluster(&mut api, "edge-1", "accepted again", |c| {
        version_condition(c).is_some_and(|v| v.status == "True")
    })
    .await;
    assert_eq!(
        agent_column(&hub, "edge-1").await,
        Version::current().to_string()
    );
    hub.stop().await;
}
