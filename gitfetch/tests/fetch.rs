//! The fetch worker against real repositories served by a real `git daemon` (and read in place
//! over `file://`), through the real `flotilla-git-fetch` binary.

mod support;

use flotilla_gitfetch::protocol::{EntryKind, ErrorKind, FetchResult, Want};
use support::{Daemon, Repo, fetch, main, request};

fn entry<'a>(r: &'a FetchResult, path: &str) -> &'a flotilla_gitfetch::protocol::TreeEntry {
    r.entries
        .iter()
        .find(|e| e.path == path)
        .unwrap_or_else(|| {
            panic!(
                "{path} not in {:?}",
                r.entries.iter().map(|e| &e.path).collect::<Vec<_>>()
            )
        })
}

fn paths(r: &FetchResult) -> Vec<&str> {
    r.entries.iter().map(|e| e.path.as_str()).collect()
}

const CM: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\ndata:\n  v: \"1\"\n";

#[tokio::test]
async fn a_shallow_fetch_over_git_daemon_reads_the_paths_at_the_branch_tip() {
    let base = tempfile::tempdir().unwrap();
    let repo = Repo::init(base.path(), "shop");
    repo.write("apps/web/cm.yaml", CM)
        .write("apps/db/cm.yml", CM)
        .write("README.md", "hi");
    let first = repo.commit("one");
    repo.write("apps/web/deploy.json", "{}")
        .write("apps/web/tool.sh", "echo");
    let second = repo.commit("web: add a deployment\n\nbody");
    let daemon = Daemon::serve(base.path());
    let cache = base.path().join("cache/shop.git");

    let done = fetch(
        &cache,
        &request(&daemon.url("shop"), main("main"), &["apps/*"]),
    )
    .await
    .unwrap();
    let r = done.result;
    assert_eq!(r.error, None);
    assert_eq!(r.commit, second);
    let info = r.info.clone().unwrap();
    assert_eq!(info.subject, "web: add a deployment");
    assert_eq!(info.author, "Ann Author <ann@example.com>");
    assert!(info.time > 1_700_000_000);
    assert_eq!(r.roots, ["apps/db", "apps/web"]);
    assert_eq!(
        paths(&r),
        [
            "apps/db/cm.yml",
            "apps/web/cm.yaml",
            "apps/web/deploy.json",
            "apps/web/tool.sh"
        ]
    );
    assert_eq!(entry(&r, "apps/web/cm.yaml").content, CM.as_bytes());
    assert_eq!(
        entry(&r, "apps/web/tool.sh").content,
        b"",
        "non-manifests are listed without content"
    );
    assert_eq!(entry(&r, "apps/web/tool.sh").size, 4);
    assert!(r.bytes_received > 0);
    // Depth 1: the cache is shallow at the fetched commit and holds nothing of the first.
    let shallow = std::fs::read_to_string(cache.join("shallow")).unwrap();
    assert_eq!(shallow.trim(), second);
    let has_first = std::process::Command::new("git")
        .args(["-C", cache.to_str().unwrap(), "cat-file", "-e", &first])
        .status()
        .unwrap();
    assert!(!has_first.success(), "the parent commit was not fetched");

    // A new commit lands in the same cache.
    repo.write("apps/web/cm.yaml", CM.replace('1', "2"));
    let third = repo.commit("web: v2");
    let r = fetch(
        &cache,
        &request(&daemon.url("shop"), main("main"), &["apps/web"]),
    )
    .await
    .unwrap()
    .result;
    assert_eq!(r.commit, third);
    assert_eq!(
        paths(&r),
        [
            "apps/web/cm.yaml",
            "apps/web/deploy.json",
            "apps/web/tool.sh"
        ]
    );
    assert!(String::from_utf8_lossy(&entry(&r, "apps/web/cm.yaml").content).contains("\"2\""));
}

#[tokio::test]
async fn a_poll_resolves_the_branch_without_fetching_objects() {
    let base = tempfile::tempdir().unwrap();
    let repo = Repo::init(base.path(), "r");
    repo.write("a/cm.yaml", CM);
    let head = repo.commit("one");
    let daemon = Daemon::serve(base.path());
    let cache = base.path().join("cache.git");
    let mut req = request(&daemon.url("r"), main("main"), &[]);
    req.list_only = true;
    let r = fetch(&cache, &req).await.unwrap().result;
    assert_eq!(
        (r.commit.as_str(), r.entries.len(), r.info),
        (head.as_str(), 0, None)
    );
    let objects = std::process::Command::new("git")
        .args(["-C", cache.to_str().unwrap(), "cat-file", "-e", &head])
        .status()
        .unwrap();
    assert!(!objects.success(), "a poll fetches no objects");
}

#[tokio::test]
async fn a_revision_is_a_tag_or_a_commit_id_and_a_missing_branch_is_not_found() {
    let base = tempfile::tempdir().unwrap();
    let repo = Repo::init(base.path(), "r");
    repo.write("a/cm.yaml", CM);
    let first = repo.commit("one");
    repo.tag("v1");
    repo.write("a/cm.yaml", "kind: X\n");
    repo.commit("two");
    let daemon = Daemon::serve(base.path());
    let url = daemon.url("r");

    let r = fetch(
        &base.path().join("c1.git"),
        &request(&url, Want::Revision("v1".into()), &["a"]),
    )
    .await
    .unwrap()
    .result;
    assert_eq!((&r.error, r.commit.as_str()), (&None, first.as_str()));
    assert_eq!(entry(&r, "a/cm.yaml").content, CM.as_bytes());

    // A non-tip commit by id: protocol v2 serves any reachable commit.
    let r = fetch(
        &base.path().join("c2.git"),
        &request(&url, Want::Revision(first.clone()), &["a"]),
    )
    .await
    .unwrap()
    .result;
    assert_eq!((&r.error, r.commit.as_str()), (&None, first.as_str()));

    let r = fetch(
        &base.path().join("c3.git"),
        &request(&url, main("nope"), &[]),
    )
    .await
    .unwrap()
    .result;
    let err = r.error.unwrap();
    assert_eq!(err.kind, ErrorKind::NotFound as i32, "{}", err.message);
    assert_eq!(err.message, "branch \"nope\" was not found on the server");
}

#[tokio::test]
async fn file_repositories_are_read_in_place_and_only_under_a_root() {
    let base = tempfile::tempdir().unwrap();
    let repo = Repo::init(base.path(), "local");
    repo.write("apps/web/cm.yaml", CM);
    let head = repo.commit("one");
    let url = format!("file://{}", repo.dir.display());
    let cache = base.path().join("unused.git");

    let mut req = request(&url, main("main"), &["apps"]);
    req.file_roots = vec![base.path().display().to_string()];
    let r = fetch(&cache, &req).await.unwrap().result;
    assert_eq!((&r.error, r.commit.as_str()), (&None, head.as_str()));
    assert_eq!(paths(&r), ["apps/web", "apps/web/cm.yaml"]);
    assert!(!cache.exists(), "nothing is copied for file://");

    req.file_roots = vec![];
    let err = fetch(&cache, &req).await.unwrap().result.error.unwrap();
    assert_eq!(err.kind, ErrorKind::Request as i32);
    assert!(
        err.message.contains("file:// repositories are refused"),
        "{}",
        err.message
    );

    let elsewhere = tempfile::tempdir().unwrap();
    req.file_roots = vec![elsewhere.path().display().to_string()];
    let err = fetch(&cache, &req).await.unwrap().result.error.unwrap();
    assert!(
        err.message.contains("outside every --gitops-file-root"),
        "{}",
        err.message
    );
}

#[tokio::test]
async fn symlinks_inside_a_path_resolve_and_submodules_are_listed_not_followed() {
    let base = tempfile::tempdir().unwrap();
    let repo = Repo::init(base.path(), "r");
    repo.write("apps/web/cm.yaml", CM)
        .symlink("apps/web/alias.yaml", "cm.yaml")
        .symlink("apps/web/sub/chain.yaml", "../alias.yaml");
    let first = repo.commit("one");
    repo.gitlink("apps/web/vendor", &first);
    let head = repo.commit_staged("two");
    let daemon = Daemon::serve(base.path());
    let r = fetch(
        &base.path().join("c.git"),
        &request(&daemon.url("r"), main("main"), &["apps/web"]),
    )
    .await
    .unwrap()
    .result;
    assert_eq!((&r.error, r.commit.as_str()), (&None, head.as_str()));
    assert_eq!(entry(&r, "apps/web/alias.yaml").target, "apps/web/cm.yaml");
    assert_eq!(
        entry(&r, "apps/web/sub/chain.yaml").target,
        "apps/web/cm.yaml"
    );
    assert_eq!(
        entry(&r, "apps/web/vendor").kind,
        EntryKind::Submodule as i32
    );
}
