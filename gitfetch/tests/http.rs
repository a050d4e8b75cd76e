//! The fetch worker over HTTP and HTTPS against the real `git http-backend` (behind the
//! testkit's server, with basic authentication and TLS from a test CA), through the real
//! `flotilla-git-fetch` binary: credentials used when asked and refused clearly when wrong or
//! missing, a certificate trusted through `caBundle` and refused without it, the transfer cap,
//! redirects kept within the repository's origin, and a web page that is not a Git server
//! reported without its content.

mod support;

use flotilla_gitfetch::protocol::{
    BasicAuth, Credential, Credentials, ErrorKind, FetchRequest, FetchResult, Limits,
};
use flotilla_testkit::git_http::{GitHttp, Options};
use support::{Repo, fetch, main, request};

const CM: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\ndata:\n  v: \"1\"\n";
const PASSWORD: &str = "hunter2-7f3a9c";

fn credentials(user: &str, password: &str) -> Credentials {
    Credentials {
        source: "Secret default/shop-git".into(),
        credential: Some(Credential::Basic(BasicAuth {
            username: user.into(),
            password: password.into(),
        })),
    }
}

fn https_request(server: &GitHttp, name: &str, auth: Option<Credentials>) -> FetchRequest {
    let mut r = request(&server.url(name), main("main"), &["apps/*"]);
    r.ca_bundle = server.ca_pem.clone().unwrap_or_default().into_bytes();
    r.credentials = auth;
    r
}

fn error(r: &FetchResult) -> (ErrorKind, &str) {
    let e = r.error.as_ref().expect("an error answer");
    (ErrorKind::try_from(e.kind).unwrap(), e.message.as_str())
}

/// A repository `shop` with one bundle, and an HTTPS server asking for `ann`'s password.
fn setup() -> (tempfile::TempDir, Repo, String, GitHttp) {
    let base = tempfile::tempdir().unwrap();
    let repo = Repo::init(base.path(), "shop");
    repo.write("apps/web/cm.yaml", CM);
    let commit = repo.commit("web at 1");
    let server = GitHttp::serve(
        base.path(),
        Options {
            tls: true,
            basic_auth: Some(("ann".into(), PASSWORD.into())),
        },
    );
    (base, repo, commit, server)
}

#[tokio::test]
async fn an_https_fetch_with_the_right_credentials_reads_the_commit_and_asks_only_when_told() {
    let (base, repo, first, server) = setup();
    let cache = base.path().join("cache/shop.git");
    let auth = Some(credentials("ann", PASSWORD));

    let done = fetch(&cache, &https_request(&server, "shop", auth.clone()))
        .await
        .unwrap();
    let r = done.result;
    assert_eq!(r.error, None);
    assert_eq!(r.commit, first);
    assert_eq!(r.roots, ["apps/web"]);
    assert_eq!(
        r.entries
            .iter()
            .find(|e| e.path == "apps/web/cm.yaml")
            .unwrap()
            .content,
        CM.as_bytes()
    );
    assert!(r.bytes_received > 0);
    assert!(
        !done.log.contains(PASSWORD),
        "the worker's log: {}",
        done.log
    );

    // The first request goes without credentials (as git's); after the 401 every request
    // carries them: ref advertisement, then the fetch.
    let seen = server.requests();
    assert_eq!(
        (seen[0].status, seen[0].authorized),
        (401, false),
        "{seen:?}"
    );
    assert!(
        seen[1..].iter().all(|s| s.authorized && s.status == 200),
        "{seen:?}"
    );
    assert!(seen.iter().any(|s| s.method == "POST"), "{seen:?}");

    // A listing after a push names the new commit; the fetch then updates the same cache.
    repo.write("apps/web/cm.yaml", CM.replace("\"1\"", "\"2\""));
    let second = repo.commit("web at 2");
    let mut list = https_request(&server, "shop", auth.clone());
    list.list_only = true;
    let listed = fetch(&cache, &list).await.unwrap().result;
    assert_eq!(
        (listed.commit.as_str(), listed.entries.len()),
        (second.as_str(), 0)
    );
    let r = fetch(&cache, &https_request(&server, "shop", auth))
        .await
        .unwrap()
        .result;
    assert_eq!(r.commit, second);
}

#[tokio::test]
async fn a_wrong_password_or_none_is_refused_saying_which_and_what_to_do() {
    let (base, _repo, _, server) = setup();
    let cache = base.path().join("cache/shop.git");

    let wrong = Some(credentials("ann", "not-the-password"));
    let r = fetch(&cache, &https_request(&server, "shop", wrong))
        .await
        .unwrap()
        .result;
    let (kind, message) = error(&r);
    assert_eq!(kind, ErrorKind::Transport);
    assert_eq!(
        message,
        format!(
            "{}/info/refs: authentication failed: the server refused the credentials of \
             Secret default/shop-git",
            server.url("shop")
        )
    );
    assert!(!message.contains("not-the-password"));

    let r = fetch(&cache, &https_request(&server, "shop", None))
        .await
        .unwrap()
        .result;
    let (_, message) = error(&r);
    assert!(
        message.ends_with(
            "the server asks for credentials (HTTP 401): name a kubernetes.io/basic-auth \
             Secret in spec.clientSecretName"
        ),
        "{message}"
    );
}

#[tokio::test]
async fn a_certificate_is_trusted_through_ca_bundle_and_refused_without_it() {
    let (base, _repo, _, server) = setup();
    let cache = base.path().join("cache/shop.git");
    let mut r = https_request(&server, "shop", Some(credentials("ann", PASSWORD)));
    r.ca_bundle.clear();
    let answer = fetch(&cache, &r).await.unwrap().result;
    let (kind, message) = error(&answer);
    assert_eq!(kind, ErrorKind::Transport);
    assert!(
        message.starts_with(&format!("https://127.0.0.1:{}: TLS: ", server.port)),
        "{message}"
    );
    assert!(message.contains("UnknownIssuer"), "{message}");
    assert!(
        message.ends_with("(is the server's CA in spec.caBundle?)"),
        "{message}"
    );
    // The credentials were never sent: no request reached the server.
    assert!(server.requests().is_empty(), "{:?}", server.requests());

    r.ca_bundle = b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n".to_vec();
    let answer = fetch(&cache, &r).await.unwrap().result;
    let (kind, message) = error(&answer);
    assert_eq!(kind, ErrorKind::Request);
    assert!(
        message.starts_with("spec.caBundle: certificate 1: "),
        "{message}"
    );
}

#[tokio::test]
async fn plain_http_serves_public_repositories_and_never_sends_credentials() {
    let base = tempfile::tempdir().unwrap();
    let repo = Repo::init(base.path(), "shop");
    repo.write("apps/web/cm.yaml", CM);
    let commit = repo.commit("one");
    let open = GitHttp::serve(base.path(), Options::default());
    let cache = base.path().join("cache/shop.git");
    let r = fetch(&cache, &request(&open.url("shop"), main("main"), &[]))
        .await
        .unwrap()
        .result;
    assert_eq!((r.error, r.commit), (None, commit));

    // A server asking for credentials over http:// never gets them.
    let locked = GitHttp::serve(
        base.path(),
        Options {
            tls: false,
            basic_auth: Some(("ann".into(), PASSWORD.into())),
        },
    );
    let mut req = request(&locked.url("shop"), main("main"), &[]);
    req.credentials = Some(credentials("ann", PASSWORD));
    let r = fetch(&base.path().join("cache/2.git"), &req)
        .await
        .unwrap()
        .result;
    assert!(r.error.is_some());
    assert!(
        locked.requests().iter().all(|s| !s.authorized),
        "{:?}",
        locked.requests()
    );
}

#[tokio::test]
async fn redirects_are_followed_within_the_origin_only() {
    let (base, _repo, first, server) = setup();
    let auth = Some(credentials("ann", PASSWORD));
    let r = fetch(
        &base.path().join("cache/a.git"),
        &https_request(&server, "moved/shop", auth.clone()),
    )
    .await
    .unwrap()
    .result;
    assert_eq!((r.error, r.commit), (None, first));

    let r = fetch(
        &base.path().join("cache/b.git"),
        &https_request(&server, "away/shop", auth),
    )
    .await
    .unwrap()
    .result;
    let (kind, message) = error(&r);
    assert_eq!(kind, ErrorKind::Request);
    assert!(
        message.contains("redirected to https://127.0.0.2:9: refused"),
        "{message}"
    );
}

#[tokio::test]
async fn a_web_page_is_reported_without_its_content_and_link_local_is_refused() {
    let (base, _repo, _, server) = setup();
    let r = fetch(
        &base.path().join("cache/a.git"),
        &https_request(&server, "html/internal", None),
    )
    .await
    .unwrap()
    .result;
    let (_, message) = error(&r);
    assert_eq!(
        message,
        format!(
            "{}/info/refs: not a Git smart-HTTP server (HTTP 200 OK, text/html)",
            server.url("html/internal")
        )
    );
    assert!(!message.contains("secret-marker"));

    let mut req = request(
        "https://169.254.169.254/latest/meta-data",
        main("main"),
        &[],
    );
    req.credentials = Some(credentials("ann", PASSWORD));
    let r = fetch(&base.path().join("cache/b.git"), &req)
        .await
        .unwrap()
        .result;
    let (kind, message) = error(&r);
    assert_eq!(kind, ErrorKind::Request);
    assert!(message.contains("link-local"), "{message}");
}

#[tokio::test]
async fn the_transfer_cap_counts_https_bytes() {
    let (base, repo, _, server) = setup();
    // Incompressible bytes outside `paths`: a depth-1 fetch still transfers them.
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let noise: Vec<u8> = (0..600_000)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect();
    repo.write("assets/noise.bin", noise);
    repo.commit("assets");
    let mut r = https_request(&server, "shop", Some(credentials("ann", PASSWORD)));
    r.limits = Some(Limits {
        max_fetch_bytes: 256 * 1024,
        ..Default::default()
    });
    let answer = fetch(&base.path().join("cache/a.git"), &r)
        .await
        .unwrap()
        .result;
    let (kind, message) = error(&answer);
    assert_eq!(kind, ErrorKind::Refused);
    assert_eq!(
        message,
        "repository transfer exceeded 256 KiB (--gitops-max-fetch-bytes)"
    );
}
