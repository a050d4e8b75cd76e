//! From a commit to replica sets: a repository served by a real `git daemon`, fetched by the
//! worker's own code (gix, in this process), checked as the hub checks a worker's answer,
//! discovered, rendered, and turned into ManifestWorkReplicaSets; then a push, and only the
//! bundle that changed gets new content.

#[path = "../../gitfetch/tests/support/mod.rs"]
mod support;

use flotilla_gitfetch::{check, protocol::Limits, worker};
use flotilla_gitops::{
    discover::discover,
    render::{Rendered, Source, render},
    source::{self, COMMIT_ANNOTATION},
    tree::Tree,
};
use support::{Daemon, Repo};

fn gitrepo(url: &str) -> source::GitRepo {
    source::parse(&format!(
        "apiVersion: apps.flotilla.io/v1alpha1\nkind: GitRepo\nmetadata: {{name: shop, namespace: edge-apps}}\n\
         spec:\n  repo: {url}\n  insecureTransport: true\n  branch: main\n  paths: [\"apps/*\"]\n\
         \x20 targets:\n  - name: stores\n    placementRef: {{name: stores}}\n"
    ))
    .unwrap()
}

/// Fetch, check, discover, render: what the hub's GitRepo actor will do with a commit.
fn sync(repo: &source::GitRepo, cache: &std::path::Path) -> (String, Vec<Rendered>) {
    let limits = Limits::default().effective();
    let request = source::fetch_request(repo, limits, &[], true);
    let result = worker::run(&request, cache);
    assert_eq!(result.error, None);
    check::result(&result, &limits).unwrap();
    let tree = Tree::new(&result);
    let src = Source {
        namespace: "edge-apps",
        name: "shop",
        target_namespace: None,
    };
    let bundles = discover(&tree)
        .unwrap()
        .iter()
        .map(|dir| render(src, &tree, dir).unwrap())
        .collect();
    (result.commit, bundles)
}

#[test]
fn a_commit_becomes_one_replica_set_per_bundle_and_a_push_changes_only_what_changed() {
    let base = tempfile::tempdir().unwrap();
    let git = Repo::init(base.path(), "shop");
    git.write("apps/web/fleet.yaml", "defaultNamespace: shop\n")
        .write(
            "apps/web/deploy.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\ndata: {v: \"1\"}\n---\n\
             apiVersion: v1\nkind: Namespace\nmetadata: {name: shop}\n",
        )
        .write(
            "apps/db/cm.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: db, namespace: shop}\n",
        )
        .write("README.md", "not a bundle");
    let first = git.commit("one");
    let daemon = Daemon::serve(base.path());
    let repo = gitrepo(&daemon.url("shop"));
    let cache = base.path().join("cache/shop.git");

    let (commit, bundles) = sync(&repo, &cache);
    assert_eq!(commit, first);
    let names: Vec<&str> = bundles.iter().map(|b| b.name.as_str()).collect();
    assert_eq!(names, ["shop-apps-db", "shop-apps-web"]);
    let web = &bundles[1];
    let kinds: Vec<String> = web
        .spec
        .workload
        .as_ref()
        .unwrap()
        .manifests
        .iter()
        .map(|m| {
            serde_json::from_slice::<serde_json::Value>(&m.raw).unwrap()["kind"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(kinds, ["Namespace", "ConfigMap"]);
    let sets: Vec<_> = bundles
        .iter()
        .map(|b| source::replica_set(&repo, b, &commit))
        .collect();
    let meta = sets[1].metadata.as_ref().unwrap();
    assert_eq!(meta.annotations[COMMIT_ANNOTATION], first);
    assert_eq!(
        sets[1].spec.as_ref().unwrap().placement_refs[0].name,
        "stores"
    );

    git.write(
        "apps/web/deploy.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\ndata: {v: \"2\"}\n",
    );
    let second = git.commit("web: v2");
    let (commit, after) = sync(&repo, &cache);
    assert_eq!(commit, second);
    assert_eq!(
        after[0].content, bundles[0].content,
        "db did not change: same content, no rollout"
    );
    assert_ne!(after[1].content, bundles[1].content, "web changed");
}
