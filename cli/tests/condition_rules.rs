//! OCM condition rules and `ttlSecondsAfterFinished`, as OCM's documentation writes them, on a
//! real hub with a simulated cluster (whose Jobs complete): the Job's well-known `Complete`
//! condition, a CEL rule on another manifest, the work's aggregated `Complete`, and the work
//! deleted that long after it completed.

mod common;

use common::{HubBuilder, run_cli, start_sim, wait_for};
use flotilla_testkit::NatsServer;
use serde_json::Value;

const WORK: &str = r#"apiVersion: work.open-cluster-management.io/v1
kind: ManifestWork
metadata:
  name: temp-job
  namespace: jobs-0001
spec:
  deleteOption:
    propagationPolicy: Foreground
    ttlSecondsAfterFinished: 3
  manifestConfigs:
    - resourceIdentifier:
        group: batch
        resource: jobs
        namespace: default
        name: pi
      conditionRules:
        - condition: Complete
          type: WellKnownConditions
    - resourceIdentifier:
        resource: configmaps
        namespace: default
        name: settings
      conditionRules:
        - condition: Configured
          type: CEL
          celExpressions:
            - object.data.mode == 'edge'
          messageExpression: "'mode is ' + object.data.mode"
  workload:
    manifests:
      - apiVersion: batch/v1
        kind: Job
        metadata:
          name: pi
          namespace: default
        spec:
          template:
            spec:
              containers:
                - name: pi
                  image: perl:5.34.0
                  command: ["perl", "-Mbignum=bpi", "-wle", "print bpi(2000)"]
              restartPolicy: Never
          backoffLimit: 4
      - apiVersion: v1
        kind: ConfigMap
        metadata:
          name: settings
          namespace: default
        data:
          mode: edge
"#;

fn work_json(hub: &str) -> Option<Value> {
    let out = run_cli(
        hub,
        &["get", "works", "-n", "jobs-0001", "-o", "json"],
        None,
    );
    let v: Value = serde_json::from_str(&out.stdout).ok()?;
    v["items"]
        .as_array()?
        .iter()
        .find(|w| w["metadata"]["name"] == "temp-job")
        .cloned()
}

fn condition(conditions: &Value, t: &str) -> Option<(String, String)> {
    conditions
        .as_array()?
        .iter()
        .find(|c| c["type"] == t)
        .map(|c| {
            (
                c["status"].as_str().unwrap_or_default().to_string(),
                c["message"].as_str().unwrap_or_default().to_string(),
            )
        })
}

#[test]
fn a_finished_job_completes_its_work_which_is_deleted_after_its_ttl() {
    let nats = NatsServer::start();
    let dir = tempfile::tempdir().unwrap();
    let hub = HubBuilder::new(&nats, dir.path()).auto_accept().start();
    let sim = start_sim(&nats, dir.path(), 1, "jobs", &["--ready-delay-ms", "1500"]);
    common::wait_available(&hub, &[&hub.proc, &sim], "jobs-0001", 1);
    let out = run_cli(&hub.grpc, &["apply", "-f", "-"], Some(WORK));
    assert_eq!(out.code, Some(0), "{}{}", out.stdout, out.stderr);
    let w = wait_for("the work Complete", &[&hub.proc, &sim], || {
        let w = work_json(&hub.grpc)?;
        (condition(&w["status"]["conditions"], "Complete")?.0 == "True").then_some(w)
    });
    let manifests = w["status"]["resourceStatus"]["manifests"]
        .as_array()
        .unwrap();
    let job = manifests
        .iter()
        .find(|m| m["resourceMeta"]["kind"] == "Job")
        .unwrap();
    assert_eq!(
        condition(&job["conditions"], "Complete"),
        Some(("True".into(), "Job is finished".into())),
        "{job}"
    );
    let cm = manifests
        .iter()
        .find(|m| m["resourceMeta"]["kind"] == "ConfigMap")
        .unwrap();
    assert_eq!(
        condition(&cm["conditions"], "Configured"),
        Some(("True".into(), "mode is edge".into())),
        "{cm}"
    );
    assert_eq!(
        condition(&w["status"]["conditions"], "Configured")
            .map(|c| c.0)
            .as_deref(),
        Some("True"),
        "rule conditions are aggregated on the work"
    );
    wait_for("the work deleted after its TTL", &[&hub.proc, &sim], || {
        work_json(&hub.grpc).is_none().then_some(())
    });
}

#[test]
fn condition_rules_the_crd_refuses_name_their_field() {
    let nats = NatsServer::start();
    let dir = tempfile::tempdir().unwrap();
    let hub = HubBuilder::new(&nats, dir.path()).auto_accept().start();
    for (bad, field) in [
        (
            WORK.replace("type: WellKnownConditions", "type: Sometimes"),
            "spec.manifestConfigs[0].conditionRules[0].type",
        ),
        (
            WORK.replace(
                "            - object.data.mode == 'edge'\n",
                "            []\n",
            )
            .replace("celExpressions:\n            []", "celExpressions: []"),
            "spec.manifestConfigs[1].conditionRules[0].celExpressions",
        ),
        (
            WORK.replace("- condition: Configured", "- condition: \"\""),
            "spec.manifestConfigs[1].conditionRules[0].condition",
        ),
    ] {
        let out = run_cli(&hub.grpc, &["apply", "-f", "-"], Some(&bad));
        assert_ne!(out.code, Some(0), "{bad}");
        assert!(
            out.stderr.contains(field),
            "{field} not named in: {}",
            out.stderr
        );
    }
}

fn deployment_work(name: &str, scrape: &str) -> String {
    format!(
        r#"apiVersion: work.open-cluster-management.io/v1
kind: ManifestWork
metadata:
  name: {name}
  namespace: jobs-0001
spec:
  manifestConfigs:
    - resourceIdentifier:
        group: apps
        resource: deployments
        namespace: default
        name: {name}
      feedbackScrapeType: {scrape}
      feedbackRules:
        - type: JSONPaths
          jsonPaths:
            - name: readyReplicas
              path: .status.readyReplicas
  workload:
    manifests:
      - apiVersion: apps/v1
        kind: Deployment
        metadata:
          name: {name}
          namespace: default
        spec:
          replicas: 2
          selector:
            matchLabels:
              app: {name}
          template:
            metadata:
              labels:
                app: {name}
            spec:
              containers:
                - name: web
                  image: nginx:1.27
"#
    )
}

fn ready_replicas(hub: &str, name: &str) -> Option<i64> {
    let out = run_cli(
        hub,
        &["get", "works", "-n", "jobs-0001", "-o", "json"],
        None,
    );
    let v: Value = serde_json::from_str(&out.stdout).ok()?;
    let w = v["items"]
        .as_array()?
        .iter()
        .find(|w| w["metadata"]["name"] == name)?;
    w["status"]["resourceStatus"]["manifests"][0]["statusFeedback"]["values"]
        .as_array()?
        .iter()
        .find(|f| f["name"] == "readyReplicas")?["fieldValue"]["integer"]
        .as_i64()
}

#[test]
fn watched_feedback_follows_the_resource_within_a_second_polled_waits_for_its_interval() {
    let nats = NatsServer::start();
    let dir = tempfile::tempdir().unwrap();
    let hub = HubBuilder::new(&nats, dir.path()).auto_accept().start();
    // Resources observed every 60 s unless watched; workloads ready 1.5 s after a change.
    let sim = start_sim(
        &nats,
        dir.path(),
        1,
        "jobs",
        &[
            "--ready-delay-ms",
            "1500",
            "--work-status-interval-ms",
            "60000",
        ],
    );
    common::wait_available(&hub, &[&hub.proc, &sim], "jobs-0001", 1);
    for (name, scrape) in [("watched", "Watch"), ("polled", "Poll")] {
        let out = run_cli(
            &hub.grpc,
            &["apply", "-f", "-"],
            Some(&deployment_work(name, scrape)),
        );
        assert_eq!(out.code, Some(0), "{}{}", out.stdout, out.stderr);
    }
    wait_for(
        "the watched work's feedback at 2 ready replicas",
        &[&hub.proc, &sim],
        || (ready_replicas(&hub.grpc, "watched")? == 2).then_some(()),
    );
    assert_ne!(
        ready_replicas(&hub.grpc, "polled"),
        Some(2),
        "the polled work is observed only at its 60 s interval"
    );
    // A new generation that watches (and scales to 3): followed within a second from then on.
    let watching = deployment_work("polled", "Watch").replace("replicas: 2", "replicas: 3");
    let out = run_cli(&hub.grpc, &["apply", "-f", "-"], Some(&watching));
    assert_eq!(out.code, Some(0), "{}{}", out.stdout, out.stderr);
    wait_for(
        "the now watched work's feedback at 3 ready replicas",
        &[&hub.proc, &sim],
        || (ready_replicas(&hub.grpc, "polled")? == 3).then_some(()),
    );
    let bad = deployment_work("x", "Sometimes");
    let out = run_cli(&hub.grpc, &["apply", "-f", "-"], Some(&bad));
    assert!(
        out.stderr
            .contains("spec.manifestConfigs[0].feedbackScrapeType"),
        "{}",
        out.stderr
    );
}

fn ssa_work(replicas: u32, image: &str, condition: &str) -> String {
    format!(
        r#"apiVersion: work.open-cluster-management.io/v1
kind: ManifestWork
metadata:
  name: scaled
  namespace: jobs-0001
spec:
  manifestConfigs:
    - resourceIdentifier:
        group: apps
        resource: deployments
        namespace: default
        name: scaled
      updateStrategy:
        type: ServerSideApply
        serverSideApply:
          ignoreFields:
            - condition: {condition}
              jsonPaths:
                - .spec.replicas
  workload:
    manifests:
      - apiVersion: apps/v1
        kind: Deployment
        metadata:
          name: scaled
          namespace: default
        spec:
          replicas: {replicas}
          selector:
            matchLabels:
              app: scaled
          template:
            metadata:
              labels:
                app: scaled
            spec:
              containers:
                - name: web
                  image: {image}
"#
    )
}

fn spoke_deployment(hub: &str) -> Option<Value> {
    let out = run_cli(
        hub,
        &[
            "proxy",
            "jobs-0001",
            "get",
            "deployment",
            "scaled",
            "-n",
            "default",
            "-o",
            "json",
        ],
        None,
    );
    serde_json::from_str(&out.stdout).ok()
}

#[test]
fn ignored_fields_keep_the_spokes_value_while_the_rest_follows_the_work() {
    let nats = NatsServer::start();
    let dir = tempfile::tempdir().unwrap();
    let hub = HubBuilder::new(&nats, dir.path()).auto_accept().start();
    let sim = start_sim(&nats, dir.path(), 1, "jobs", &["--ready-delay-ms", "200"]);
    common::wait_available(&hub, &[&hub.proc, &sim], "jobs-0001", 1);
    let apply = |yaml: String| {
        let out = run_cli(&hub.grpc, &["apply", "-f", "-"], Some(&yaml));
        assert_eq!(out.code, Some(0), "{}{}", out.stdout, out.stderr);
    };
    apply(ssa_work(2, "nginx:1.27", "OnSpokePresent"));
    wait_for("created with 2 replicas", &[&hub.proc, &sim], || {
        (spoke_deployment(&hub.grpc)?["spec"]["replicas"] == 2).then_some(())
    });
    // The work asks for 5 replicas and a new image: the image changes, the replicas stay.
    apply(ssa_work(5, "nginx:1.28", "OnSpokePresent"));
    let d = wait_for("the new image on the spoke", &[&hub.proc, &sim], || {
        let d = spoke_deployment(&hub.grpc)?;
        (d["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.28").then_some(d)
    });
    assert_eq!(d["spec"]["replicas"], 2, "{d}");
    // Bad paths name the field.
    let out = run_cli(
        &hub.grpc,
        &["apply", "-f", "-"],
        Some(&ssa_work(5, "nginx:1.28", "OnSpokePresent").replace(".spec.replicas", "spec[0]")),
    );
    assert!(
        out.stderr
            .contains("serverSideApply.ignoreFields[0].jsonPaths[0]"),
        "{}",
        out.stderr
    );
    let out = run_cli(
        &hub.grpc,
        &["apply", "-f", "-"],
        Some(&ssa_work(5, "x", "Sometimes")),
    );
    assert!(
        out.stderr.contains("ignoreFields[0].condition"),
        "{}",
        out.stderr
    );
}
