//! The example add-on of `examples/addons/`: the three documents are valid OCM add-on objects,
//! and the work the hub renders from them for a cluster runs the fleet-metrics add-on on a
//! simulated cluster with the template's settings (the config's 30 s interval).

use flotilla_agent::addons::{AddOnSettings, Supervisor, fleet_metrics_settings};
use flotilla_agent::backend::sim::SimBackend;
use flotilla_agent::backend::{Backend, Strategy};
use flotilla_agent::store::LocalStore;
use flotilla_api::addon::render::{Input, render};
use flotilla_api::addon::validate;
use flotilla_api::ocm::{Document, parse_documents};
use flotilla_api::work::manifest_id;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

fn example(name: &str) -> Document {
    let path = format!("{}/../examples/addons/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).expect(&path);
    let mut docs = parse_documents(&text);
    assert_eq!(docs.len(), 1, "{name}: one document");
    docs.remove(0).unwrap_or_else(|e| panic!("{name}: {e}"))
}

#[tokio::test]
async fn the_example_addon_is_valid_and_its_rendered_work_runs_in_process() {
    let Document::AddOnTemplate(template) = example("fleet-metrics-template.yaml") else {
        panic!("an AddOnTemplate")
    };
    let Document::AddOnDeploymentConfig(config) = example("fleet-metrics-config.yaml") else {
        panic!("an AddOnDeploymentConfig")
    };
    let Document::ClusterManagementAddOn(cma) = example("fleet-metrics-addon.yaml") else {
        panic!("a ClusterManagementAddOn")
    };
    assert_eq!(validate::addon_template(&template), Vec::<String>::new());
    assert_eq!(
        validate::addon_deployment_config(&config),
        Vec::<String>::new()
    );
    assert_eq!(
        validate::cluster_management_addon(&cma),
        Vec::<String>::new()
    );
    let strategy = cma
        .spec
        .as_ref()
        .unwrap()
        .install_strategy
        .as_ref()
        .unwrap();
    assert_eq!(strategy.r#type, "Placements");
    assert_eq!(
        (
            strategy.placements[0].namespace.as_str(),
            strategy.placements[0].name.as_str()
        ),
        ("default", "demo"),
        "the placement scripts/demo.sh creates"
    );

    let hashes = BTreeMap::new();
    let works = render(&Input {
        addon: "fleet-metrics",
        cluster: "sim-0001",
        install_namespace: "",
        template: &template,
        config: Some(&config),
        hub_url: "nats://hub.example:4222",
        config_hashes: &hashes,
        ensure_namespace: false,
    })
    .expect("the template renders");
    let [work] = works.as_slice() else {
        panic!("one work expected, got {}", works.len());
    };
    let objects: Vec<Value> = work
        .spec
        .as_ref()
        .and_then(|s| s.workload.as_ref())
        .map(|w| {
            w.manifests
                .iter()
                .map(|m| serde_json::from_slice(&m.raw).unwrap())
                .collect()
        })
        .unwrap_or_default();
    let deployment = objects
        .iter()
        .find(|o| o["kind"] == "Deployment")
        .expect("a Deployment");
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    assert!(
        container["args"]
            .as_array()
            .unwrap()
            .contains(&json!("--nats-url=nats://hub.example:4222")),
        "{container}"
    );
    let (settings, problems) =
        fleet_metrics_settings(deployment, "other").expect("the fleet-metrics add-on");
    assert!(problems.is_empty(), "{problems:?}");
    let expected = AddOnSettings {
        addon_name: "fleet-metrics".into(),
        cluster_name: "sim-0001".into(),
        interval: Duration::from_secs(30),
    };
    assert_eq!(settings, expected);

    // Applied to a simulated cluster (the hub's work puts the install namespace first), the
    // agent's supervisor runs it.
    let backend = Arc::new(SimBackend::new(8, 32, "v1.30.2"));
    let ns = json!({"apiVersion": "v1", "kind": "Namespace",
                    "metadata": {"name": "open-cluster-management-agent-addon"}});
    for o in std::iter::once(&ns).chain(&objects) {
        backend
            .apply(&manifest_id(o).unwrap(), o, &Strategy::Update)
            .await
            .unwrap_or_else(|e| panic!("{}: {e}", o["kind"]));
    }
    let client = async_nats::ConnectOptions::new()
        .retry_on_initial_connect()
        .connect("nats://127.0.0.1:1")
        .await
        .unwrap();
    let mut supervisor = Supervisor::new(
        "sim-0001",
        backend,
        Arc::new(LocalStore::memory("sim-0001")),
        client,
    );
    supervisor.reconcile().await;
    assert_eq!(
        supervisor.running(),
        vec![(
            "open-cluster-management-agent-addon/fleet-metrics-agent".to_string(),
            expected
        )]
    );
}
