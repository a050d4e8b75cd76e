//! The transport authenticates the hub (issue 42, finding 1). NATS sends its `INFO` line in
//! plaintext before TLS starts, and a client adds every server that line advertises to its
//! reconnect pool. A man in the middle who rewrites that one line, then resets the link, moves
//! a client that trusts the system's roots to a server of its own holding any public
//! certificate — there it would receive the attacker's works.
//!
//! Here the "public certificate" is a certificate of the attacker's CA placed among the
//! agent's system roots (`SSL_CERT_FILE`, which the TLS client's root loader reads), and the
//! relay rewrites only the `INFO` line.

use flotilla_attacks::fleet::{Output, run};
use flotilla_attacks::onpath::{Ca, InfoRelay, TlsServer};
use flotilla_attacks::{AgentOptions, Fleet, Server, on_every_server};
use flotilla_testkit::{Proc, binary};
use std::time::{Duration, Instant};

/// How long the agent gets to follow the injected server after the link is reset (it retries
/// within a few seconds; a follower connects within one or two backoff steps).
const FOLLOW_WITHIN: Duration = Duration::from_secs(12);
/// How long an agent gets to connect through the relay at first.
const CONNECT_WITHIN: Duration = Duration::from_secs(20);
/// How long a binary gets to refuse its configuration.
const REFUSE_WITHIN: Duration = Duration::from_secs(10);

/// Waits until the relay rewrote an `INFO` line and the link had a moment to carry `CONNECT`.
async fn wait_relayed(relay: &InfoRelay, what: &str) {
    let deadline = Instant::now() + CONNECT_WITHIN;
    while relay.injected() == 0 {
        assert!(
            Instant::now() < deadline,
            "{what}: no client came through the relay within {CONNECT_WITHIN:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
}

/// The names of the clients that reached the attacker's server within [`FOLLOW_WITHIN`].
async fn followers(attacker: &TlsServer) -> Vec<String> {
    let deadline = Instant::now() + FOLLOW_WITHIN;
    loop {
        let names: Vec<String> = attacker
            .client_names()
            .await
            .into_iter()
            .filter(|n| n.contains("flotilla"))
            .collect();
        if !names.is_empty() || Instant::now() >= deadline {
            return names;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

on_every_server!(an_injected_info_line_does_not_move_an_agent_without_a_pinned_ca);

/// The attack on a plain-mode agent over TLS (no credentials: the one mode that still
/// may trust the system's roots): one rewritten `INFO`, one reset, and the agent must keep to
/// the URL it was given.
async fn an_injected_info_line_does_not_move_an_agent_without_a_pinned_ca(server: Server) {
    let dir = tempfile::tempdir().expect("a temp dir");
    let (hub_ca, attacker_ca) = (Ca::new("hub CA"), Ca::new("a public CA"));
    let real = TlsServer::start(&server.binary, dir.path(), "real", &hub_ca);
    let attacker = TlsServer::start(&server.binary, dir.path(), "attacker", &attacker_ca);
    // The agent's "system roots": the hub's CA (so TLS to the real server works without
    // --nats-ca) and the attacker's, standing for any public CA.
    let roots = dir.path().join("system-roots.pem");
    std::fs::write(&roots, format!("{}{}", hub_ca.pem(), attacker_ca.pem()))
        .expect("write the roots");
    let relay = InfoRelay::start(
        real.nats.port(),
        format!("127.0.0.1:{}", attacker.nats.port()),
    )
    .await;
    let mut cmd = std::process::Command::new(binary("flotilla-agent"));
    cmd.args(["--cluster-name", "edge-1", "--nats-url", &relay.url()])
        .arg("--state-dir")
        .arg(dir.path().join("state"))
        .env_remove("FLOTILLA_NATS_CA")
        .env("SSL_CERT_FILE", &roots)
        .env("RUST_LOG", "info")
        .env("NO_COLOR", "1");
    let agent = Proc::spawn("flotilla-agent edge-1", cmd, dir.path().join("agent.log"));
    wait_relayed(&relay, &format!("[{}] the agent", server.version)).await;
    relay.cut();
    let followed = followers(&attacker).await;
    assert!(
        followed.is_empty(),
        "[{}] after one rewritten INFO line and a reset, the agent (no --nats-ca) connected to \
         the server the man in the middle advertised: {followed:?}",
        server.version
    );
    drop(agent);
}

on_every_server!(a_secure_agent_pinned_to_the_hubs_ca_never_completes_tls_with_an_injected_server);

/// The same attack on a secure agent, whose CA is pinned: it may try the advertised server,
/// but no certificate outside the hub's CA is taken, so it never gets as far as `CONNECT`
/// there — and it keeps its place in the real fleet.
async fn a_secure_agent_pinned_to_the_hubs_ca_never_completes_tls_with_an_injected_server(
    server: Server,
) {
    let mut fleet = Fleet::secure_tls(server.clone()).await;
    fleet.hub(Default::default()).await;
    let attacker_ca = Ca::new("a public CA");
    let attacker = TlsServer::start(&server.binary, fleet.dir(), "attacker", &attacker_ca);
    let roots = fleet.dir().join("system-roots.pem");
    std::fs::write(&roots, attacker_ca.pem()).expect("write the roots");
    let relay = InfoRelay::start(
        fleet.nats.port(),
        format!("127.0.0.1:{}", attacker.nats.port()),
    )
    .await;
    let options = AgentOptions {
        env: vec![("SSL_CERT_FILE".into(), roots.display().to_string())],
        ..AgentOptions::default()
    };
    let url = relay.url();
    fleet.agent_at("edge-1", &url, options);
    wait_relayed(&relay, &format!("[{}] the agent", server.version)).await;
    relay.cut();
    let followed = followers(&attacker).await;
    fleet.check(followed.is_empty(), || {
        format!(
            "a secure agent with --nats-ca completed TLS and CONNECT with the server a man in \
             the middle advertised: {followed:?}"
        )
    });
}

/// Why `out` is not a refusal to start that asks for the CA, if it is not.
fn not_refused(what: &str, out: &Output) -> Option<String> {
    let said = format!("{}{}", out.stderr, out.stdout);
    (out.code != Some(64) || !said.contains("--nats-ca")).then(|| {
        format!(
            "{what} over tls:// without --nats-ca did not refuse to start with exit code 64 \
             naming --nats-ca (exit {:?}): {}",
            out.code,
            said.trim()
        )
    })
}

on_every_server!(secure_mode_over_tls_refuses_to_start_without_a_pinned_ca);

/// Secure mode over TLS requires the CA: an agent given credentials and a `tls://` URL but no
/// `--nats-ca` (which would trust the system's roots) refuses to start, and so does the
/// add-on.
async fn secure_mode_over_tls_refuses_to_start_without_a_pinned_ca(server: Server) {
    let fleet = Fleet::secure_tls(server).await;
    let options = AgentOptions {
        without_ca: true,
        ..AgentOptions::default()
    };
    let mut agent = fleet.agent_command("edge-1", &fleet.nats_url(), &options);
    agent.env_remove("FLOTILLA_NATS_CA");
    let mut addon = std::process::Command::new(binary("flotilla-addon-fleet-metrics"));
    addon
        .args(["--cluster-name", "edge-1", "--nats-url", &fleet.nats_url()])
        .arg("--creds")
        .arg(fleet.bootstrap_creds())
        .env_remove("FLOTILLA_NATS_CA");
    let (agent, addon) = tokio::join!(
        run(agent.into(), None, REFUSE_WITHIN),
        run(addon.into(), None, REFUSE_WITHIN)
    );
    let problems: Vec<String> = [
        not_refused("flotilla-agent with --bootstrap-creds", &agent),
        not_refused("flotilla-addon-fleet-metrics with --creds", &addon),
    ]
    .into_iter()
    .flatten()
    .collect();
    fleet.check(problems.is_empty(), || problems.join("\n"));
}

/// With `init --tls-first` on a server that supports it (2.10.4 and later: the current one),
/// nothing crosses the link before TLS — there is no `INFO` line for anyone on the path to
/// rewrite — and the hub and an agent with `--nats-tls-first` work as before. (Debian's 2.9
/// refuses `handshake_first` at start; docs/security.md says which guarantee holds there.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_tls_first_the_server_says_nothing_before_tls_and_the_fleet_works() {
    let server = Server::get("current");
    let mut fleet = Fleet::secure_tls_first(server).await;
    let mut raw = tokio::net::TcpStream::connect(("127.0.0.1", fleet.nats.port()))
        .await
        .expect("connect to the server");
    let mut first = [0u8; 64];
    let said = tokio::time::timeout(
        Duration::from_secs(2),
        tokio::io::AsyncReadExt::read(&mut raw, &mut first),
    )
    .await;
    let plaintext = match said {
        Ok(Ok(n)) => String::from_utf8_lossy(&first[..n]).into_owned(),
        _ => String::new(),
    };
    fleet.check(!plaintext.starts_with("INFO"), || {
        format!("a server made with init --tls-first sent a plaintext line first: {plaintext:?}")
    });
    drop(raw);
    fleet.hub(Default::default()).await;
    fleet.accepted_agent("edge-1").await;
}
