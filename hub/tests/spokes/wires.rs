//! The compatibility window of the one-subscription wire: an agent of the previous wire
//! (`flotilla.spec.<c>`, `flotilla.proxy.<c>`, `flotilla.kubeapi.<c>` and an inbox) and one of
//! the prefix wire (`flotilla.to.<c>.>` only) served by the same hub — each gets its work, answers
//! a proxied read and gets a work made while it was away through its resync — and the
//! subscriptions each holds, read from the server's monitoring endpoint (`/connz?subs=1`).

use crate::common;

use common::work::*;
use common::*;
use flotilla_testkit::{NatsOptions, NatsServer};
use std::time::Duration;

/// A JetStream server with its monitoring endpoint on; the endpoint's `host:port`.
fn monitored_nats() -> (NatsServer, String) {
    let port = flotilla_testkit::free_port();
    let nats = NatsServer::start_with(NatsOptions {
        jetstream: true,
        extra: format!("http: 127.0.0.1:{port}\n"),
        ..NatsOptions::default()
    });
    (nats, format!("127.0.0.1:{port}"))
}

/// The subjects the server holds subscriptions on for the connections named `name`.
pub async fn subscriptions_of(monitor: &str, name: &str) -> Vec<String> {
    subscriptions(monitor, |n| n == name).await
}

/// The subjects the server holds subscriptions on for the connections whose name `pick`s,
/// sorted.
async fn subscriptions(monitor: &str, pick: impl Fn(&str) -> bool) -> Vec<String> {
    let (status, body) = flotilla_testkit::http_get(monitor, "/connz?subs=1&limit=1024")
        .await
        .expect("the server's monitoring endpoint answers");
    assert_eq!(status, 200, "{body}");
    let connz: serde_json::Value = serde_json::from_str(&body).expect("connz is JSON");
    let mut subjects: Vec<String> = connz["connections"]
        .as_array()
        .expect("a list of connections")
        .iter()
        .filter(|c| c["name"].as_str().is_some_and(&pick))
        .flat_map(|c| {
            c["subscriptions_list"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .filter_map(|s| s.as_str().map(str::to_string))
        .collect();
    subjects.sort();
    subjects
}

/// An agent of the previous wire, as agents before the prefix were.
fn previous_wire_agent(name: &str, nats_url: &str) -> flotilla_agent::AgentConfig {
    let mut c = agent_config(name, nats_url);
    c.legacy_wire = true;
    c
}

#[tokio::test]
async fn agents_of_both_wires_get_works_proxied_reads_and_resyncs_from_one_hub() {
    let (nats, monitor) = monitored_nats();
    let hub = start_hub(hub_config(&nats.url())).await;
    let mut clusters = clusters_client(&hub).await;
    let old = accepted_agent(&mut clusters, previous_wire_agent("old-wire", &nats.url())).await;
    let new = accepted_agent(&mut clusters, agent_config("new-wire", &nats.url())).await;
    // The hub recorded each agent's wire with its cluster.
    for (name, prefix) in [("old-wire", false), ("new-wire", true)] {
        let c = get(&mut clusters, name).await.unwrap();
        assert_eq!(
            c.hub.unwrap().agent_listens_under_prefix,
            prefix,
            "{name}'s wire"
        );
    }

    let mut api = works_client(&hub).await;
    for name in ["old-wire", "new-wire"] {
        api.apply_work(config_map_work(name, "first"))
            .await
            .unwrap();
    }
    for name in ["old-wire", "new-wire"] {
        wait_work(&mut api, name, "first", "applied", |w| converged_at(w, 1)).await;
        let read = proxy(&mut api, name, "configmaps", "first").await.unwrap();
        assert_eq!(read.len(), 1, "{name}: {read:?}");
        assert_eq!(read[0]["data"]["k"], "v", "{name}");
    }

    // Subscriptions, as the server counts them: the new agent holds exactly one.
    let new_subs = subscriptions_of(&monitor, "flotilla-agent/new-wire").await;
    assert_eq!(new_subs, vec!["flotilla.to.new-wire.>".to_string()]);
    let old_subs = subscriptions_of(&monitor, "flotilla-agent/old-wire").await;
    for subject in [
        "flotilla.spec.old-wire",
        "flotilla.proxy.old-wire",
        "flotilla.kubeapi.old-wire",
    ] {
        assert!(
            old_subs.iter().any(|s| s == subject),
            "{subject} in {old_subs:?}"
        );
    }
    assert!(
        old_subs.iter().any(|s| s.starts_with("_INBOX.old-wire.")),
        "the previous wire's inbox in {old_subs:?}"
    );
    println!(
        "subscriptions per agent: previous wire {} {old_subs:?}, prefix wire {}",
        old_subs.len(),
        new_subs.len()
    );

    // A work made while the agents are away comes with their resyncs when they return.
    old.stop().await;
    new.stop().await;
    for name in ["old-wire", "new-wire"] {
        api.apply_work(config_map_work(name, "second"))
            .await
            .unwrap();
    }
    let old = start_agent(previous_wire_agent("old-wire", &nats.url()));
    let new = start_agent(agent_config("new-wire", &nats.url()));
    for name in ["old-wire", "new-wire"] {
        wait_work(&mut api, name, "second", "applied after the return", |w| {
            converged_at(w, 1)
        })
        .await;
    }
    old.stop().await;
    new.stop().await;
    hub.stop().await;
}

/// A hub restarted keeps each cluster's wire (it is in the cluster's stored record): specs
/// made after the restart reach an agent of each wire without a new registration first.
#[tokio::test]
async fn the_wire_of_each_cluster_survives_a_hub_restart() {
    let (nats, _monitor) = monitored_nats();
    let hub = start_hub(hub_config(&nats.url())).await;
    let mut clusters = clusters_client(&hub).await;
    let mut old_config = previous_wire_agent("old-r", &nats.url());
    let mut new_config = agent_config("new-r", &nats.url());
    // No periodic resync: what arrives after the restart is the hub's spec event.
    old_config.resync_interval = Duration::from_secs(3600);
    new_config.resync_interval = Duration::from_secs(3600);
    let old = accepted_agent(&mut clusters, old_config).await;
    let new = accepted_agent(&mut clusters, new_config).await;
    hub.stop().await;

    let hub = start_hub(hub_config(&nats.url())).await;
    for name in ["old-r", "new-r"] {
        let wire = hub
            .inventory
            .get(name)
            .map(|c| flotilla_hub_core::wire::of(Some(&c)));
        let want = if name == "new-r" {
            flotilla_bus::subjects::Wire::Prefix
        } else {
            flotilla_bus::subjects::Wire::Previous
        };
        assert_eq!(wire, Some(want), "{name} loaded with its wire");
    }
    let mut api = works_client(&hub).await;
    for name in ["old-r", "new-r"] {
        api.apply_work(config_map_work(name, "after"))
            .await
            .unwrap();
    }
    for name in ["old-r", "new-r"] {
        wait_work(&mut api, name, "after", "applied", |w| converged_at(w, 1)).await;
    }
    old.stop().await;
    new.stop().await;
    hub.stop().await;
}

/// `flotilla-sim --share-connections`: each simulated agent on a shared connection holds its one
/// subscription, and nothing else is subscribed on the connection (no muxed inbox: status
/// acknowledgements and answers come through each agent's own prefix).
#[tokio::test]
async fn simulated_agents_sharing_a_connection_hold_one_subscription_each() {
    let (nats, monitor) = monitored_nats();
    let mut config = hub_config(&nats.url());
    config.cluster.auto_accept.enabled = true;
    let hub = start_hub(config).await;
    let mut fleet_config = flotilla_sim::FleetConfig::new(&nats.url(), 6);
    fleet_config.pending_poll = Duration::from_millis(300);
    fleet_config.status_interval = Duration::from_millis(300);
    fleet_config.share_connections = 3;
    let fleet = flotilla_sim::Fleet::start(&fleet_config)
        .await
        .expect("fleet started");
    let mut clusters = clusters_client(&hub).await;
    for n in 0..6 {
        wait_available(&mut clusters, fleet.name(n)).await;
    }
    let mut works = works_client(&hub).await;
    works
        .apply_work(config_map_work(fleet.name(1), "cm"))
        .await
        .unwrap();
    wait_work(&mut works, fleet.name(1), "cm", "applied", |w| {
        converged_at(w, 1)
    })
    .await;
    let held = subscriptions(&monitor, |n| n.starts_with("flotilla-sim-shared-")).await;
    let mut want: Vec<String> = (0..6)
        .map(|n| flotilla_bus::subjects::to_all(fleet.name(n)))
        .collect();
    want.sort();
    assert_eq!(held, want, "one subscription per simulated agent");
    fleet.stop().await;
    hub.stop().await;
}
