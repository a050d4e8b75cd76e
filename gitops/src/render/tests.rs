use super::*;
use crate::discover::{discover, tests::Fixture};

const SRC: Source<'static> = Source {
    namespace: "edge-apps",
    name: "shop",
    target_namespace: None,
};

fn render_one(tree: &Tree) -> Result<Rendered, Vec<Problem>> {
    let dirs = discover(tree).unwrap();
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    render(SRC, tree, &dirs[0])
}

fn objects(r: &Rendered) -> Vec<Value> {
    let w = r.spec.workload.as_ref().unwrap();
    w.manifests
        .iter()
        .map(|m| serde_json::from_slice(&m.raw).unwrap())
        .collect()
}

fn messages(problems: Vec<Problem>) -> Vec<String> {
    problems.iter().map(|p| p.to_string()).collect()
}

const CM: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\ndata:\n  v: \"1\"\n";

#[test]
fn a_bundle_renders_every_document_with_namespaces_first_and_the_default_namespace() {
    let tree = Fixture::roots(&["apps/web"])
        .file("apps/web/fleet.yaml", "defaultNamespace: shop\nlabels: {tier: web}\n")
        .file(
            "apps/web/all.yaml",
            &format!("{CM}---\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: web, namespace: other}}\n"),
        )
        .file("apps/web/ns.json", r#"{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"shop"}}"#)
        .file(
            "apps/web/list.yaml",
            "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Secret, metadata: {name: s}}\n",
        )
        .tree();
    let r = render_one(&tree).unwrap();
    assert_eq!(r.name, "shop-apps-web");
    assert_eq!(r.labels["tier"], "web");
    let o = objects(&r);
    let ids: Vec<(String, String)> = o
        .iter()
        .map(|o| {
            (
                o["kind"].as_str().unwrap().to_owned(),
                o["metadata"]["namespace"]
                    .as_str()
                    .unwrap_or("-")
                    .to_owned(),
            )
        })
        .collect();
    assert_eq!(
        ids,
        [
            ("Namespace".into(), "-".into()),
            ("ConfigMap".into(), "shop".into()),
            ("Deployment".into(), "other".into()),
            ("Secret".into(), "shop".into()),
        ]
    );
    assert_eq!(r.content.len(), 64);
}

#[test]
fn the_content_hash_ignores_key_order_and_follows_content() {
    let a = Fixture::roots(&["w"]).file("w/cm.yaml", CM).tree();
    let shuffled = "kind: ConfigMap\ndata:\n  v: \"1\"\nmetadata:\n  name: web\napiVersion: v1\n";
    let b = Fixture::roots(&["w"]).file("w/cm.yaml", shuffled).tree();
    let c = Fixture::roots(&["w"])
        .file("w/cm.yaml", &CM.replace('1', "2"))
        .tree();
    let (ra, rb, rc) = (
        render_one(&a).unwrap(),
        render_one(&b).unwrap(),
        render_one(&c).unwrap(),
    );
    assert_eq!(ra.content, rb.content, "canonical JSON: keys sorted");
    assert_ne!(ra.content, rc.content);
    let raw = &ra.spec.workload.as_ref().unwrap().manifests[0].raw;
    assert!(String::from_utf8_lossy(raw).starts_with(r#"{"apiVersion":"v1","data""#));
}

#[test]
fn a_forced_namespace_refuses_cluster_scoped_objects() {
    let tree = Fixture::roots(&["w"])
        .file("w/fleet.yaml", "namespace: shop\n")
        .file(
            "w/cm.yaml",
            &CM.replace("name: web", "name: web\n  namespace: elsewhere"),
        )
        .file(
            "w/ns.yaml",
            "apiVersion: v1\nkind: Namespace\nmetadata: {name: x}\n",
        )
        .tree();
    let problems = messages(render_one(&tree).unwrap_err());
    assert_eq!(
        problems,
        [
            "w/ns.yaml: Namespace x is cluster-scoped, and the bundle puts everything in namespace shop"
        ]
    );
    let tree = Fixture::roots(&["w"])
        .file("w/fleet.yaml", "namespace: shop\n")
        .file(
            "w/cm.yaml",
            &CM.replace("name: web", "name: web\n  namespace: elsewhere"),
        )
        .tree();
    let r = render_one(&tree).unwrap();
    assert_eq!(objects(&r)[0]["metadata"]["namespace"], "shop");
}

#[test]
fn bad_documents_are_named_by_file_and_position() {
    let tree = Fixture::roots(&["w"])
        .file(
            "w/a.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {}\n",
        )
        .file("w/b.yaml", "- just\n- a list\n")
        .file("w/c.yaml", "key: [unclosed\n")
        .file("w/d.yaml", CM)
        .file("w/e.yaml", CM)
        .tree();
    let problems = messages(render_one(&tree).unwrap_err());
    assert_eq!(problems[0], "w/a.yaml: object 1: metadata.name is required");
    assert_eq!(
        problems[1],
        "w/b.yaml: document 1: not an object (a mapping with apiVersion and kind)"
    );
    assert!(
        problems[2].starts_with("w/c.yaml: document 1: "),
        "{problems:?}"
    );
    assert_eq!(
        problems[3],
        "w/e.yaml: ConfigMap web is also defined in w/d.yaml"
    );
    assert_eq!(problems.len(), 4, "every problem at once: {problems:?}");
}

#[test]
fn a_bundle_over_the_work_size_is_refused_with_both_sizes() {
    let mut f = Fixture::roots(&["w"]);
    let blob = "x".repeat(60 * 1024);
    for i in 0..10 {
        f = f.file(
            &format!("w/cm{i}.yaml"),
            &format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: c{i}}}\ndata: {{v: {blob}}}\n"
            ),
        );
    }
    let problems = messages(render_one(&f.tree()).unwrap_err());
    assert!(
        problems[0].starts_with("bundle shop-w: 600.")
            && problems[0].ends_with("KiB of manifests; one ManifestWork holds at most 500 KiB"),
        "{problems:?}"
    );
}

#[test]
fn a_yaml_alias_bomb_is_refused_not_expanded() {
    let bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\ne: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\nf: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]\ng: [*f, *f, *f, *f, *f, *f, *f, *f, *f, *f]\n";
    let tree = Fixture::roots(&["w"]).file("w/bomb.yaml", bomb).tree();
    let problems = messages(render_one(&tree).unwrap_err());
    assert!(
        problems[0].starts_with("w/bomb.yaml: document 1: "),
        "{problems:?}"
    );
}
