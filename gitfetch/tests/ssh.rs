//! The fetch worker over SSH against a real OpenSSH server (the testkit's `sshd`, running
//! `git-upload-pack` for the test's user), through the real `flotilla-git-fetch` binary: a fetch
//! with the right key and host key reads the commit (protocol v2, and v0 when the server does
//! not accept `GIT_PROTOCOL`); a host key that is not in `known_hosts`, one
//! that changed, a key the server does not know, an encrypted key and no `known_hosts` at all
//! are each refused saying which; the key never reaches the worker's log; the transfer cap
//! counts SSH bytes.

mod support;

use flotilla_gitfetch::protocol::{ErrorKind, FetchResult, Limits};
use flotilla_testkit::sshd::{Sshd, SshdOptions, keygen};
use support::{Repo, credentials, fetch, main, request, ssh_request};

const CM: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\ndata:\n  v: \"1\"\n";

fn error(r: &FetchResult) -> (ErrorKind, &str) {
    let e = r.error.as_ref().expect("an error answer");
    (ErrorKind::try_from(e.kind).unwrap(), e.message.as_str())
}

/// A repository `shop` with one bundle, and an SSH server for it.
fn setup(options: SshdOptions) -> (tempfile::TempDir, Repo, String, Sshd) {
    let base = tempfile::tempdir().unwrap();
    let repo = Repo::init(base.path(), "shop");
    repo.write("apps/web/cm.yaml", CM);
    let commit = repo.commit("web at 1");
    (base, repo, commit, Sshd::start_with(options))
}

#[tokio::test]
async fn an_ssh_fetch_with_the_right_keys_reads_the_commit_and_logs_no_key() {
    let (base, repo, first, sshd) = setup(SshdOptions::default());
    let cache = base.path().join("cache/shop.git");
    let auth = credentials(sshd.client_key(), sshd.known_hosts());

    let done = fetch(&cache, &ssh_request(&sshd.url(&repo.dir), auth.clone()))
        .await
        .unwrap();
    let r = done.result;
    assert_eq!(r.error, None, "sshd: {}", sshd.log());
    assert_eq!(r.commit, first);
    assert_eq!(r.roots, ["apps/web"]);
    let cm = r.entries.iter().find(|e| e.path == "apps/web/cm.yaml");
    assert_eq!(cm.unwrap().content, CM.as_bytes());
    assert!(r.bytes_received > 0);
    let key = String::from_utf8(sshd.client_key()).unwrap();
    let body = key.lines().nth(1).unwrap();
    assert!(!done.log.contains(body), "the key is in the worker's log");
    assert!(
        sshd.log().contains("GIT_PROTOCOL") || sshd.log().contains("Accepted publickey"),
        "{}",
        sshd.log()
    );

    // A new commit is fetched into the same cache.
    repo.write("apps/web/cm.yaml", CM.replace("\"1\"", "\"2\""));
    let second = repo.commit("web at 2");
    let done = fetch(&cache, &ssh_request(&sshd.url(&repo.dir), auth))
        .await
        .unwrap();
    assert_eq!(done.result.error, None);
    assert_eq!(done.result.commit, second);
}

#[tokio::test]
async fn a_server_that_refuses_git_protocol_is_fetched_over_protocol_v0() {
    let (base, repo, first, sshd) = setup(SshdOptions {
        accept_git_protocol: false,
        ..Default::default()
    });
    let auth = credentials(sshd.client_key(), sshd.known_hosts());
    let done = fetch(
        &base.path().join("cache/shop.git"),
        &ssh_request(&sshd.url(&repo.dir), auth),
    )
    .await
    .unwrap();
    assert_eq!(done.result.error, None, "sshd: {}", sshd.log());
    assert_eq!(done.result.commit, first);
}

#[tokio::test]
async fn a_server_with_several_host_keys_presents_the_one_known_hosts_lists() {
    let (base, repo, first, sshd) = setup(SshdOptions {
        host_key_types: &["ed25519", "ecdsa", "rsa"],
        ..Default::default()
    });
    let cache = base.path().join("cache/shop.git");
    for kind in ["ecdsa", "rsa", "ed25519"] {
        let auth = credentials(sshd.client_key(), sshd.known_hosts_of(kind));
        let r = fetch(&cache, &ssh_request(&sshd.url(&repo.dir), auth))
            .await
            .unwrap()
            .result;
        assert_eq!(r.error, None, "{kind} alone in known_hosts");
        assert_eq!(r.commit, first);
    }
}

#[tokio::test]
async fn host_keys_are_checked_against_known_hosts_with_no_trust_on_first_use() {
    let (base, repo, _, sshd) = setup(SshdOptions::default());
    let url = sshd.url(&repo.dir);
    let cache = base.path().join("cache/shop.git");

    // No known_hosts at all.
    let r = fetch(
        &cache,
        &ssh_request(&url, credentials(sshd.client_key(), String::new())),
    )
    .await
    .unwrap()
    .result;
    let (kind, message) = error(&r);
    assert_eq!(kind, ErrorKind::Request);
    assert!(message.contains("no known_hosts line"), "{message}");
    assert!(message.contains("no trust on first use"), "{message}");

    // known_hosts for another host (the port differs).
    let other = sshd
        .known_hosts()
        .replace(&format!(":{}", sshd.port), ":2222");
    let r = fetch(
        &cache,
        &ssh_request(&url, credentials(sshd.client_key(), other)),
    )
    .await
    .unwrap()
    .result;
    let (kind, message) = error(&r);
    assert_eq!(kind, ErrorKind::Request);
    assert!(
        message.contains("no known_hosts line names this host"),
        "{message}"
    );
    assert!(
        message.contains("SHA256:"),
        "the fingerprint is shown: {message}"
    );

    // The host's line holds another key: a changed key or a man in the middle.
    let stranger = keygen(base.path(), "impostor", "ed25519");
    let impostor = std::fs::read_to_string(stranger.with_extension("pub")).unwrap();
    let mut f = impostor.split_whitespace();
    let wrong = format!(
        "[127.0.0.1]:{} {} {}\n",
        sshd.port,
        f.next().unwrap(),
        f.next().unwrap()
    );
    let r = fetch(
        &cache,
        &ssh_request(&url, credentials(sshd.client_key(), wrong)),
    )
    .await
    .unwrap()
    .result;
    let (kind, message) = error(&r);
    assert_eq!(kind, ErrorKind::Refused);
    assert!(message.contains("HOST KEY MISMATCH"), "{message}");

    // A revoked host key.
    let revoked = format!("{}@revoked * {}", sshd.known_hosts(), {
        let line = sshd.known_hosts();
        line.split_once(' ').unwrap().1.to_owned()
    });
    let r = fetch(
        &cache,
        &ssh_request(&url, credentials(sshd.client_key(), revoked)),
    )
    .await
    .unwrap()
    .result;
    let (kind, message) = error(&r);
    assert_eq!(kind, ErrorKind::Refused);
    assert!(
        message.contains("revoked (known_hosts line 2)"),
        "{message}"
    );

    // A line that does not parse is named.
    let r = fetch(
        &cache,
        &ssh_request(
            &url,
            credentials(sshd.client_key(), "host ssh-ed25519 !!\n".into()),
        ),
    )
    .await
    .unwrap()
    .result;
    let (_, message) = error(&r);
    assert!(
        message.contains("Secret default/shop-ssh: known_hosts line 1"),
        "{message}"
    );
}

#[tokio::test]
async fn keys_the_server_does_not_take_are_refused_saying_which() {
    let (base, repo, _, sshd) = setup(SshdOptions::default());
    let url = sshd.url(&repo.dir);
    let cache = base.path().join("cache/shop.git");

    let r = fetch(
        &cache,
        &ssh_request(&url, credentials(sshd.stranger_key(), sshd.known_hosts())),
    )
    .await
    .unwrap()
    .result;
    let (kind, message) = error(&r);
    assert_eq!(kind, ErrorKind::Request);
    assert!(
        message.contains(&format!("refused the key for user {:?}", sshd.user)),
        "{message}"
    );

    // An encrypted key.
    let path = base.path().join("locked");
    let out = std::process::Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "secret-phrase", "-f"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(out.status.success());
    let r = fetch(
        &cache,
        &ssh_request(
            &url,
            credentials(std::fs::read(&path).unwrap(), sshd.known_hosts()),
        ),
    )
    .await
    .unwrap()
    .result;
    let (_, message) = error(&r);
    assert!(message.contains("the key is encrypted"), "{message}");

    // Not a key at all, and no key.
    let r = fetch(
        &cache,
        &ssh_request(&url, credentials(b"hello".to_vec(), sshd.known_hosts())),
    )
    .await
    .unwrap()
    .result;
    let (_, message) = error(&r);
    assert!(
        message.contains("ssh-privatekey: not a private key"),
        "{message}"
    );
    assert!(
        !message.contains("hello"),
        "the key is not quoted: {message}"
    );

    let mut bare = request(&url, main("main"), &["apps/*"]);
    bare.credentials = None;
    let r = fetch(&cache, &bare).await.unwrap().result;
    let (_, message) = error(&r);
    assert!(message.contains("needs clientSecretName"), "{message}");
}

#[tokio::test]
async fn a_missing_repository_is_not_found_with_the_servers_words() {
    let (base, _, _, sshd) = setup(SshdOptions::default());
    let auth = credentials(sshd.client_key(), sshd.known_hosts());
    let url = sshd.url(&base.path().join("nothing-here"));
    let r = fetch(&base.path().join("cache/x.git"), &ssh_request(&url, auth))
        .await
        .unwrap()
        .result;
    let (kind, message) = error(&r);
    assert_eq!(kind, ErrorKind::NotFound, "{message}");
    assert!(message.contains("the server said"), "{message}");
}

#[tokio::test]
async fn the_transfer_cap_counts_ssh_bytes() {
    let (base, repo, _, sshd) = setup(SshdOptions::default());
    // Incompressible bytes, well over the cap.
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let noise: Vec<u8> = (0..600_000)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect();
    repo.write("apps/web/big.bin", noise);
    repo.commit("big");
    let mut r = ssh_request(
        &sshd.url(&repo.dir),
        credentials(sshd.client_key(), sshd.known_hosts()),
    );
    r.limits = Some(Limits {
        max_fetch_bytes: 256 * 1024,
        ..Limits::default()
    });
    let r = fetch(&base.path().join("cache/shop.git"), &r)
        .await
        .unwrap()
        .result;
    let (kind, message) = error(&r);
    assert_eq!(kind, ErrorKind::Refused);
    assert_eq!(
        message,
        "repository transfer exceeded 256 KiB (--gitops-max-fetch-bytes)"
    );
}
