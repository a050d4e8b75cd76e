use serde_json::Value;

use crate::discover::{discover, tests::Fixture};
use crate::render::{MAX_CUSTOMIZED_BYTES, Rendered, Source, render};
use crate::{Problem, fleetyaml};

const FILE: &str = "apps/web/fleet.yaml";

fn problems(yaml: &str) -> Vec<String> {
    fleetyaml::parse(FILE, yaml.as_bytes())
        .unwrap_err()
        .iter()
        .map(Problem::to_string)
        .collect()
}

fn has(all: &[String], needle: &str) {
    assert!(
        all.iter()
            .any(|p| p.starts_with(&format!("{FILE}: ")) && p.contains(needle)),
        "no problem naming {FILE} and {needle:?} in {all:#?}"
    );
}

#[test]
fn customizations_are_read_with_their_selectors_and_options() {
    let f = fleetyaml::parse(
        FILE,
        br#"
targetCustomizationMode: FirstMatch
patches:
- target: {kind: ConfigMap, name: web}
  type: merge
  patch: {data: {all: "yes"}}
targetCustomizations:
- name: big
  clusterSelector: {matchLabels: {size: big}, matchExpressions: [{key: tier, operator: In, values: [a, b]}]}
  patches:
  - target: {apiVersion: apps/v1, kind: Deployment, name: web}
    type: strategic
    patch: {spec: {replicas: 4}}
- name: eu
  clusterSet: eu
  decisionGroup: canary
  namespace: shop-eu
  yaml: {overlays: [eu]}
- name: lab
  clusterName: lab-1
  doNotDeploy: true
"#,
    )
    .unwrap();
    assert_eq!(f.patches.len(), 1);
    let c = &f.target_customizations;
    assert_eq!(c.len(), 3);
    let sel = c[0].cluster_selector.as_ref().unwrap();
    assert_eq!(sel.match_labels["size"], "big");
    assert_eq!(sel.match_expressions[0].values, ["a", "b"]);
    assert_eq!(c[0].patches[0].kind, crate::customize::PatchType::Strategic);
    assert_eq!(c[1].cluster_set.as_deref(), Some("eu"));
    assert_eq!(c[1].decision_group.as_deref(), Some("canary"));
    assert_eq!(c[1].yaml.as_ref().unwrap().overlays, ["eu"]);
    assert!(c[2].do_not_deploy);
}

#[test]
fn bad_customizations_are_refused_naming_the_file_and_the_key() {
    let all = problems(
        r#"
targetCustomizationMode: AllMatches
targetCustomizations:
- name: nosel
  namespace: Shop
- name: twice
  clusterName: a
- name: twice
  clusterGroup: edge
  clusterSelector: {matchExpressions: [{key: k, operator: Near}]}
- name: typo
  clusterName: b
  patches:
  - {target: {kind: ConfigMap}, type: json, patch: {data: {}}}
  - {target: {kind: ConfigMap}, type: merge, patch: [1]}
  helm: {values: {}}
  yaml: {overlays: ["../x"]}
"#,
    );
    has(&all, "targetCustomizationMode: AllMatches is not built");
    has(&all, "targetCustomizations[0]: selects no cluster");
    has(&all, "targetCustomizations[0].namespace");
    has(&all, "targetCustomizations[2].name: twice is used twice");
    has(
        &all,
        "targetCustomizations[2].clusterGroup: not supported here: cluster groups are ManagedClusterSets here: use clusterSet",
    );
    has(
        &all,
        "targetCustomizations[2].clusterSelector.matchExpressions[0].operator",
    );
    has(
        &all,
        "targetCustomizations[3].patches[0].patch: a json patch is a list",
    );
    has(
        &all,
        "targetCustomizations[3].patches[1].patch: a strategic or merge patch is a mapping",
    );
    has(
        &all,
        "targetCustomizations[3].helm: not supported here: Helm charts",
    );
    has(&all, "targetCustomizations[3].yaml.overlays[0]");
    // A typo is an unknown field, not a silently ignored option.
    let typo = problems("targetCustomizations:\n- name: a\n  clusterSelecter: {}\n");
    has(&typo, "unknown field `clusterSelecter`");
}

#[test]
fn the_number_of_customizations_and_patches_and_a_patch_s_size_are_bounded() {
    let many: String = (0..17)
        .map(|i| format!("- {{name: c{i}, clusterName: c{i}}}\n"))
        .collect();
    has(
        &problems(&format!("targetCustomizations:\n{many}")),
        "targetCustomizations: 17 customizations; at most 16 per bundle",
    );
    let patches: String = (0..33)
        .map(|_| "- {target: {kind: ConfigMap}, type: merge, patch: {a: 1}}\n".to_owned())
        .collect();
    has(
        &problems(&format!("patches:\n{patches}")),
        "patches: 33 patches; at most 32",
    );
    let big = "x".repeat(70 * 1024);
    has(
        &problems(&format!(
            "targetCustomizations:\n- name: a\n  clusterName: a\n  patches:\n  - {{target: {{kind: ConfigMap}}, type: merge, patch: {{data: {{v: {big}}}}}}}\n"
        )),
        "targetCustomizations[0].patches[0].patch: 71697 bytes; at most 65536",
    );
}

const SRC: Source<'static> = Source {
    namespace: "edge-apps",
    name: "shop",
    target_namespace: None,
};

const CM: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\ndata: {color: blue}\n";
const DEP: &str = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  replicas: 1\n  template:\n    spec:\n      containers: [{name: web, image: web:1}]\n";

fn render_bundle(fleet_yaml: &str, extra: &[(&str, &str)]) -> Result<Rendered, Vec<String>> {
    let mut f = Fixture::roots(&["apps/web"])
        .file(FILE, fleet_yaml)
        .file("apps/web/cm.yaml", CM)
        .file("apps/web/dep.yaml", DEP);
    for (path, content) in extra {
        f = f.file(path, content);
    }
    let tree = f.tree();
    let dirs = discover(&tree).unwrap();
    render(SRC, &tree, &dirs[0]).map_err(|p| p.iter().map(Problem::to_string).collect())
}

fn objects(spec: &flotilla_api::v1::ManifestWorkSpec) -> Vec<Value> {
    spec.workload
        .as_ref()
        .unwrap()
        .manifests
        .iter()
        .map(|m| serde_json::from_slice(&m.raw).unwrap())
        .collect()
}

fn find<'a>(objects: &'a [Value], kind: &str) -> &'a Value {
    objects.iter().find(|o| o["kind"] == kind).unwrap()
}

const CUSTOMIZED: &str = r#"
defaultNamespace: shop
targetCustomizations:
- name: big
  clusterSelector: {matchLabels: {size: big}}
  patches:
  - target: {kind: Deployment, name: web}
    type: strategic
    patch: {spec: {replicas: 4, template: {spec: {containers: [{name: web, image: web:2}]}}}}
- name: eu
  clusterSet: eu
  defaultNamespace: shop-eu
  yaml: {overlays: [eu]}
- name: lab
  clusterName: lab-1
  doNotDeploy: true
"#;

#[test]
fn each_customization_renders_a_variant_the_base_stays_the_default() {
    let r = render_bundle(
        CUSTOMIZED,
        &[
            (
                "apps/web/overlays/eu/cm.yaml",
                "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\ndata: {color: green}\n",
            ),
            (
                "apps/web/overlays/eu/dep_patch.yaml",
                "- {op: replace, path: /spec/replicas, value: 2}\n",
            ),
        ],
    )
    .unwrap();
    // The base: what a cluster no customization selects gets; the overlay is not in it.
    let base = objects(&r.spec);
    assert_eq!(base.len(), 2, "{base:?}");
    assert_eq!(find(&base, "ConfigMap")["data"]["color"], "blue");
    assert_eq!(find(&base, "Deployment")["spec"]["replicas"], 1);
    assert_eq!(r.variants.len(), 3);
    let big = &r.variants[0];
    assert_eq!(big.name, "big");
    assert_eq!(
        big.cluster_selector.as_ref().unwrap().match_labels["size"],
        "big"
    );
    let o = objects(big.template.as_ref().unwrap());
    let dep = find(&o, "Deployment");
    assert_eq!(dep["spec"]["replicas"], 4);
    assert_eq!(
        dep["spec"]["template"]["spec"]["containers"][0]["image"],
        "web:2"
    );
    assert_eq!(find(&o, "ConfigMap")["data"]["color"], "blue");
    assert_eq!(big.content.len(), 64);
    let eu = &r.variants[1];
    assert_eq!(eu.cluster_set, "eu");
    let o = objects(eu.template.as_ref().unwrap());
    assert_eq!(find(&o, "ConfigMap")["data"]["color"], "green");
    assert_eq!(find(&o, "ConfigMap")["metadata"]["namespace"], "shop-eu");
    assert_eq!(find(&o, "Deployment")["spec"]["replicas"], 2);
    let lab = &r.variants[2];
    assert!(lab.do_not_deploy && lab.template.is_none() && lab.content.is_empty());
    assert_eq!(lab.cluster_name, "lab-1");
}

#[test]
fn the_content_follows_the_customizations_and_the_base_alone_keeps_its_hash() {
    let plain = render_bundle("defaultNamespace: shop\n", &[]).unwrap();
    assert!(plain.variants.is_empty());
    assert_eq!(plain.content, crate::render::content_of(&plain.spec));
    let one = |replicas: u32| {
        render_bundle(
            &format!(
                "defaultNamespace: shop\ntargetCustomizations:\n- name: big\n  clusterSelector: {{matchLabels: {{size: big}}}}\n  patches:\n  - {{target: {{kind: Deployment}}, type: merge, patch: {{spec: {{replicas: {replicas}}}}}}}\n"
            ),
            &[],
        )
        .unwrap()
    };
    let (a, b, a2) = (one(3), one(5), one(3));
    assert_eq!(a.spec, plain.spec, "a customization leaves the base alone");
    assert_ne!(a.content, plain.content);
    assert_ne!(a.content, b.content);
    assert_eq!(a.content, a2.content);
    // A customization that changes nothing renders the base's content.
    let same = render_bundle(
        "defaultNamespace: shop\ntargetCustomizations:\n- {name: x, clusterName: x}\n",
        &[],
    )
    .unwrap();
    assert_eq!(
        same.variants[0].content,
        crate::render::content_of(&plain.spec)
    );
}

#[test]
fn a_patch_or_overlay_that_finds_nothing_is_refused_naming_the_customization() {
    let all = render_bundle(
        "targetCustomizations:\n- name: big\n  clusterName: a\n  patches:\n  - {target: {kind: Deployment, name: api}, type: merge, patch: {spec: {}}}\n- name: eu\n  clusterName: b\n  yaml: {overlays: [eu]}\n",
        &[(
            "apps/web/overlays/other/cm_patch.yaml",
            "data: {x: y}\n",
        )],
    )
    .unwrap_err();
    assert!(
        all.iter().any(|p| p
            == "bundle shop-apps-web: customization big: patch 1 targets Deployment api, which the bundle does not have"),
        "{all:#?}"
    );
    assert!(
        all.iter().any(|p| p
            == "bundle shop-apps-web: customization eu: overlay eu: no manifest files under apps/web/overlays/eu/"),
        "{all:#?}"
    );
    let bad = render_bundle(
        "yaml: {overlays: [x]}\n",
        &[("apps/web/overlays/x/gone_patch.yaml", "data: {}\n")],
    )
    .unwrap_err();
    assert!(
        bad.iter().any(|p| p
            == "apps/web/overlays/x/gone_patch.yaml: patches apps/web/gone.yaml, which the bundle does not have"),
        "{bad:#?}"
    );
}

#[test]
fn the_bundle_and_its_customizations_together_are_bounded() {
    // ~100 KiB of manifests, four customizations that each change it: five renderings.
    let data = "y".repeat(100 * 1024);
    let big =
        format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: big}}\ndata: {{v: {data}}}\n");
    let custom: String = (0..4)
        .map(|i| {
            format!(
                "- name: c{i}\n  clusterName: c{i}\n  patches:\n  - {{target: {{kind: ConfigMap, name: big}}, type: merge, patch: {{data: {{i: \"{i}\"}}}}}}\n"
            )
        })
        .collect();
    let all = render_bundle(
        &format!("targetCustomizations:\n{custom}"),
        &[("apps/web/big.yaml", &big)],
    )
    .unwrap_err();
    let limit = flotilla_gitfetch::limits::human_bytes(MAX_CUSTOMIZED_BYTES as u64);
    assert!(
        all.iter().any(|p| p.starts_with("bundle shop-apps-web: ")
            && p.contains("for the bundle and its 4 customizations together; at most")
            && p.ends_with(&limit)),
        "{all:#?}"
    );
}

#[test]
fn a_patch_may_not_move_an_object_out_of_a_forced_namespace() {
    let moved = "namespace: shop\npatches:\n- {target: {kind: ConfigMap}, type: merge, patch: {metadata: {namespace: kube-system}}}\n";
    let problems = render_bundle(moved, &[]).unwrap_err();
    assert!(
        problems.iter().any(|p| p.contains(
            "after patches: ConfigMap web is in namespace \"kube-system\", and the bundle puts everything in namespace shop"
        )),
        "{problems:?}"
    );
    let scoped = "namespace: shop\npatches:\n- {target: {kind: ConfigMap}, type: json, patch: [{op: replace, path: /kind, value: Namespace}]}\n";
    let problems = render_bundle(scoped, &[]).unwrap_err();
    assert!(
        problems.iter().any(|p| p.contains(
            "after patches: Namespace web is cluster-scoped, and the bundle puts everything in namespace shop"
        )),
        "{problems:?}"
    );
    // A customization's patch is held to the GitRepo's targetNamespace too.
    let custom = "targetCustomizations:\n- name: big\n  clusterName: big-1\n  patches:\n  - {target: {kind: ConfigMap}, type: merge, patch: {metadata: {namespace: other}}}\n";
    let tree = Fixture::roots(&["apps/web"])
        .file(FILE, custom)
        .file("apps/web/cm.yaml", CM)
        .file("apps/web/dep.yaml", DEP)
        .tree();
    let dirs = discover(&tree).unwrap();
    let forced = Source {
        target_namespace: Some("apps"),
        ..SRC
    };
    let problems: Vec<String> = render(forced, &tree, &dirs[0])
        .unwrap_err()
        .iter()
        .map(Problem::to_string)
        .collect();
    assert!(
        problems
            .iter()
            .any(|p| p.contains("ConfigMap web is in namespace \"other\"")),
        "{problems:?}"
    );
    // Without a forced namespace a patch may set one.
    let free = "patches:\n- {target: {kind: ConfigMap}, type: merge, patch: {metadata: {namespace: elsewhere}}}\n";
    assert!(render_bundle(free, &[]).is_ok());
}
