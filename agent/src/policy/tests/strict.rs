//! Strict validation of what a policy writes, on the simulated cluster: a Deployment with a
//! misspelt field is NonCompliant naming the field (OCM's messages: a refused create, a refused
//! update in inform and enforce) and is never written; the same policy spelt right enforces.

use super::*;

const REFUSED: &str = "Deployment in version \"v1\" cannot be handled as a Deployment: strict \
                       decoding error: unknown field \"spec.replcas\"";

fn deployment(spec: Value) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default"}, "spec": spec})
}

fn spec(replicas_key: &str) -> Value {
    let mut spec = json!({"selector": {"matchLabels": {"app": "web"}},
        "template": {"metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]}}});
    spec[replicas_key] = json!(3);
    spec
}

fn deployment_policy(object: Value) -> Value {
    json!({"apiVersion": "policy.open-cluster-management.io/v1", "kind": "ConfigurationPolicy",
        "metadata": {"name": "web-deployment"},
        "spec": {"remediationAction": "inform", "severity": "low",
            "object-templates": [{"complianceType": "musthave", "objectDefinition": object}]}})
}

fn web_id() -> ManifestId {
    ManifestId {
        group: "apps".into(),
        version: "v1".into(),
        kind: "Deployment".into(),
        namespace: "default".into(),
        name: "web".into(),
    }
}

#[tokio::test]
async fn a_misspelt_field_is_noncompliant_naming_it_and_never_written() {
    let mut f = Fixture::new();
    put(
        &f.sim,
        &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}}),
    )
    .await;
    let misspelt = deployment_policy(deployment(spec("replcas")));
    f.send(
        &replicated("web", 1, "enforce", std::slice::from_ref(&misspelt)),
        Action::CreateRequest,
    )
    .await;
    let r = f.report(|r| r.compliant == "NonCompliant").await;
    assert_eq!(
        newest(&r),
        format!(
            "NonCompliant; violation - deployments [web] in namespace default is missing, and \
             cannot be created, reason: `{REFUSED}`"
        )
    );
    assert!(
        f.sim.get(&web_id()).await.unwrap().is_none(),
        "nothing written"
    );

    // The Deployment exists (spelt right, one replica): the misspelt update is refused, in
    // inform and in enforce alike, and the object stays as it was.
    let mut existing = deployment(spec("replicas"));
    existing["spec"]["replicas"] = json!(1);
    put(&f.sim, &existing).await;
    for (generation, remediation) in [(2, "inform"), (3, "enforce")] {
        f.send(
            &replicated(
                "web",
                generation,
                remediation,
                std::slice::from_ref(&misspelt),
            ),
            Action::UpdateRequest,
        )
        .await;
        let r = f
            .report(|r| r.observed_generation == generation && r.compliant == "NonCompliant")
            .await;
        assert_eq!(
            newest(&r),
            format!(
                "NonCompliant; violation - Error validating the object web, the error is \
                 `{REFUSED}`"
            ),
            "{remediation}"
        );
    }
    let live = f.sim.get(&web_id()).await.unwrap().expect("kept");
    assert_eq!(live["spec"]["replicas"], 1);
    assert!(live["spec"].get("replcas").is_none());

    // Spelt right, enforce repairs it.
    let fixed = deployment_policy(deployment(spec("replicas")));
    f.send(
        &replicated("web", 4, "enforce", &[fixed]),
        Action::UpdateRequest,
    )
    .await;
    f.report(|r| r.observed_generation == 4 && r.compliant == "Compliant")
        .await;
    assert_eq!(
        f.sim.get(&web_id()).await.unwrap().unwrap()["spec"]["replicas"],
        3
    );
}
