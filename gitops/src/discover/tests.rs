use flotilla_gitfetch::protocol::{FetchResult, TreeEntry};

use super::*;

/// A tree builder: files with content, directories implied, links and submodules explicit.
#[derive(Default)]
pub(crate) struct Fixture {
    roots: Vec<String>,
    entries: Vec<TreeEntry>,
}

impl Fixture {
    pub(crate) fn roots(roots: &[&str]) -> Self {
        Fixture {
            roots: roots.iter().map(|r| r.to_string()).collect(),
            entries: Vec::new(),
        }
    }

    pub(crate) fn file(mut self, path: &str, content: &str) -> Self {
        self.entries.push(TreeEntry {
            path: path.into(),
            kind: EntryKind::File as i32,
            size: content.len() as u64,
            content: content.as_bytes().to_vec(),
            target: String::new(),
        });
        self
    }

    pub(crate) fn link(mut self, path: &str, target: &str) -> Self {
        self.entries.push(TreeEntry {
            path: path.into(),
            kind: EntryKind::Symlink as i32,
            size: 1,
            content: Vec::new(),
            target: target.into(),
        });
        self
    }

    pub(crate) fn submodule(mut self, path: &str) -> Self {
        self.entries.push(TreeEntry {
            path: path.into(),
            kind: EntryKind::Submodule as i32,
            ..Default::default()
        });
        self
    }

    pub(crate) fn tree(self) -> Tree {
        Tree::new(&FetchResult {
            commit: "a".repeat(40),
            entries: self.entries,
            roots: self.roots,
            ..Default::default()
        })
    }
}

fn found(tree: &Tree) -> Vec<(String, Option<String>, Vec<String>)> {
    discover(tree)
        .unwrap()
        .into_iter()
        .map(|b| (b.path, b.fleet_yaml, b.files))
        .collect()
}

fn s(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| x.to_string()).collect()
}

#[test]
fn a_root_with_manifests_is_one_bundle_with_its_subdirectories() {
    let tree = Fixture::roots(&["apps/web"])
        .file("apps/web/cm.yaml", "x")
        .file("apps/web/more/deploy.yml", "x")
        .file("apps/web/README.md", "x")
        .file("apps/web/.hidden.yaml", "x")
        .file("apps/web/.github/ci.yaml", "x")
        .tree();
    assert_eq!(
        found(&tree),
        [(
            "apps/web".into(),
            None,
            s(&["apps/web/cm.yaml", "apps/web/more/deploy.yml"])
        )]
    );
}

#[test]
fn each_fleet_yaml_makes_a_bundle_that_owns_the_files_below_it() {
    let tree = Fixture::roots(&["apps"])
        .file("apps/shared.yaml", "x")
        .file("apps/web/fleet.yaml", "")
        .file("apps/web/cm.yaml", "x")
        .file("apps/web/overlays/eu/cm.yaml", "x")
        .file("apps/db/fleet.yml", "")
        .file("apps/db/sts/sts.json", "x")
        .tree();
    assert_eq!(
        found(&tree),
        [
            ("apps".into(), None, s(&["apps/shared.yaml"])),
            (
                "apps/db".into(),
                Some("apps/db/fleet.yml".into()),
                s(&["apps/db/sts/sts.json"])
            ),
            (
                "apps/web".into(),
                Some("apps/web/fleet.yaml".into()),
                s(&["apps/web/cm.yaml"])
            ),
        ]
    );
}

#[test]
fn a_root_holding_only_claimed_files_is_no_bundle() {
    let tree = Fixture::roots(&["apps"])
        .file("apps/web/fleet.yaml", "")
        .file("apps/web/cm.yaml", "x")
        .file("apps/notes.txt", "x")
        .tree();
    assert_eq!(
        found(&tree),
        [(
            "apps/web".into(),
            Some("apps/web/fleet.yaml".into()),
            s(&["apps/web/cm.yaml"])
        )]
    );
}

#[test]
fn helm_kustomize_submodules_fleetignore_and_escaping_links_are_refused_by_name() {
    let tree = Fixture::roots(&["apps"])
        .file("apps/chart/Chart.yaml", "x")
        .file("apps/k/kustomization.yaml", "x")
        .submodule("apps/vendor")
        .file("apps/web/.fleetignore", "*.bak")
        .file("apps/web/fleet.yaml", "")
        .file("apps/db/fleet.yaml", "")
        .file("apps/db/cm.yaml", "x")
        .link("apps/web/cm.yaml", "apps/db/cm.yaml")
        .tree();
    let problems: Vec<String> = discover(&tree)
        .unwrap_err()
        .iter()
        .map(|p| p.to_string())
        .collect();
    let expect = [
        "apps/web/.fleetignore: .fleetignore is not supported yet",
        "apps/chart/Chart.yaml: a Helm chart; Helm charts are not rendered here",
        "apps/k/kustomization.yaml: a Kustomize directory",
        "apps/vendor: a submodule inside a bundle; submodules are not followed",
        "apps/web/cm.yaml: a symlink to apps/db/cm.yaml, outside its bundle apps/web",
    ];
    for e in expect {
        assert!(
            problems.iter().any(|p| p.starts_with(e)),
            "{e:?} not in {problems:#?}"
        );
    }
    assert_eq!(problems.len(), expect.len(), "{problems:#?}");
}

#[test]
fn a_link_inside_its_bundle_is_a_file_of_the_bundle() {
    let tree = Fixture::roots(&["apps/web"])
        .file("apps/web/cm.yaml", "kind: x")
        .link("apps/web/alias.yaml", "apps/web/cm.yaml")
        .tree();
    assert_eq!(
        found(&tree)[0].2,
        s(&["apps/web/alias.yaml", "apps/web/cm.yaml"])
    );
    assert_eq!(tree.content("apps/web/alias.yaml"), Some(&b"kind: x"[..]));
}

#[test]
fn bundle_limits_name_the_bundle() {
    let mut f = Fixture::roots(&["apps/web"]);
    for i in 0..=MAX_FILES_PER_BUNDLE {
        f = f.file(&format!("apps/web/f{i:04}.yaml"), "x");
    }
    let problems = discover(&f.tree()).unwrap_err();
    assert_eq!(
        problems[0].to_string(),
        "apps/web: 1001 manifest files; a bundle may have at most 1000"
    );
    let big = "x".repeat(1024 * 1024);
    let tree = Fixture::roots(&["apps/web"])
        .file("apps/web/a.yaml", &big)
        .file("apps/web/b.yaml", &big)
        .file("apps/web/c.yaml", "x")
        .tree();
    assert_eq!(
        discover(&tree).unwrap_err()[0].to_string(),
        "apps/web: 2.0 MiB of manifests; a bundle may have at most 2 MiB"
    );
}
