//! Add-on documents in every OCM shape over simulated clusters: `lifecycle: self`, v1beta1
//! documents, add-ons managed by someone else.

use crate::common;

use common::addon::{apply, renew_lease};
use common::addon_fleet::*;
use common::*;
use flotilla_api::addon::{self, conditions as cond};
use flotilla_hub::Hub;
use flotilla_testkit::NatsServer;

/// A hand-made ManagedClusterAddOn of `probe` on `cluster`.
fn hand_made(cluster: &str) -> String {
    format!(
        r#"
apiVersion: addon.open-cluster-management.io/v1alpha1
kind: ManagedClusterAddOn
metadata: {{name: probe, namespace: {cluster}}}
spec: {{}}
"#
    )
}

#[tokio::test]
async fn lifecycle_self_creates_no_installation_from_the_strategy_but_serves_hand_made_ones() {
    let nats = NatsServer::start();
    let hub = start_hub(hub_config(&nats.url())).await;
    let agents = setup(&hub, &nats, &["edge-1", "edge-2"], &["edge-1", "edge-2"]).await;
    let managed_by_self = addon_yaml("", ALL).replace(
        "metadata: {name: probe}",
        "metadata: {name: probe, annotations: {addon.open-cluster-management.io/lifecycle: self}}",
    );
    apply(&hub, &managed_by_self).await.unwrap();
    // The add-on's own manager enables it on edge-1 only.
    apply(&hub, &hand_made("edge-1")).await.unwrap();
    wait_until("the hand-made installation available", || {
        let m = hub.addons().get_cluster_addon("edge-1", "probe")?;
        (mca_condition(&m, cond::AVAILABLE).as_deref() == Some("True")).then_some(())
    })
    .await;
    assert_eq!(
        level(&hub, "edge-1").as_deref(),
        Some("1"),
        "rendered as usual"
    );
    assert_eq!(
        installed(&hub),
        ["edge-1"],
        "the placement also selects edge-2, but the hub creates no installation for a `self` add-on"
    );
    assert!(work_of(&hub, "edge-2").is_none());

    // Handed back to the add-on manager: the install strategy applies again.
    apply(&hub, &addon_yaml("", ALL)).await.unwrap();
    wait_until("installed on both selected clusters", || {
        (installed(&hub) == ["edge-1", "edge-2"] && level(&hub, "edge-2").is_some()).then_some(())
    })
    .await;
    for a in agents {
        a.stop().await;
    }
    hub.stop().await;
}

/// The add-on as OCM's v1beta1 writes it: installed by hand (Manual), its template and config
/// as `defaultConfigs`, one config group without a default.
const ADDON_V1BETA1: &str = r#"
apiVersion: addon.open-cluster-management.io/v1beta1
kind: ClusterManagementAddOn
metadata: {name: probe}
spec:
  addOnMeta: {displayName: Probe, description: a test add-on}
  defaultConfigs:
    - {group: addon.open-cluster-management.io, resource: addontemplates, name: probe-v1}
    - {group: addon.open-cluster-management.io, resource: addondeploymentconfigs, namespace: default, name: probe-config}
    - {group: example.com, resource: probesettings, name: __reserved_no_default__}
"#;

/// Its v1alpha1 twin.
const ADDON_V1ALPHA1: &str = r#"
apiVersion: addon.open-cluster-management.io/v1alpha1
kind: ClusterManagementAddOn
metadata: {name: probe}
spec:
  addOnMeta: {displayName: Probe, description: a test add-on}
  supportedConfigs:
    - {group: addon.open-cluster-management.io, resource: addontemplates, defaultConfig: {name: probe-v1}}
    - {group: addon.open-cluster-management.io, resource: addondeploymentconfigs, defaultConfig: {namespace: default, name: probe-config}}
    - {group: example.com, resource: probesettings}
"#;

#[tokio::test]
async fn a_v1beta1_add_on_behaves_like_its_v1alpha1_twin() {
    let nats = NatsServer::start();
    let hub = start_hub(hub_config(&nats.url())).await;
    let agents = setup(&hub, &nats, &["edge-1", "edge-2"], &[]).await;
    apply(&hub, ADDON_V1BETA1).await.unwrap();
    let Ok(flotilla_api::ocm::Document::ClusterManagementAddOn(twin)) =
        flotilla_api::ocm::parse_documents(ADDON_V1ALPHA1).remove(0)
    else {
        panic!("the twin parses")
    };
    assert_eq!(
        hub.addons().get_addon("probe").unwrap().spec,
        twin.spec,
        "stored as its v1alpha1 twin"
    );
    // The same installation twice: v1beta1 on edge-1 (the install namespace in OCM's
    // annotation), v1alpha1 on edge-2.
    apply(
        &hub,
        r#"
apiVersion: addon.open-cluster-management.io/v1beta1
kind: ManagedClusterAddOn
metadata:
  name: probe
  namespace: edge-1
  annotations: {addon.open-cluster-management.io/v1alpha1-install-namespace: probe-ns}
spec: {}
"#,
    )
    .await
    .unwrap();
    apply(
        &hub,
        r#"
apiVersion: addon.open-cluster-management.io/v1alpha1
kind: ManagedClusterAddOn
metadata: {name: probe, namespace: edge-2}
spec: {installNamespace: probe-ns}
"#,
    )
    .await
    .unwrap();
    let mut seen = Vec::new();
    for c in ["edge-1", "edge-2"] {
        let m = wait_until(&format!("{c} available"), || {
            let m = hub.addons().get_cluster_addon(c, "probe")?;
            (mca_condition(&m, cond::AVAILABLE).as_deref() == Some("True")).then_some(m)
        })
        .await;
        assert_eq!(m.spec.as_ref().unwrap().install_namespace, "probe-ns");
        assert_eq!(m.status.as_ref().unwrap().namespace, "probe-ns");
        let w = work_of(&hub, c).unwrap();
        let first: serde_json::Value = serde_json::from_slice(
            &w.spec
                .as_ref()
                .unwrap()
                .workload
                .as_ref()
                .unwrap()
                .manifests[0]
                .raw,
        )
        .unwrap();
        assert_eq!(
            (first["kind"].as_str(), first["metadata"]["name"].as_str()),
            (Some("Namespace"), Some("probe-ns")),
            "the install namespace from the {c} document"
        );
        let mut shown = config_map(&w).unwrap();
        shown["data"]["cluster"] = serde_json::Value::Null;
        seen.push(shown);
    }
    assert_eq!(seen[0], seen[1], "both render the same but for the cluster");
    for a in agents {
        a.stop().await;
    }
    hub.stop().await;
}

/// OCM's helloworld shape: an add-on whose own manager deploys its agent (no AddOnTemplate),
/// installed by placement `edge`.
const EXTERNAL: &str = r#"
apiVersion: addon.open-cluster-management.io/v1alpha1
kind: ClusterManagementAddOn
metadata: {name: helloworld}
spec:
  addOnMeta: {displayName: helloworld, description: helloworld is an example addon}
  supportedConfigs:
    - group: addon.open-cluster-management.io
      resource: addondeploymentconfigs
      defaultConfig: {name: probe-config, namespace: default}
  installStrategy:
    type: Placements
    placements:
      - {namespace: default, name: edge}
"#;

#[tokio::test]
async fn an_add_on_managed_by_someone_else_is_installed_by_placement_and_healthy_by_its_lease() {
    let nats = NatsServer::start();
    let hub = start_hub(hub_config(&nats.url())).await;
    let agents = setup(&hub, &nats, &["edge-1", "edge-2"], &["edge-1"]).await;
    apply(&hub, EXTERNAL)
        .await
        .expect("an add-on without an AddOnTemplate is accepted");
    let installations = |hub: &Hub| {
        let mut v: Vec<String> = hub
            .addons()
            .list_cluster_addons("", "helloworld")
            .iter()
            .map(|m| m.metadata.as_ref().unwrap().namespace.clone())
            .collect();
        v.sort();
        v
    };
    // Installed where the placement decides, with no lease yet: Unknown, and nothing rendered.
    let m = wait_until("edge-1 installed, its lease not found", || {
        let m = hub.addons().get_cluster_addon("edge-1", "helloworld")?;
        (mca_condition(&m, cond::AVAILABLE).as_deref() == Some("Unknown")).then_some(m)
    })
    .await;
    assert_eq!(installations(&hub), ["edge-1"]);
    let st = m.status.clone().unwrap();
    assert_eq!(st.namespace, addon::DEFAULT_INSTALL_NAMESPACE);
    assert_eq!(st.health_check.as_ref().unwrap().mode, "Lease");
    assert_eq!(
        mca_condition(&m, cond::MANIFEST_APPLIED),
        None,
        "no work, so no ManifestApplied: {st:?}"
    );
    assert!(
        hub.works
            .get(&format!("edge-1/{}", addon::work_name("helloworld", 0)))
            .is_none()
    );
    // The add-on's own status: its default config with OCM's spec hash, no rollout.
    let cma = wait_until("the default config's hash", || {
        let c = hub.addons().get_addon("helloworld")?;
        (!c.status.as_ref()?.default_config_references.is_empty()).then_some(c)
    })
    .await;
    let st = cma.status.clone().unwrap();
    let hash = &st.default_config_references[0]
        .desired_config
        .as_ref()
        .unwrap()
        .spec_hash;
    assert_eq!(hash.len(), 64, "{st:?}");
    assert!(st.install_progressions.is_empty(), "{st:?}");

    // Its agent renews its lease over NATS: Available.
    let renewing = renew_lease(
        async_nats::connect(nats.url()).await.unwrap(),
        "helloworld",
        "edge-1",
    );
    wait_until("edge-1 available by its lease", || {
        let m = hub.addons().get_cluster_addon("edge-1", "helloworld")?;
        (mca_condition(&m, cond::AVAILABLE).as_deref() == Some("True")).then_some(())
    })
    .await;

    // The placement follows labels as for a template add-on.
    label(&hub, "edge-2", &[("rollout", "yes")], &[]).await;
    label(&hub, "edge-1", &[], &["rollout"]).await;
    wait_until("moved to edge-2", || {
        (installations(&hub) == ["edge-2"]).then_some(())
    })
    .await;

    // A template add-on whose template is taken out of its configs: its work goes (someone
    // else deploys its agent now), its installation stays.
    apply(&hub, &addon_yaml("", ALL)).await.unwrap();
    wait_until("the template add-on's work on edge-2", || {
        level(&hub, "edge-2")
    })
    .await;
    apply(
        &hub,
        &EXTERNAL.replace("metadata: {name: helloworld}", "metadata: {name: probe}"),
    )
    .await
    .unwrap();
    wait_until("its work removed", || {
        work_of(&hub, "edge-2").is_none().then_some(())
    })
    .await;
    assert_eq!(installed(&hub), ["edge-2"]);
    renewing.abort();
    for a in agents {
        a.stop().await;
    }
    hub.stop().await;
}

/// A `coordination.k8s.io/v1` Lease of add-on `name` in `namespace`, renewed `ago` ago.
fn spoke_lease(name: &str, namespace: &str, ago: std::time::Duration) -> serde_json::Value {
    let renewed = flotilla_api::meta::timestamp(std::time::SystemTime::now() - ago);
    let t = flotilla_api::meta::rfc3339(&renewed).replace('Z', ".000000Z");
    serde_json::json!({
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"holderIdentity": name, "leaseDurationSeconds": 60, "renewTime": t},
    })
}

async fn write_lease(agent: &TestAgent, lease: &serde_json::Value) {
    use flotilla_agent::backend::{Backend, Strategy};
    // The add-on's own manager made its namespace.
    let ns = serde_json::json!({"apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": lease["metadata"]["namespace"]}});
    agent
        .backend
        .apply(
            &flotilla_api::work::manifest_id(&ns).unwrap(),
            &ns,
            &Strategy::Update,
        )
        .await
        .unwrap();
    agent
        .backend
        .apply(
            &flotilla_api::work::manifest_id(lease).unwrap(),
            lease,
            &Strategy::Update,
        )
        .await
        .unwrap();
}

/// `Some` when `a` is `want`.
fn is(a: Option<(String, String)>, want: (&str, &str)) -> Option<()> {
    a.filter(|(s, r)| (s.as_str(), r.as_str()) == want)
        .map(|_| ())
}

/// `Available` of the add-on on `cluster`: (status, reason).
fn availability(hub: &Hub, cluster: &str, addon: &str) -> Option<(String, String)> {
    let m = hub.addons().get_cluster_addon(cluster, addon)?;
    let st = m.status.as_ref()?;
    let c = flotilla_api::meta::find_condition(&st.conditions, cond::AVAILABLE)?;
    Some((c.status.clone(), c.reason.clone()))
}

#[tokio::test]
async fn an_add_on_managed_by_someone_else_is_healthy_by_its_lease_on_the_spoke() {
    let nats = NatsServer::start();
    let hub = start_hub(hub_config(&nats.url())).await;
    let agents = setup(&hub, &nats, &["edge-1", "edge-2"], &["edge-1"]).await;
    apply(&hub, EXTERNAL).await.unwrap();
    wait_until("edge-1: no lease on the spoke yet", || {
        is(
            availability(&hub, "edge-1", "helloworld"),
            ("Unknown", "ManagedClusterAddOnLeaseNotFound"),
        )
    })
    .await;
    let ns = addon::DEFAULT_INSTALL_NAMESPACE;
    let edge1 = &agents[0];
    // The add-on's own agent renews its Lease on the spoke: Available, as OCM's agent says.
    write_lease(
        edge1,
        &spoke_lease("helloworld", ns, std::time::Duration::ZERO),
    )
    .await;
    wait_until("edge-1 available by its spoke lease", || {
        is(
            availability(&hub, "edge-1", "helloworld"),
            ("True", "ManagedClusterAddOnLeaseUpdated"),
        )
    })
    .await;
    // A Lease of the same name in another namespace, or another add-on's, changes nothing.
    write_lease(
        edge1,
        &spoke_lease("helloworld", "elsewhere", std::time::Duration::ZERO),
    )
    .await;
    // It stops renewing: after OCM's grace (5 × 60 s on the spoke's clock) it is not available.
    write_lease(
        edge1,
        &spoke_lease("helloworld", ns, std::time::Duration::from_secs(301)),
    )
    .await;
    wait_until("edge-1 stopped", || {
        is(
            availability(&hub, "edge-1", "helloworld"),
            ("False", "ManagedClusterAddOnLeaseUpdateStopped"),
        )
    })
    .await;
    // The Lease is deleted: unknown again.
    use flotilla_agent::backend::Backend;
    let id =
        flotilla_api::work::manifest_id(&spoke_lease("helloworld", ns, std::time::Duration::ZERO))
            .unwrap();
    assert!(edge1.backend.delete(&id).await.unwrap());
    wait_until("edge-1 lease gone", || {
        is(
            availability(&hub, "edge-1", "helloworld"),
            ("Unknown", "ManagedClusterAddOnLeaseNotFound"),
        )
    })
    .await;
    // The cluster's agent is told only about the add-ons installed on it: edge-2's agent,
    // where it is not installed, reports no add-on; once the placement moves there it does.
    write_lease(
        &agents[1],
        &spoke_lease("helloworld", ns, std::time::Duration::ZERO),
    )
    .await;
    assert_eq!(
        availability(&hub, "edge-2", "helloworld"),
        None,
        "not installed on edge-2"
    );
    label(&hub, "edge-2", &[("rollout", "yes")], &[]).await;
    label(&hub, "edge-1", &[], &["rollout"]).await;
    wait_until("edge-2 available by its spoke lease", || {
        is(
            availability(&hub, "edge-2", "helloworld"),
            ("True", "ManagedClusterAddOnLeaseUpdated"),
        )
    })
    .await;
    // Uninstalled from edge-1: its cluster no longer lists the add-on's lease.
    wait_until("edge-1 no longer watches the add-on's lease", || {
        let c = hub.inventory.get("edge-1")?;
        c.hub
            .as_ref()
            .is_some_and(|h| h.external_addons.is_empty() && h.addon_health.is_empty())
            .then_some(())
    })
    .await;
    for a in agents {
        a.stop().await;
    }
    hub.stop().await;
}
