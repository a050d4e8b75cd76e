use super::*;
use crate::ocm::document::{Document, parse_documents};

const SHOP: &str = r#"
apiVersion: apps.flotilla.io/v1alpha1
kind: GitRepo
metadata: {name: shop, namespace: edge-apps}
spec:
  repo: git://git.example.com/ops/shop.git
  insecureTransport: true
  branch: main
  paths: ["apps/*"]
  pollingInterval: 1m
  webhookSecret: shop-hook
  targets:
  - name: stores
    placementRef: {name: stores}
    rolloutStrategy:
      type: ProgressivePerGroup
      progressivePerGroup: {maxFailures: 0}
"#;

fn one(text: &str) -> Result<Document, String> {
    let mut docs = parse_documents(text);
    assert_eq!(docs.len(), 1);
    docs.remove(0).map_err(|e| e.to_string())
}

#[test]
fn a_gitrepo_document_becomes_its_proto_and_prints_back_the_same() {
    let Ok(Document::GitRepo(r)) = one(SHOP) else {
        panic!("not a GitRepo: {:?}", one(SHOP));
    };
    let spec = r.spec.as_ref().unwrap();
    assert_eq!(spec.branch, "main");
    assert_eq!(spec.revision, "");
    assert_eq!(spec.webhook_secret, "shop-hook");
    assert_eq!(spec.targets[0].placement_ref, "stores");
    assert_eq!(
        spec.targets[0].rollout_strategy.as_ref().unwrap().r#type,
        "ProgressivePerGroup"
    );
    let back = GitRepo::from(&r);
    let printed = serde_yaml::to_string(&back).unwrap();
    let Ok(Document::GitRepo(again)) = one(&printed) else {
        panic!("{printed}");
    };
    assert_eq!(again, r, "{printed}");
}

#[test]
fn fleet_keys_left_out_are_refused_by_name_and_unknown_keys_as_unknown() {
    let bad = SHOP
        .replace(
            "  branch: main\n",
            "  branch: main\n  helmSecretName: x\n  brnch: y\n",
        )
        .replace(
            "    placementRef: {name: stores}\n",
            "    placementRef: {name: stores}\n    clusterSelector: {matchLabels: {a: b}}\n",
        );
    let e = one(&bad).unwrap_err();
    for part in [
        "document 1 (GitRepo shop): spec.brnch: unknown field",
        "spec.helmSecretName: Helm is not rendered here",
        "spec.targets[0].clusterSelector: goes under placement: (an inline target)",
    ] {
        assert!(e.contains(part), "{part:?} not in {e}");
    }
}

const INLINE: &str = r#"
  - name: depots
    placement:
      clusterSets: [depots]
      clusterSelector: {matchLabels: {tier: depot}}
      claimSelector: {matchExpressions: [{key: region, operator: In, values: [eu]}]}
      numberOfClusters: 3
      tolerations: [{key: gpu, operator: Exists}]
      decisionStrategy:
        groupStrategy:
          decisionGroups: [{groupName: canary, groupClusterSelector: {labelSelector: {matchLabels: {canary: "true"}}}}]
          clustersPerDecisionGroup: 25%
  - name: lab
    placement: {clusterName: lab-1}
"#;

#[test]
fn an_inline_target_becomes_its_proto_in_the_placement_s_own_types_and_prints_back() {
    let text = format!("{SHOP}{}", INLINE.trim_start_matches('\n'));
    let Ok(Document::GitRepo(r)) = one(&text) else {
        panic!("not a GitRepo: {:?}", one(&text));
    };
    let targets = &r.spec.as_ref().unwrap().targets;
    let depots = targets[1].placement.as_ref().unwrap();
    assert_eq!(targets[1].placement_ref, "");
    assert_eq!(depots.cluster_sets, ["depots"]);
    assert_eq!(
        depots.cluster_selector.as_ref().unwrap().match_labels["tier"],
        "depot"
    );
    assert_eq!(depots.number_of_clusters, Some(3));
    assert_eq!(depots.tolerations[0].operator, "Exists");
    let groups = depots
        .decision_strategy
        .as_ref()
        .and_then(|d| d.group_strategy.as_ref())
        .unwrap();
    assert_eq!(groups.decision_groups[0].group_name, "canary");
    assert_eq!(groups.clusters_per_decision_group, "25%");
    assert_eq!(targets[2].placement.as_ref().unwrap().cluster_name, "lab-1");
    let printed = serde_yaml::to_string(&GitRepo::from(&r)).unwrap();
    let Ok(Document::GitRepo(again)) = one(&printed) else {
        panic!("{printed}");
    };
    assert_eq!(again, r, "{printed}");
}

#[test]
fn placement_keys_an_inline_target_does_not_take_are_refused_by_name() {
    let inline = "  - name: depots\n    placement:\n      sortBy: Score\n      colour: red\n\
                  \x20     decisionStrategy: {groupStrategy: {decisionGroups: [{groupName: a, \
                  groupClusterSelector: {celSelector: {celExpressions: [x]}}}]}}\n";
    let e = one(&format!("{SHOP}{inline}")).unwrap_err();
    for part in [
        "spec.targets[1].placement.sortBy: an inline target takes clusterSets",
        "name it in placementRef",
        "spec.targets[1].placement.colour: unknown field",
        "spec.targets[1].placement.decisionStrategy.groupStrategy.decisionGroups[0]\
         .groupClusterSelector.celSelector: decision groups select by labelSelector",
    ] {
        assert!(e.contains(part), "{part:?} not in {e}");
    }
}

#[test]
fn credentials_and_a_ca_bundle_are_taken_as_fleet_writes_them_or_as_pem() {
    let pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
    let https = |ca: &str| {
        SHOP.replace("git://git.example.com", "https://git.example.com")
            .replace(
                "  insecureTransport: true\n",
                &format!("  clientSecretName: shop-git\n  caBundle: {ca}\n"),
            )
    };
    let fleet = data_encoding::BASE64.encode(pem.as_bytes());
    for written in [
        fleet.clone(),
        format!("|\n    {}", pem.replace('\n', "\n    ")),
    ] {
        let Ok(Document::GitRepo(r)) = one(&https(&written)) else {
            panic!("{written}");
        };
        let spec = r.spec.clone().unwrap();
        assert_eq!(spec.client_secret_name, "shop-git");
        assert_eq!(
            String::from_utf8(spec.ca_bundle).unwrap().trim(),
            pem.trim()
        );
        // Printed back as Fleet writes it: base64.
        let printed = serde_yaml::to_string(&GitRepo::from(&r)).unwrap();
        assert!(printed.contains("clientSecretName: shop-git"), "{printed}");
        let back = data_encoding::BASE64.encode(spec_ca(&r).as_bytes());
        assert!(printed.contains(&back), "{printed}");
    }
    let e = one(&https("not*base64")).unwrap_err();
    assert!(
        e.contains("spec.caBundle: neither PEM nor base64 of PEM"),
        "{e}"
    );
}

fn spec_ca(r: &v1::GitRepo) -> String {
    String::from_utf8(r.spec.clone().unwrap().ca_bundle).unwrap()
}
