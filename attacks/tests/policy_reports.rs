//! Forged policy status (issue 25 on the attack suite). A spoke holding one accepted cluster's
//! credentials reports policy compliance for another cluster — on that cluster's subject, or on
//! its own with the other cluster named in the event or the report — and for a policy that is
//! not bound to it. None of it is taken: the victim's compliance, the root status, the
//! per-cluster records and every bucket stay as they were, and the hub counts the refusals.

use flotilla_api::cloudevents::CloudEvent;
use flotilla_api::v1::PolicyClusterRecord;
use flotilla_attacks::fleet::{SOON, metric_samples_text, metric_sum};
use flotilla_attacks::wire;
use flotilla_attacks::{Fleet, HubOptions, Server, on_every_server, wait_for};
use futures::StreamExt;
use prost::Message;
use serde_json::Value;
use std::time::Duration;

/// How long the fleet is watched after the forgeries for anything to change.
const WATCH: Duration = Duration::from_secs(4);

/// policy-collection's namespace policy, enforced on the victim alone (a PlacementRule decides
/// among the clusters of the sets bound in its namespace: `default` is bound into `default`).
const VICTIM_POLICY: &str = r#"
apiVersion: cluster.open-cluster-management.io/v1beta2
kind: ManagedClusterSetBinding
metadata: {name: default, namespace: default}
spec: {clusterSet: default}
---
apiVersion: apps.open-cluster-management.io/v1
kind: PlacementRule
metadata: {name: victim-only, namespace: default}
spec:
  clusters: [{name: victim}]
---
apiVersion: policy.open-cluster-management.io/v1
kind: PlacementBinding
metadata: {name: binding-victim, namespace: default}
placementRef: {name: victim-only, kind: PlacementRule, apiGroup: apps.open-cluster-management.io}
subjects:
  - {name: policy-namespace, kind: Policy, apiGroup: policy.open-cluster-management.io}
---
apiVersion: policy.open-cluster-management.io/v1
kind: Policy
metadata: {name: policy-namespace, namespace: default}
spec:
  remediationAction: enforce
  policy-templates:
    - objectDefinition:
        apiVersion: policy.open-cluster-management.io/v1
        kind: ConfigurationPolicy
        metadata: {name: policy-namespace-example}
        spec:
          object-templates:
            - complianceType: musthave
              objectDefinition: {apiVersion: v1, kind: Namespace, metadata: {name: prod}}
"#;

/// The policy as `get policies -o json` shows it.
async fn policy(fleet: &Fleet) -> Option<Value> {
    let out = fleet
        .cli(&[
            "get",
            "policies",
            "policy-namespace",
            "-n",
            "default",
            "-o",
            "json",
        ])
        .await;
    if !out.ok() {
        return None;
    }
    let v: Value = serde_json::from_str(&out.stdout).ok()?;
    match v.get("items") {
        Some(items) => items.as_array()?.first().cloned(),
        None => Some(v),
    }
}

/// `(compliance, [(cluster, compliance)])` of the policy.
fn compliance(p: &Value) -> (String, Vec<(String, String)>) {
    let status = &p["status"];
    let clusters = status["status"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|c| {
                    (
                        c["clustername"].as_str().unwrap_or_default().to_string(),
                        c["compliant"].as_str().unwrap_or_default().to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    (
        status["compliant"].as_str().unwrap_or_default().to_string(),
        clusters,
    )
}

on_every_server!(a_spoke_cannot_forge_policy_status_for_another_cluster_or_an_unbound_policy);

/// The forgeries of an accepted cluster against another cluster's policy compliance.
async fn a_spoke_cannot_forge_policy_status_for_another_cluster_or_an_unbound_policy(
    server: Server,
) {
    let mut fleet = Fleet::secure(server).await;
    fleet.hub(HubOptions::new()).await;
    fleet.accepted_agent("victim").await;
    fleet.accepted_agent("mallory").await;
    fleet.stop_agent("mallory");
    fleet.apply(VICTIM_POLICY).await;
    let compliant = (
        "Compliant".to_string(),
        vec![("victim".to_string(), "Compliant".to_string())],
    );
    wait_for!(
        fleet,
        "the victim's policy to be Compliant",
        SOON,
        policy(&fleet).await.filter(|p| compliance(p) == compliant)
    );
    let before = match fleet.store().await.snapshot().await {
        Ok(s) => s,
        Err(e) => fleet.fail(&format!("reading the store before the attack: {e}")),
    };
    let records = before.live_keys("policystatus");
    fleet.check(records.len() == 1, || {
        format!("one per-cluster record expected before the attack: {records:?}")
    });
    let rejected_before = metric_sum(&fleet.metrics().await, "flotilla_hub_events_rejected_total");

    let attacker = fleet.attacker_as("mallory").await;
    let name = "default.policy-namespace";
    let victims = wire::policy_resource_id("victim", name);
    let own = wire::policy_resource_id("mallory", name);
    // Generation 1 is what the victim holds; NonCompliant is the lie.
    let lie = |sender: &str, claimed: &str, id: &str| {
        wire::policy_status(sender, claimed, name, id, 1, "NonCompliant")
    };
    // The victim's own subject: NATS refuses the publish.
    let (stored, _) = attacker
        .publish_acked(vec![(
            wire::status_subject("victim", "policy", Some(&victims)),
            lie("victim", "victim", &victims),
        )])
        .await;
    fleet.check(stored == 0, || {
        "the stream took a report published on the victim's subject".to_string()
    });
    // Its own subjects: the event or the report names the victim. The status stream keeps the
    // last message per subject, so each forgery is sent alone and its refusal awaited.
    let subject = |id: &str| wire::status_subject("mallory", "policy", Some(id));
    let forgeries = [
        (
            "the event names the victim",
            subject(&victims),
            lie("victim", "victim", &victims),
        ),
        (
            "the report names the victim",
            subject(&victims),
            lie("mallory", "victim", &victims),
        ),
        (
            "the report is the victim's, under its own id",
            subject(&own),
            lie("mallory", "victim", &victims),
        ),
    ];
    let mut rejected = rejected_before;
    for (what, subject, payload) in forgeries {
        let (stored, refused) = attacker.publish_acked(vec![(subject, payload)]).await;
        fleet.check(stored == 1, || {
            format!("{what}: its own subjects are the attacker's to write ({refused} refused)")
        });
        let deadline = std::time::Instant::now() + SOON;
        loop {
            let text = fleet.metrics().await;
            let now = metric_sum(&text, "flotilla_hub_events_rejected_total");
            if now > rejected {
                rejected = now;
                break;
            }
            if std::time::Instant::now() >= deadline {
                fleet.fail(&format!(
                    "{what}: the forged report was not refused: {}",
                    metric_samples_text(&text, "flotilla_hub_events_rejected_total")
                ));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    // Its own report of a policy no binding gives it: well formed, so the hub answers the way
    // it answers a stray copy — it tells the cluster to remove it — and keeps nothing.
    let mut specs = match attacker
        .subscribe(&wire::to_subject("mallory", "spec"))
        .await
    {
        Ok(s) => s,
        Err(e) => fleet.fail(&format!("subscribing to its own specs: {e}")),
    };
    let (stored, _) = attacker
        .publish_acked(vec![(subject(&own), lie("mallory", "mallory", &own))])
        .await;
    fleet.check(stored == 1, || "its own report was not stored".to_string());
    let told = tokio::time::timeout(SOON, async {
        while let Some(m) = specs.next().await {
            let ty = CloudEvent::decode(m.payload.as_ref()).map(|e| e.r#type);
            if ty.as_deref() == Ok("io.flotilla.policy.v1.policy.spec.delete_request") {
                return true;
            }
        }
        false
    })
    .await;
    fleet.check(told == Ok(true), || {
        "the hub did not tell the cluster to remove a policy it is not bound to".to_string()
    });
    tokio::time::sleep(WATCH).await;

    let Some(after) = policy(&fleet).await else {
        fleet.fail("`get policies` does not show the policy after the attack");
    };
    fleet.check(compliance(&after) == compliant, || {
        format!(
            "the forgeries changed the policy's compliance: {:?}",
            compliance(&after)
        )
    });
    let now = match fleet.store().await.snapshot().await {
        Ok(s) => s,
        Err(e) => fleet.fail(&format!("reading the store after the attack: {e}")),
    };
    let damage = now.damage_since(&before);
    fleet.check(damage.is_empty(), || {
        format!("the store was damaged:\n  {}", damage.join("\n  "))
    });
    fleet.check(now.live_keys("policystatus") == records, || {
        format!(
            "the per-cluster records changed: {records:?} before, {:?} after",
            now.live_keys("policystatus")
        )
    });
    for (key, entry) in now.buckets.get("policystatus").into_iter().flatten() {
        let record = PolicyClusterRecord::decode(entry.value.as_slice());
        let report = record.as_ref().ok().and_then(|r| r.report.clone());
        fleet.check(
            report
                .as_ref()
                .is_some_and(|r| r.cluster_name == "victim" && r.compliant == "Compliant"),
            || format!("policystatus/{key} holds a forged report: {report:?}"),
        );
    }
    // The victim's agent still reports, and is still believed.
    let running = fleet.agent_running("victim");
    fleet.check(running, || "the victim's agent exited".to_string());
}
