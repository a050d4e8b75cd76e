//! Hostile and oversized repositories, each refused with the file and the limit named, through
//! the real worker binary against a real `git daemon`; and the worker's own bounds (deadline,
//! memory) enforced on the real process.

mod support;

use std::time::Duration;

use flotilla_gitfetch::{
    launch::LaunchError,
    protocol::{ErrorKind, FetchError, FetchRequest, Limits},
};
use support::{Daemon, Repo, fetch, main, request};

/// Serves `repo` and fetches `paths` of `main` with `limits`; returns the error answered.
async fn refusal(base: &std::path::Path, paths: &[&str], limits: Limits) -> FetchError {
    let daemon = Daemon::serve(base);
    let mut req: FetchRequest = request(&daemon.url("r"), main("main"), paths);
    req.limits = Some(limits);
    let done = fetch(&base.join("cache.git"), &req).await.unwrap();
    done.result.error.expect("the fetch is refused")
}

fn repo(base: &std::path::Path) -> Repo {
    let r = Repo::init(base, "r");
    r.write("apps/web/cm.yaml", "kind: ConfigMap\n");
    r.commit("a good start");
    r
}

fn assert_refused(err: &FetchError, message: &str) {
    assert_eq!(err.kind, ErrorKind::Refused as i32, "{}", err.message);
    assert_eq!(err.message, message);
}

#[tokio::test]
async fn a_file_over_the_size_limit_is_refused_by_its_header() {
    let base = tempfile::tempdir().unwrap();
    let r = repo(base.path());
    r.write(
        "apps/web/big.yaml",
        "a: b\n".repeat(2 * 1024 * 1024 / 5 + 1),
    );
    r.commit("big");
    let err = refusal(base.path(), &["apps/web"], Limits::default()).await;
    assert_refused(
        &err,
        "apps/web/big.yaml: 2.0 MiB; a file may have at most 1 MiB (--gitops-max-file-bytes)",
    );
}

#[tokio::test]
async fn more_files_than_the_limit_are_refused() {
    let base = tempfile::tempdir().unwrap();
    let r = repo(base.path());
    for i in 0..60 {
        r.write(&format!("apps/many/f{i}.yaml"), "x: 1\n");
    }
    r.commit("many");
    let limits = Limits {
        max_entries: 50,
        ..Default::default()
    };
    let err = refusal(base.path(), &["apps"], limits).await;
    assert_refused(
        &err,
        "more than 50 files under paths [apps] (--gitops-max-files)",
    );
}

#[tokio::test]
async fn a_symlink_out_of_its_path_is_refused() {
    let base = tempfile::tempdir().unwrap();
    let r = repo(base.path());
    r.symlink("apps/web/secret.yaml", "../../../etc/passwd");
    r.commit("escape");
    let err = refusal(base.path(), &["apps/web"], Limits::default()).await;
    assert_refused(
        &err,
        "apps/web/secret.yaml is a symlink to ../../../etc/passwd, outside apps/web",
    );
}

#[tokio::test]
async fn a_symlink_loop_is_cut() {
    let base = tempfile::tempdir().unwrap();
    let r = repo(base.path());
    r.symlink("apps/web/a.yaml", "b.yaml")
        .symlink("apps/web/b.yaml", "a.yaml");
    r.commit("loop");
    let err = refusal(base.path(), &["apps/web"], Limits::default()).await;
    assert_refused(
        &err,
        "apps/web/a.yaml: more than 8 symlinks in a chain (a loop?)",
    );
}

#[tokio::test]
async fn names_git_would_not_write_are_refused() {
    for (name, why) in [
        ("..", "a relative step"),
        ("evil\u{1b}.yaml", "holds a control character"),
        (".GIT", "names the repository's own directory"),
    ] {
        let base = tempfile::tempdir().unwrap();
        let r = repo(base.path());
        let blob = r.blob("kind: Secret\n");
        let inner = r.mktree(&format!("100644 blob {blob}\t{name}\n"));
        let root = r.mktree(&format!("040000 tree {inner}\tapps\n"));
        r.commit_root(&root, "forged");
        let err = refusal(base.path(), &["apps"], Limits::default()).await;
        let shown = name.replace('\u{1b}', "\\x1b");
        assert_refused(
            &err,
            &format!("apps/{shown}: not a usable file name ({why})"),
        );
    }
}

#[tokio::test]
async fn directories_deeper_than_the_limit_are_refused() {
    let base = tempfile::tempdir().unwrap();
    let r = repo(base.path());
    r.write("apps/a/b/c/x.yaml", "x: 1\n");
    r.commit("deep");
    let limits = Limits {
        max_depth: 3,
        ..Default::default()
    };
    let err = refusal(base.path(), &["apps"], limits).await;
    assert_refused(&err, "apps/a/b/c: deeper than 3 directories");
}

#[tokio::test]
async fn a_transfer_over_the_cap_is_cut_even_outside_paths() {
    let base = tempfile::tempdir().unwrap();
    let r = repo(base.path());
    // Incompressible bytes outside `paths`: a depth-1 fetch still transfers them.
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let noise: Vec<u8> = (0..256 * 1024)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect();
    r.write("assets/noise.bin", noise);
    r.commit("assets");
    let limits = Limits {
        max_fetch_bytes: 64 * 1024,
        ..Default::default()
    };
    let err = refusal(base.path(), &["apps"], limits).await;
    assert_refused(
        &err,
        "repository transfer exceeded 64 KiB (--gitops-max-fetch-bytes)",
    );
}

#[tokio::test]
async fn a_glob_matching_nothing_is_an_error_not_an_empty_bundle() {
    let base = tempfile::tempdir().unwrap();
    let r = repo(base.path());
    let head = r.head();
    let err = refusal(base.path(), &["apps/web", "infra/*"], Limits::default()).await;
    assert_refused(
        &err,
        &format!("paths[1]: infra/* matches no directory at {}", &head[..7]),
    );
}

#[tokio::test]
async fn link_local_and_loopback_addresses_are_refused_before_connecting() {
    let base = tempfile::tempdir().unwrap();
    let cache = base.path().join("c.git");
    let req = request("git://169.254.169.254/ops/shop.git", main("main"), &[]);
    let err = fetch(&cache, &req).await.unwrap().result.error.unwrap();
    assert_eq!(err.kind, ErrorKind::Request as i32);
    assert_eq!(
        err.message,
        "169.254.169.254:9418 resolves to 169.254.169.254, a link-local address (cloud metadata \
         services live there); refused"
    );
    repo(base.path());
    let daemon = Daemon::serve(base.path());
    let mut req = request(&daemon.url("r"), main("main"), &[]);
    req.allow_loopback = false;
    let err = fetch(&cache, &req).await.unwrap().result.error.unwrap();
    assert_eq!(err.kind, ErrorKind::Request as i32);
    assert!(
        err.message.contains("a loopback address"),
        "{}",
        err.message
    );
}

#[tokio::test]
async fn a_server_that_never_answers_costs_the_deadline_and_the_worker_is_killed() {
    let base = tempfile::tempdir().unwrap();
    // Accepts connections (the kernel's backlog) and never says a word.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port();
    let mut worker = support::worker();
    worker.timeout = Duration::from_secs(1);
    let req = request(&format!("git://127.0.0.1:{port}/r"), main("main"), &[]);
    let started = std::time::Instant::now();
    let err = worker
        .fetch(&base.path().join("c.git"), &req)
        .await
        .unwrap_err();
    assert!(matches!(err, LaunchError::Timeout(_)), "{err}");
    assert_eq!(
        err.to_string(),
        "fetch took longer than 1 s; the worker was killed"
    );
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[tokio::test]
async fn a_worker_over_its_memory_bound_dies_and_says_which_bound() {
    let base = tempfile::tempdir().unwrap();
    repo(base.path());
    let daemon = Daemon::serve(base.path());
    let mut worker = support::worker();
    worker.memory_bytes = 8 * 1024 * 1024; // below what the process already maps
    let req = request(&daemon.url("r"), main("main"), &[]);
    let err = worker
        .fetch(&base.path().join("c.git"), &req)
        .await
        .unwrap_err();
    let LaunchError::Died { hint, .. } = &err else {
        panic!("expected a dead worker, got {err}");
    };
    assert!(hint.contains("memory limit 8 MiB"), "{err}");
}
