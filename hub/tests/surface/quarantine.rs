//! A record that does not decode never stops the hub (issue 43): one undecodable value in every
//! bucket a hub loads, and one over a live work, and the hub starts, serves the rest, says
//! which records it skipped, keeps the bad work's resources on its cluster through a resync,
//! and `flotilla-hub doctor` lists and removes them.

use crate::common;

use common::work::{cond, config_map_work, get_work, works_client};
use common::*;
use flotilla_api::work::conditions::APPLIED;
use flotilla_bus::jetstream::{self as js, StreamOptions};
use flotilla_hub::catalog;
use flotilla_testkit::NatsServer;
use std::time::Duration;

/// Field 1 with wire type 7: no protobuf message decodes it.
const UNDECODABLE: &[u8] = b"\x0f";

fn configmap(name: &str) -> flotilla_api::work::ManifestId {
    flotilla_api::work::manifest_id(&serde_json::json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"namespace": "default", "name": name}
    }))
    .unwrap()
}

/// `/debug/store` of a hub.
async fn debug_store(hub: &flotilla_hub::Hub) -> serde_json::Value {
    let (status, body) = flotilla_testkit::http_get(&hub.metrics_addr.to_string(), "/debug/store")
        .await
        .expect("GET /debug/store");
    assert_eq!(status, 200, "{body}");
    serde_json::from_str(&body).unwrap()
}

fn doctor(nats: &NatsServer, extra: &[&str]) -> (i32, String, String) {
    let out = std::process::Command::new(flotilla_testkit::binary("flotilla-hub"))
        .args(["--nats-url", &nats.url(), "doctor"])
        .args(extra)
        .output()
        .expect("flotilla-hub doctor runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test]
async fn a_hub_starts_over_records_that_do_not_decode_skips_them_and_says_which() {
    use flotilla_agent::backend::Backend;
    let nats = NatsServer::start();
    let hub = start_hub(hub_config(&nats.url())).await;
    let mut api = clusters_client(&hub).await;
    let mut works = works_client(&hub).await;
    let backend = sim_backend();
    let agent = accepted_agent_on(
        &mut api,
        agent_config("edge-1", &nats.url()),
        backend.clone(),
    )
    .await;
    for name in ["good", "bad"] {
        works
            .apply_work(config_map_work("edge-1", name))
            .await
            .unwrap();
        common::work::wait_work(&mut works, "edge-1", name, "applied", |w| {
            cond(w, APPLIED).as_deref() == Some("True")
        })
        .await;
    }
    hub.stop().await;

    // One bad record in every bucket the hub loads, and one over the live work `bad`.
    let client = async_nats::connect(nats.url()).await.unwrap();
    let jetstream = async_nats::jetstream::new(client);
    for (bucket, _) in catalog::BUCKETS {
        let kv = js::ensure_kv(&jetstream, bucket, 1, StreamOptions::default())
            .await
            .unwrap();
        kv.put("bad-record", UNDECODABLE.into()).await.unwrap();
    }
    let works_kv = jetstream.get_key_value("works").await.unwrap();
    let bad_revision = works_kv
        .put("edge-1.bad", UNDECODABLE.into())
        .await
        .unwrap();

    // The hub starts, and serves the rest.
    let hub = start_hub(hub_config(&nats.url())).await;
    let mut works = works_client(&hub).await;
    assert!(get_work(&mut works, "edge-1", "good").await.is_some());
    assert!(get_work(&mut works, "edge-1", "bad").await.is_none());
    let mut api = clusters_client(&hub).await;
    wait_available(&mut api, "edge-1").await;

    // It says which records it skipped: every bucket's, once the controllers loaded theirs.
    let listed = flotilla_testkit::eventually(SOON, "every bad record quarantined", || {
        let hub = &hub;
        async move {
            let doc = debug_store(hub).await;
            let listed = doc["quarantined"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| {
                    format!(
                        "{}/{}",
                        r["bucket"].as_str().unwrap(),
                        r["key"].as_str().unwrap()
                    )
                })
                .collect::<Vec<_>>();
            let all = catalog::BUCKETS
                .iter()
                .all(|(b, _)| listed.contains(&format!("{b}/bad-record")))
                && listed.contains(&"works/edge-1.bad".to_string());
            all.then_some(listed)
        }
    })
    .await;
    let metrics = metrics_text(&hub).await;
    assert!(
        metrics.contains(&format!(
            "flotilla_hub_store_quarantined {}",
            catalog::BUCKETS.len() + 1
        )),
        "{listed:?}"
    );

    // The agent resyncs (started again): the bad work's resources stay on its cluster, the
    // good one's too.
    drop(agent);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let _agent = start_agent_on(agent_config("edge-1", &nats.url()), backend.clone());
    wait_available(&mut api, "edge-1").await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    for name in ["good", "bad"] {
        assert!(
            backend.get(&configmap(name)).await.unwrap().is_some(),
            "ConfigMap {name} deleted from the cluster"
        );
    }

    // The doctor lists them, and removes one by its revision.
    let (code, out, err) = doctor(&nats, &[]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        out.contains(&format!("works\tedge-1.bad\t{bad_revision}")),
        "{out}"
    );
    assert!(err.contains("doctor --remove"), "{err}");
    let stale = format!("works/edge-1.bad@{}", bad_revision + 1000);
    let (code, _, err) = doctor(&nats, &["--remove", &stale]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("latest revision"), "{err}");
    let removal = format!("works/edge-1.bad@{bad_revision}");
    let (_, out, err) = doctor(&nats, &["--remove", &removal, "-o", "json"]);
    let doc: serde_json::Value =
        serde_json::from_str(&out).unwrap_or_else(|_| panic!("{out}{err}"));
    let left: Vec<&str> = doc["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["key"].as_str().unwrap())
        .collect();
    assert!(!left.contains(&"edge-1.bad"), "{left:?}");
    assert_eq!(left.len(), catalog::BUCKETS.len());
    // The running hub sees the removal.
    flotilla_testkit::eventually(SOON, "the removed record no longer quarantined", || {
        let hub = &hub;
        async move {
            let gone = !debug_store(hub).await["quarantined"]
                .as_array()
                .unwrap()
                .iter()
                .any(|r| r["key"] == "edge-1.bad");
            gone.then_some(())
        }
    })
    .await;
    hub.stop().await;
}
