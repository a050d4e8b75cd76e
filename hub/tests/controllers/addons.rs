//! Add-ons over simulated clusters: installed by placement on exactly the selected clusters,
//! config changes rolled out canary-first and stopped at maxFailures, lease health, bad input.
//! The OCM document shapes (`lifecycle: self`, v1beta1, add-ons managed by someone else) are in
//! `addon_documents.rs`.

use crate::common;

use common::addon::{apply, renew_lease};
use common::addon_fleet::*;
use common::*;
use flotilla_api::addon::{self, conditions as cond};
use flotilla_api::meta::condition_status;
use flotilla_api::v1::{GetAddOnRequest, ListAddOnsRequest};
use flotilla_hub::Hub;
use flotilla_testkit::NatsServer;
use std::time::Duration;
#[tokio::test]
async fn enabling_by_placement_installs_on_exactly_the_selected_clusters() {
    let nats = NatsServer::start();
    let hub = start_hub(hub_config(&nats.url())).await;
    let names = ["edge-1", "edge-2", "edge-3", "edge-4"];
    let agents = setup(&hub, &nats, &names, &["edge-1", "edge-2", "edge-3"]).await;
    apply(&hub, &addon_yaml("", ALL)).await.unwrap();

    wait_until("installed on edge-1..3", || {
        (installed(&hub) == ["edge-1", "edge-2", "edge-3"]).then_some(())
    })
    .await;
    // Each gets its work, rendered for it, and the add-on becomes available (the Deployment's
    // readiness, OCM's WorkloadAvailability probe).
    for c in ["edge-1", "edge-2", "edge-3"] {
        let m = wait_until(&format!("{c} available"), || {
            let m = hub.addons().get_cluster_addon(c, "probe")?;
            (mca_condition(&m, cond::AVAILABLE).as_deref() == Some("True")).then_some(m)
        })
        .await;
        let w = work_of(&hub, c).unwrap();
        let v = config_map(&w).unwrap();
        let first = &w
            .spec
            .as_ref()
            .unwrap()
            .workload
            .as_ref()
            .unwrap()
            .manifests[0]
            .raw;
        assert!(
            String::from_utf8_lossy(first).contains(r#""kind":"Namespace""#),
            "the install namespace comes first"
        );
        assert_eq!(v["data"]["cluster"], c);
        assert_eq!(v["data"]["level"], "1");
        assert_eq!(
            w.metadata.as_ref().unwrap().labels[addon::ADDON_NAME_LABEL],
            "probe"
        );
        let st = m.status.clone().unwrap();
        assert_eq!(
            mca_condition(&m, cond::MANIFEST_APPLIED).as_deref(),
            Some("True")
        );
        assert_eq!(mca_condition(&m, cond::CONFIGURED).as_deref(), Some("True"));
        assert_eq!(st.namespace, addon::DEFAULT_INSTALL_NAMESPACE);
        assert_eq!(st.health_check.as_ref().unwrap().mode, "Customized");
        assert_eq!(st.config_references.len(), 2, "{st:#?}");
        for r in &st.config_references {
            assert_eq!(r.desired_config, r.last_applied_config, "{r:?}");
            assert_eq!(r.desired_config.as_ref().unwrap().spec_hash.len(), 64);
        }
    }
    assert!(work_of(&hub, "edge-4").is_none());

    // A cluster leaving the placement loses the add-on and its work; one joining gets it.
    label(&hub, "edge-2", &[], &["rollout"]).await;
    label(&hub, "edge-4", &[("rollout", "yes")], &[]).await;
    wait_until("edge-2 out, edge-4 in", || {
        (installed(&hub) == ["edge-1", "edge-3", "edge-4"] && work_of(&hub, "edge-2").is_none())
            .then_some(())
    })
    .await;
    wait_until("edge-4's work", || level(&hub, "edge-4")).await;

    // The add-on's own status: its defaults with their hashes, one progression, complete.
    let cma = wait_until("progression complete", || {
        let c = hub.addons().get_addon("probe")?;
        let p = c.status.as_ref()?.install_progressions.first()?.clone();
        (p.total == 3 && p.updated == 3).then_some(c)
    })
    .await;
    let st = cma.status.clone().unwrap();
    assert_eq!(st.default_config_references.len(), 2);
    assert_eq!(
        condition_status(&st.install_progressions[0].conditions, "Progressing"),
        Some("False")
    );

    // Deleting the add-on removes every installation and work.
    api(&hub)
        .await
        .delete_cluster_management_add_on(GetAddOnRequest {
            namespace: String::new(),
            name: "probe".into(),
        })
        .await
        .unwrap();
    wait_until("everything removed", || {
        (installed(&hub).is_empty() && names.iter().all(|c| work_of(&hub, c).is_none()))
            .then_some(())
    })
    .await;
    for a in agents {
        a.stop().await;
    }
    hub.stop().await;
}

const CANARY_ONE_AT_A_TIME: &str = "          type: Progressive
          progressive:
            mandatoryDecisionGroups: [{groupName: canary}]
            maxConcurrency: 1
            maxFailures: 1";

const ONE_AT_A_TIME_ONE_FAILURE: &str = "          type: Progressive
          progressive:
            maxConcurrency: 1
            maxFailures: 1";

#[tokio::test]
async fn a_config_change_rolls_out_canary_first_and_stops_at_max_failures() {
    let nats = NatsServer::start();
    let hub = start_hub(hub_config(&nats.url())).await;
    let names = ["edge-1", "edge-2", "edge-3", "edge-4", "edge-5"];
    let agents = setup(&hub, &nats, &names, &names).await;
    apply(&hub, &addon_yaml("", CANARY_ONE_AT_A_TIME))
        .await
        .unwrap();
    wait_until("installed everywhere at level 1", || {
        names
            .iter()
            .all(|c| level(&hub, c).as_deref() == Some("1"))
            .then_some(())
    })
    .await;
    wait_until("all available", || {
        names
            .iter()
            .all(|c| {
                hub.addons()
                    .get_cluster_addon(c, "probe")
                    .is_some_and(|m| mca_condition(&m, cond::AVAILABLE).as_deref() == Some("True"))
            })
            .then_some(())
    })
    .await;

    // A config change: the canary (edge-1) first, then one cluster at a time.
    apply(&hub, &deployment_config("probe-config", "2"))
        .await
        .unwrap();
    let mut order = Vec::new();
    wait_until("level 2 everywhere", || {
        let updated: Vec<&str> = names
            .iter()
            .copied()
            .filter(|c| level(&hub, c).as_deref() == Some("2"))
            .collect();
        for c in &updated {
            if !order.contains(c) {
                order.push(*c);
            }
        }
        let in_flight = updated
            .iter()
            .filter(|c| {
                work_of(&hub, c).is_none_or(|w| {
                    !common::work::converged_at(&w, w.metadata.as_ref().unwrap().generation)
                })
            })
            .count();
        assert!(in_flight <= 1, "{in_flight} clusters updating at once");
        (updated.len() == names.len()).then_some(())
    })
    .await;
    assert_eq!(order[0], "edge-1", "the canary went first: {order:?}");

    // A template that fails to apply: with maxFailures 1, two clusters fail and the rollout
    // stops there; the others keep the working version.
    apply(
        &hub,
        &template(
            "probe-broken",
            r#""sim.flotilla.io/apply-error": "quota exceeded""#,
        ),
    )
    .await
    .unwrap();
    apply(
        &hub,
        &addon_yaml(
            "{group: addon.open-cluster-management.io, resource: addontemplates, name: probe-broken}",
            ONE_AT_A_TIME_ONE_FAILURE,
        ),
    )
    .await
    .unwrap();
    let broken = |c: &str| {
        work_of(&hub, c).is_some_and(|w| {
            w.metadata.as_ref().unwrap().annotations[addon::CONFIG_SPEC_HASH_ANNOTATION]
                .contains("probe-broken")
        })
    };
    let cma = wait_until("the rollout stopped", || {
        let c = hub.addons().get_addon("probe")?;
        let p = c.status.as_ref()?.install_progressions.first()?.clone();
        (!p.stopped_reason.is_empty()).then_some(c)
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let failed: Vec<&str> = names.iter().copied().filter(|c| broken(c)).collect();
    assert_eq!(
        failed.len(),
        2,
        "exactly maxFailures + 1 clusters tried: {failed:?}"
    );
    let p = &cma.status.as_ref().unwrap().install_progressions[0];
    assert_eq!(
        condition_status(&p.conditions, "Progressing"),
        Some("False"),
        "{p:#?}"
    );
    for c in &failed {
        let m = hub.addons().get_cluster_addon(c, "probe").unwrap();
        assert_eq!(
            mca_condition(&m, cond::MANIFEST_APPLIED).as_deref(),
            Some("False")
        );
    }
    for c in names.iter().filter(|c| !failed.contains(c)) {
        assert_eq!(
            level(&hub, c).as_deref(),
            Some("2"),
            "{c} kept the working version"
        );
    }
    for a in agents {
        a.stop().await;
    }
    hub.stop().await;
}

const LEASE_TEMPLATE: &str = r#"
apiVersion: addon.open-cluster-management.io/v1alpha1
kind: AddOnTemplate
metadata:
  name: leased-v1
  annotations: {addon.flotilla.io/health-check: Lease}
spec:
  addonName: leased
  agentSpec:
    workload:
      manifests:
        - apiVersion: v1
          kind: ConfigMap
          metadata: {name: leased, namespace: default}
          data: {cluster: "{{CLUSTER_NAME}}"}
---
apiVersion: addon.open-cluster-management.io/v1alpha1
kind: ClusterManagementAddOn
metadata: {name: leased}
spec:
  supportedConfigs:
    - group: addon.open-cluster-management.io
      resource: addontemplates
      defaultConfig: {name: leased-v1}
"#;

#[tokio::test]
async fn lease_health_goes_false_after_the_grace_and_comes_back() {
    let nats = NatsServer::start();
    let mut config = hub_config(&nats.url());
    config.families.addons.lease_grace = Duration::from_secs(2);
    let hub = start_hub(config).await;
    let mut clusters = clusters_client(&hub).await;
    let agents = accepted_fleet(&mut clusters, &nats.url(), &["edge-1"]).await;
    apply(&hub, LEASE_TEMPLATE).await.unwrap();
    let mut a = api(&hub).await;
    a.enable_add_on(flotilla_api::v1::EnableAddOnRequest {
        name: "leased".into(),
        clusters: vec!["edge-1".into()],
        ..Default::default()
    })
    .await
    .unwrap();
    let available = |hub: &Hub| {
        hub.addons()
            .get_cluster_addon("edge-1", "leased")
            .and_then(|m| {
                let c = m
                    .status
                    .as_ref()?
                    .conditions
                    .iter()
                    .find(|c| c.r#type == cond::AVAILABLE)?
                    .clone();
                Some((c.status, c.reason))
            })
    };
    // No lease yet: Unknown, as OCM reports a missing lease.
    let (s, reason) = wait_until("lease not found", || available(&hub)).await;
    assert_eq!(
        (s.as_str(), reason.as_str()),
        ("Unknown", "ManagedClusterAddOnLeaseNotFound")
    );
    let m = hub.addons().get_cluster_addon("edge-1", "leased").unwrap();
    assert_eq!(
        m.status
            .as_ref()
            .unwrap()
            .health_check
            .as_ref()
            .unwrap()
            .mode,
        "Lease"
    );

    let renewing = renew_lease(
        async_nats::connect(nats.url()).await.unwrap(),
        "leased",
        "edge-1",
    );
    wait_until("available while renewing", || {
        (available(&hub)?.0 == "True").then_some(())
    })
    .await;
    // The agent stops: after the grace the add-on is not available (OCM: False,
    // ManagedClusterAddOnLeaseUpdateStopped).
    renewing.abort();
    let stopped = tokio::time::Instant::now();
    let (s, reason) = wait_until("lease went stale", || {
        available(&hub).filter(|(s, _)| s != "True")
    })
    .await;
    assert!(
        stopped.elapsed() >= Duration::from_millis(1500),
        "stale too early"
    );
    assert_eq!(
        (s.as_str(), reason.as_str()),
        ("False", "ManagedClusterAddOnLeaseUpdateStopped")
    );
    // It resumes: available again at once.
    let renewing = renew_lease(
        async_nats::connect(nats.url()).await.unwrap(),
        "leased",
        "edge-1",
    );
    wait_until("available again", || {
        (available(&hub)?.0 == "True").then_some(())
    })
    .await;

    // A lease for an add-on that is not installed there is refused (and changes nothing).
    let bogus = renew_lease(
        async_nats::connect(nats.url()).await.unwrap(),
        "leased",
        "edge-9",
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    bogus.abort();
    assert!(hub.addons().get_cluster_addon("edge-9", "leased").is_none());
    wait_metric(&hub, "reason=\"not_installed\"").await;

    // The cluster goes away (its agent stops): the add-on follows the cluster to Unknown.
    renewing.abort();
    for a in agents {
        a.stop().await;
    }
    let (s, reason) = wait_until("cluster unknown", || {
        available(&hub).filter(|(s, _)| s == "Unknown")
    })
    .await;
    assert_eq!(s, "Unknown");
    assert_ne!(reason, "ManagedClusterAddOnLeaseNotFound");
    hub.stop().await;
}

#[tokio::test]
async fn bad_add_on_input_is_refused_naming_the_field_and_disturbs_nothing() {
    let nats = NatsServer::start();
    let hub = start_hub(hub_config(&nats.url())).await;
    let agents = setup(&hub, &nats, &["edge-1", "edge-2"], &["edge-1", "edge-2"]).await;
    apply(&hub, &addon_yaml("", ALL)).await.unwrap();
    wait_until("installed", || (installed(&hub).len() == 2).then_some(())).await;
    let mut a = api(&hub).await;

    // A ManagedClusterAddOn for an unknown cluster, an unknown add-on, an unsupported config.
    let mca = |cluster: &str, name: &str, configs: &str| {
        format!(
            r#"
apiVersion: addon.open-cluster-management.io/v1alpha1
kind: ManagedClusterAddOn
metadata: {{name: {name}, namespace: {cluster}}}
spec:
  configs: [{configs}]
"#
        )
    };
    let e = apply(&hub, &mca("edge-9", "probe", "")).await.unwrap_err();
    assert!(e.message().contains("metadata.namespace"), "{e:?}");
    let e = apply(&hub, &mca("edge-1", "nope", "")).await.unwrap_err();
    assert!(e.message().contains("metadata.name"), "{e:?}");
    let e = apply(
        &hub,
        &mca(
            "edge-1",
            "probe",
            "{group: example.com, resource: widgets, name: w}",
        ),
    )
    .await
    .unwrap_err();
    assert!(e.message().contains("spec.configs[0]"), "{e:?}");

    // A template with an unknown variable, given to edge-2 only: edge-2 says so, edge-1 keeps
    // running.
    apply(
        &hub,
        &template("probe-typo", "").replace("{{LEVEL}}", "{{LEVLE}}"),
    )
    .await
    .unwrap();
    apply(
        &hub,
        &mca(
            "edge-2",
            "probe",
            "{group: addon.open-cluster-management.io, resource: addontemplates, name: probe-typo}",
        ),
    )
    .await
    .unwrap();
    let m = wait_until("edge-2 reports the render error", || {
        let m = hub.addons().get_cluster_addon("edge-2", "probe")?;
        (mca_condition(&m, cond::MANIFEST_APPLIED).as_deref() == Some("False")).then_some(m)
    })
    .await;
    let c = m
        .status
        .clone()
        .unwrap()
        .conditions
        .into_iter()
        .find(|c| c.r#type == cond::MANIFEST_APPLIED)
        .unwrap();
    assert!(c.message.contains("LEVLE"), "{c:?}");
    assert_eq!(
        level(&hub, "edge-2").as_deref(),
        Some("1"),
        "edge-2 kept its work"
    );
    assert_eq!(level(&hub, "edge-1").as_deref(), Some("1"));
    // It counts as a failure in the rollout: with maxFailures 0 the progression stops, naming it.
    let p = wait_until("the progression names the failure", || {
        let c = hub.addons().get_addon("probe")?;
        let p = c.status.as_ref()?.install_progressions.first()?.clone();
        p.stopped_reason.contains("edge-2").then_some(p)
    })
    .await;
    assert_eq!(p.failed, 1, "{p:#?}");
    assert_eq!(
        condition_status(&p.conditions, "Progressing"),
        Some("False")
    );

    // A second add-on whose template declares the same ConfigMap: refused on its clusters,
    // naming the resource and the other add-on; the first add-on is untouched.
    apply(
        &hub,
        &template("clash-v1", "")
            .replace("addonName: probe", "addonName: clash")
            .replace("{{LEVEL}}", "x"),
    )
    .await
    .unwrap();
    apply(
        &hub,
        r#"
apiVersion: addon.open-cluster-management.io/v1alpha1
kind: ClusterManagementAddOn
metadata: {name: clash}
spec:
  supportedConfigs:
    - group: addon.open-cluster-management.io
      resource: addontemplates
      defaultConfig: {name: clash-v1}
"#,
    )
    .await
    .unwrap();
    a.enable_add_on(flotilla_api::v1::EnableAddOnRequest {
        name: "clash".into(),
        clusters: vec!["edge-1".into()],
        ..Default::default()
    })
    .await
    .unwrap();
    let m = wait_until("the clash is reported", || {
        let m = hub.addons().get_cluster_addon("edge-1", "clash")?;
        (mca_condition(&m, cond::MANIFEST_APPLIED).as_deref() == Some("False")).then_some(m)
    })
    .await;
    let msg = m
        .status
        .clone()
        .unwrap()
        .conditions
        .into_iter()
        .find(|c| c.r#type == cond::MANIFEST_APPLIED)
        .unwrap()
        .message;
    assert!(msg.contains("probe") && msg.contains("ConfigMap"), "{msg}");
    assert!(
        hub.works
            .get(&format!("edge-1/{}", addon::work_name("clash", 0)))
            .is_none()
    );
    assert_eq!(level(&hub, "edge-1").as_deref(), Some("1"));

    // Names that cannot be NATS subject tokens, and a config in use, are refused.
    let e = apply(
        &hub,
        &addon_yaml("", ALL).replace("name: probe}", "name: pro.be}"),
    )
    .await
    .unwrap_err();
    assert!(e.message().contains("metadata.name"), "{e:?}");
    let e = a
        .delete_add_on_template(GetAddOnRequest {
            namespace: String::new(),
            name: "probe-v1".into(),
        })
        .await
        .unwrap_err();
    assert!(e.message().contains("in use"), "{e:?}");
    let listed = a
        .list_managed_cluster_add_ons(ListAddOnsRequest {
            namespace: "edge-1".into(),
            name: String::new(),
        })
        .await
        .unwrap()
        .into_inner()
        .items;
    assert_eq!(listed.len(), 2);
    for a in agents {
        a.stop().await;
    }
    hub.stop().await;
}

/// AddOnTemplate `big-v1` of add-on `big`: ConfigMaps `blob-<i>` of the given sizes in KiB.
fn big_template(kib: &[usize]) -> String {
    let maps: String = kib
        .iter()
        .enumerate()
        .map(|(i, k)| {
            format!(
                "        - {{apiVersion: v1, kind: ConfigMap, metadata: {{name: blob-{i}, namespace: \
                 open-cluster-management-agent-addon}}, data: {{x: {}}}}}\n",
                "y".repeat(k * 1024)
            )
        })
        .collect();
    format!(
        r#"
apiVersion: addon.open-cluster-management.io/v1alpha1
kind: AddOnTemplate
metadata: {{name: big-v1}}
spec:
  addonName: big
  agentSpec:
    workload:
      manifests:
{maps}"#
    )
}

const BIG_ADDON: &str = r#"
apiVersion: addon.open-cluster-management.io/v1alpha1
kind: ClusterManagementAddOn
metadata: {name: big}
spec:
  supportedConfigs:
    - group: addon.open-cluster-management.io
      resource: addontemplates
      defaultConfig: {name: big-v1}
"#;

/// The names of the ConfigMaps in each of add-on `big`'s works on edge-1, by work index, once
/// every work was rendered from the template as it is now, applied and available, and the
/// add-on says so; `None` before.
fn big_works_settled(hub: &Hub) -> Option<Vec<Vec<String>>> {
    let m = hub.addons().get_cluster_addon("edge-1", "big")?;
    let st = m.status.as_ref()?;
    let progressing = st
        .conditions
        .iter()
        .find(|c| c.r#type == cond::PROGRESSING)?;
    if progressing.reason != "Completed" || mca_condition(&m, cond::AVAILABLE)? != "True" {
        return None;
    }
    let mut works = Vec::new();
    for (key, w) in hub.works.with_prefix("edge-1/") {
        let Some(i) = addon::work_index("big", key.trim_start_matches("edge-1/")) else {
            continue;
        };
        let maps: Vec<String> = w
            .spec()?
            .workload
            .as_ref()?
            .manifests
            .iter()
            .filter_map(|m| serde_json::from_slice::<serde_json::Value>(&m.raw).ok())
            .filter(|v| v["kind"] == "ConfigMap")
            .map(|v| {
                v["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string()
            })
            .collect();
        works.push((i, maps));
    }
    works.sort();
    Some(works.into_iter().map(|(_, maps)| maps).collect())
}

fn blob_names(range: std::ops::Range<usize>) -> Vec<String> {
    range.map(|i| format!("blob-{i}")).collect()
}

/// The uid of ConfigMap `name` on the simulated cluster (a re-created object has a new one).
async fn uid_on(agent: &TestAgent, name: &str) -> Option<String> {
    let id = flotilla_api::work::ManifestId {
        group: String::new(),
        version: "v1".into(),
        kind: "ConfigMap".into(),
        namespace: addon::DEFAULT_INSTALL_NAMESPACE.into(),
        name: name.into(),
    };
    use flotilla_agent::backend::Backend;
    let obj = agent.backend.get(&id).await.unwrap()?;
    obj["metadata"]["uid"].as_str().map(str::to_string)
}

#[tokio::test]
async fn an_add_on_over_one_works_size_is_split_into_deploy_works_that_follow_its_upgrades() {
    let nats = NatsServer::start();
    let hub = start_hub(hub_config(&nats.url())).await;
    let mut clusters = clusters_client(&hub).await;
    let agents = accepted_fleet(&mut clusters, &nats.url(), &["edge-1"]).await;
    let agent = &agents[0];
    // Seven ConfigMaps of 100 KiB: four fit in the first work (after the install namespace),
    // three go into the second.
    apply(&hub, &big_template(&[100; 7])).await.unwrap();
    apply(&hub, BIG_ADDON).await.unwrap();
    api(&hub)
        .await
        .enable_add_on(flotilla_api::v1::EnableAddOnRequest {
            name: "big".into(),
            clusters: vec!["edge-1".into()],
            ..Default::default()
        })
        .await
        .unwrap();
    let split = vec![blob_names(0..4), blob_names(4..7)];
    wait_until("two works applied", || {
        big_works_settled(&hub).filter(|w| *w == split)
    })
    .await;
    let moved = uid_on(agent, "blob-4")
        .await
        .expect("blob-4 is on the cluster");
    let kept = uid_on(agent, "blob-0")
        .await
        .expect("blob-0 is on the cluster");

    // An upgrade that fits in one work: blob-4 is handed over to the first work, blob-5 and
    // blob-6 go with the second work, which is deleted.
    apply(&hub, &big_template(&[1, 1, 1, 1, 100]))
        .await
        .unwrap();
    wait_until("one work", || {
        big_works_settled(&hub).filter(|w| *w == [blob_names(0..5)])
    })
    .await;
    wait_until("the second work is gone", || {
        hub.works
            .get(&format!("edge-1/{}", addon::work_name("big", 1)))
            .is_none()
            .then_some(())
    })
    .await;
    let mut gone = Vec::new();
    for name in ["blob-5", "blob-6"] {
        gone.push(uid_on(agent, name).await);
    }
    assert_eq!(
        gone,
        [None, None],
        "the dropped manifests went with their work"
    );
    assert_eq!(
        uid_on(agent, "blob-4").await.as_deref(),
        Some(moved.as_str()),
        "the handed-over manifest was never deleted"
    );
    assert_eq!(
        uid_on(agent, "blob-0").await.as_deref(),
        Some(kept.as_str())
    );

    // Growing again: the second work takes blob-4..6 over before the first lets blob-4 go.
    apply(&hub, &big_template(&[100; 7])).await.unwrap();
    wait_until("two works again", || {
        big_works_settled(&hub).filter(|w| *w == split)
    })
    .await;
    assert_eq!(
        uid_on(agent, "blob-4").await.as_deref(),
        Some(moved.as_str())
    );

    // Uninstalling removes every work of the add-on, and their resources.
    api(&hub)
        .await
        .delete_managed_cluster_add_on(GetAddOnRequest {
            namespace: "edge-1".into(),
            name: "big".into(),
        })
        .await
        .unwrap();
    wait_until("every work removed", || {
        hub.works
            .with_prefix("edge-1/")
            .iter()
            .all(|(k, _)| !k.starts_with("edge-1/addon-big-"))
            .then_some(())
    })
    .await;
    for i in 0..7 {
        let name = format!("blob-{i}");
        let mut left = uid_on(agent, &name).await;
        let deadline = tokio::time::Instant::now() + SOON;
        while left.is_some() && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(100)).await;
            left = uid_on(agent, &name).await;
        }
        assert_eq!(left, None, "{name} left on the cluster");
    }
    for a in agents {
        a.stop().await;
    }
    hub.stop().await;
}

/// AddOnTemplate `name` of add-on `hooked`: a ConfigMap, and a pre-delete hook Job `cleanup`
/// with `extra_annotations`.
fn hooked_template(name: &str, extra_annotations: &str) -> String {
    format!(
        r#"
apiVersion: addon.open-cluster-management.io/v1alpha1
kind: AddOnTemplate
metadata: {{name: {name}}}
spec:
  addonName: hooked
  agentSpec:
    workload:
      manifests:
        - apiVersion: v1
          kind: ConfigMap
          metadata: {{name: hooked-settings, namespace: open-cluster-management-agent-addon}}
          data: {{cluster: "{{{{CLUSTER_NAME}}}}"}}
        - apiVersion: batch/v1
          kind: Job
          metadata:
            name: cleanup
            namespace: open-cluster-management-agent-addon
            annotations: {{addon.open-cluster-management.io/addon-pre-delete: "", {extra_annotations}}}
          spec:
            template:
              spec:
                restartPolicy: Never
                containers: [{{name: cleanup, image: example.com/cleanup:1}}]
"#
    )
}

const HOOKED_ADDON: &str = r#"
apiVersion: addon.open-cluster-management.io/v1alpha1
kind: ClusterManagementAddOn
metadata: {name: hooked}
spec:
  supportedConfigs:
    - group: addon.open-cluster-management.io
      resource: addontemplates
      defaultConfig: {name: hooked-v1}
"#;

/// The `HookManifestCompleted` condition of add-on `hooked` on `cluster`: (status, reason,
/// message), with whether the installation is marked deleted.
fn hook_condition(hub: &Hub, cluster: &str) -> Option<(String, String, String, bool)> {
    let m = hub.addons().get_cluster_addon(cluster, "hooked")?;
    let deleted = m.metadata.as_ref()?.deletion_timestamp.is_some();
    let c = m
        .status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.r#type == cond::HOOK_MANIFEST_COMPLETED)?
        .clone();
    Some((c.status, c.reason, c.message, deleted))
}

fn has_work(hub: &Hub, cluster: &str, name: &str) -> bool {
    hub.works.get(&format!("{cluster}/{name}")).is_some()
}

#[tokio::test]
async fn a_pre_delete_hook_runs_before_the_add_on_goes_and_a_failed_one_keeps_it_saying_why() {
    let nats = NatsServer::start();
    let hub = start_hub(hub_config(&nats.url())).await;
    let mut clusters = clusters_client(&hub).await;
    let agents = accepted_fleet(&mut clusters, &nats.url(), &["edge-1", "edge-2"]).await;
    apply(&hub, &hooked_template("hooked-v1", ""))
        .await
        .unwrap();
    apply(
        &hub,
        &hooked_template("hooked-failing", r#""sim.flotilla.io/job-outcome": fail"#),
    )
    .await
    .unwrap();
    apply(&hub, HOOKED_ADDON).await.unwrap();
    // edge-1 gets the working hook, edge-2 the failing one.
    apply(
        &hub,
        r#"
apiVersion: addon.open-cluster-management.io/v1alpha1
kind: ManagedClusterAddOn
metadata: {name: hooked, namespace: edge-1}
spec: {}
---
apiVersion: addon.open-cluster-management.io/v1alpha1
kind: ManagedClusterAddOn
metadata: {name: hooked, namespace: edge-2}
spec:
  configs: [{group: addon.open-cluster-management.io, resource: addontemplates, name: hooked-failing}]
"#,
    )
    .await
    .unwrap();
    let deploy = addon::work_name("hooked", 0);
    let hook = addon::pre_delete_work_name("hooked");
    for c in ["edge-1", "edge-2"] {
        wait_until(&format!("installed on {c}"), || {
            let m = hub.addons().get_cluster_addon(c, "hooked")?;
            (mca_condition(&m, cond::AVAILABLE)? == "True").then_some(())
        })
        .await;
        assert!(has_work(&hub, c, &deploy));
        assert!(!has_work(&hub, c, &hook), "the hook runs only on removal");
    }

    // Removing it from edge-1: the hook work is applied first; the add-on stays, marked
    // deleted, its condition naming the Job, its agent works still there.
    let mut a = api(&hub).await;
    let remove = |cluster: &str| GetAddOnRequest {
        namespace: cluster.into(),
        name: "hooked".into(),
    };
    a.delete_managed_cluster_add_on(remove("edge-1"))
        .await
        .unwrap();
    let (status, reason, message, deleted) = hook_condition(&hub, "edge-1").unwrap();
    assert!(deleted);
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "HookManifestIsNotCompleted")
    );
    assert!(
        message.contains("Job open-cluster-management-agent-addon/cleanup"),
        "{message}"
    );
    assert!(has_work(&hub, "edge-1", &hook));
    assert!(has_work(&hub, "edge-1", &deploy));
    // Re-applying it meanwhile is refused, naming why.
    let e = apply(
        &hub,
        "apiVersion: addon.open-cluster-management.io/v1alpha1\nkind: ManagedClusterAddOn\nmetadata: {name: hooked, namespace: edge-1}\nspec: {}\n",
    )
    .await
    .unwrap_err();
    assert_eq!(e.code(), tonic::Code::FailedPrecondition, "{e:?}");
    assert!(e.message().contains("being deleted"), "{e:?}");
    // The Job completes: the add-on and all its works go.
    wait_until("edge-1's add-on and works gone", || {
        (hub.addons().get_cluster_addon("edge-1", "hooked").is_none()
            && !has_work(&hub, "edge-1", &deploy)
            && !has_work(&hub, "edge-1", &hook))
        .then_some(())
    })
    .await;

    // edge-2's hook fails: removal waits, and says which Job failed and why.
    a.delete_managed_cluster_add_on(remove("edge-2"))
        .await
        .unwrap();
    let (_, _, message, deleted) = wait_until("edge-2's hook failed", || {
        hook_condition(&hub, "edge-2").filter(|(_, reason, _, _)| reason == "HookManifestFailed")
    })
    .await;
    assert!(deleted);
    assert!(
        message.contains(
            "Job open-cluster-management-agent-addon/cleanup failed (BackoffLimitExceeded)"
        ),
        "{message}"
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        hub.addons().get_cluster_addon("edge-2", "hooked").is_some(),
        "a failed hook keeps the add-on"
    );
    assert!(has_work(&hub, "edge-2", &deploy));
    // The cluster goes: nothing can run there any more, so nothing is waited for.
    clusters
        .delete_cluster(flotilla_api::v1::DeleteClusterRequest {
            name: "edge-2".into(),
        })
        .await
        .unwrap();
    wait_until("edge-2's add-on gone with its cluster", || {
        hub.addons()
            .get_cluster_addon("edge-2", "hooked")
            .is_none()
            .then_some(())
    })
    .await;

    // Deleting the add-on itself runs the hook of each installation first: the add-on stays,
    // marked deleted (and cannot be applied again meanwhile), until the last one is gone.
    apply(
        &hub,
        "apiVersion: addon.open-cluster-management.io/v1alpha1\nkind: ManagedClusterAddOn\nmetadata: {name: hooked, namespace: edge-1}\nspec: {}\n",
    )
    .await
    .unwrap();
    wait_until("installed on edge-1 again", || {
        let m = hub.addons().get_cluster_addon("edge-1", "hooked")?;
        (mca_condition(&m, cond::AVAILABLE)? == "True").then_some(())
    })
    .await;
    a.delete_cluster_management_add_on(GetAddOnRequest {
        namespace: String::new(),
        name: "hooked".into(),
    })
    .await
    .unwrap();
    let cma = hub
        .addons()
        .get_addon("hooked")
        .expect("kept while its hook runs");
    assert!(cma.metadata.as_ref().unwrap().deletion_timestamp.is_some());
    assert!(hook_condition(&hub, "edge-1").is_some_and(|(_, _, _, deleted)| deleted));
    let e = apply(&hub, HOOKED_ADDON).await.unwrap_err();
    assert_eq!(e.code(), tonic::Code::FailedPrecondition, "{e:?}");
    wait_until("the add-on, its installation and works gone", || {
        (hub.addons().get_addon("hooked").is_none()
            && hub.addons().get_cluster_addon("edge-1", "hooked").is_none()
            && !has_work(&hub, "edge-1", &deploy)
            && !has_work(&hub, "edge-1", &hook))
        .then_some(())
    })
    .await;
    // Gone: it can be applied afresh.
    apply(&hub, HOOKED_ADDON).await.unwrap();
    for a in agents {
        a.stop().await;
    }
    hub.stop().await;
}
