//! How exec and port-forward sessions end when things die, and how many one identity may hold:
//! the real kubectl 1.32 through the hub to simulated clusters. The agent going (its task
//! aborted: its NATS connection drops, as when its process is killed) and the hub stopping
//! each end every open session with a message kubectl prints; an identity holds its 32
//! sessions across clusters at once and its 33rd is refused naming the flag.

use crate::cluster_proxy::{kubectl, proxy_hub, wait_inventory};
use crate::cluster_proxy_streams::{POD, sessions, with_pod, with_pod_leased};
use crate::common;

use common::kubectl::Kubectl;
use common::tokens::ADMIN;
use common::*;
use flotilla_testkit::NatsServer;
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::process::{Child, ChildStdin};

/// A running `kubectl exec -i web -- cat` whose echo came back once.
pub(crate) struct Exec {
    pub(crate) child: Child,
    _stdin: ChildStdin,
}

pub(crate) async fn open_exec(kubectl: &Kubectl) -> Exec {
    let mut child = kubectl
        .command(&["exec", "-i", "web", "--", "cat"])
        .spawn()
        .expect("kubectl runs");
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    stdin.write_all(b"before\n").await.unwrap();
    let mut line = String::new();
    tokio::time::timeout(SOON, stdout.read_line(&mut line))
        .await
        .expect("the echo came")
        .unwrap();
    assert_eq!(line, "before\n");
    // Keep reading what it prints.
    tokio::spawn(async move {
        let mut sink = Vec::new();
        let _ = stdout.read_to_end(&mut sink).await;
    });
    Exec {
        child,
        _stdin: stdin,
    }
}

/// A running `kubectl port-forward pod/web LOCAL:80`.
pub(crate) struct Forward {
    pub(crate) child: Child,
    pub(crate) port: u16,
}

pub(crate) async fn open_forward(kubectl: &Kubectl) -> Forward {
    let port = flotilla_testkit::free_port();
    let mut child = kubectl
        .command(&["port-forward", "pod/web", &format!("{port}:80")])
        .stdin(Stdio::null())
        .spawn()
        .expect("kubectl runs");
    let mut out = BufReader::new(child.stdout.take().unwrap()).lines();
    let line = tokio::time::timeout(SOON, out.next_line())
        .await
        .expect("kubectl port-forward started in time")
        .unwrap();
    assert!(
        line.as_deref()
            .is_some_and(|l| l.starts_with("Forwarding from")),
        "kubectl said {line:?}"
    );
    tokio::spawn(async move { while let Ok(Some(_)) = out.next_line().await {} });
    Forward { child, port }
}

/// A connection through the port-forward whose echo came back once: its session is open.
pub(crate) async fn forwarded(forward: &Forward) -> TcpStream {
    let mut tcp = TcpStream::connect(("127.0.0.1", forward.port))
        .await
        .unwrap();
    tcp.write_all(b"ping").await.unwrap();
    let mut back = [0u8; 4];
    tokio::time::timeout(SOON, tcp.read_exact(&mut back))
        .await
        .expect("the echo came")
        .unwrap();
    assert_eq!(&back, b"ping");
    tcp
}

/// Waits for a kubectl to end by itself: its exit code, stderr, and how long it took.
pub(crate) async fn ended(child: Child, since: Instant) -> (Option<i32>, String, Duration) {
    let out = tokio::time::timeout(Duration::from_secs(30), child.wait_with_output())
        .await
        .expect("kubectl ended")
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        since.elapsed(),
    )
}

/// Waits until `done`.
pub(crate) async fn until(done: impl Fn() -> bool, what: &str) {
    let deadline = Instant::now() + SOON;
    while !done() {
        assert!(Instant::now() < deadline, "{what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_dying_ends_execs_and_port_forwards_naming_the_cluster() {
    let nats = NatsServer::start();
    let (hub, agent, admin) = with_pod_leased(&nats, 1).await;
    let exec = open_exec(&admin).await;
    let forward = open_forward(&admin).await;
    let mut tcp = forwarded(&forward).await;
    // The exec, the port-forward connection's own place and its forwarded connection.
    assert_eq!(sessions(&hub), 3);
    // The agent goes without a word.
    drop(agent);
    let started = Instant::now();
    let (code, stderr, took) = ended(exec.child, started).await;
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("cluster edge-1 became unavailable"),
        "{stderr}"
    );
    assert!(took < Duration::from_secs(12), "{took:?}");
    // The forwarded connection is closed and kubectl ends the port-forward, saying why.
    let mut rest = Vec::new();
    let _ = tokio::time::timeout(SOON, tcp.read_to_end(&mut rest)).await;
    let (code, stderr, took) = ended(forward.child, started).await;
    assert_ne!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains("cluster edge-1 became unavailable"),
        "{stderr}"
    );
    assert!(took < Duration::from_secs(15), "{took:?}");
    until(|| sessions(&hub) == 0, "every session ended").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hub_stopping_ends_its_execs_and_port_forwards_with_a_word() {
    let nats = NatsServer::start();
    let (hub, _agent, admin) = with_pod(&nats).await;
    let exec = open_exec(&admin).await;
    let forward = open_forward(&admin).await;
    let _tcp = forwarded(&forward).await;
    let proxy = hub.cluster_proxy.clone().expect("serving the proxy");
    assert_eq!(proxy.open_sessions(), 3);
    let started = Instant::now();
    tokio::time::timeout(SOON, hub.stop())
        .await
        .expect("the hub stopped with sessions open");
    assert_eq!(proxy.open_sessions(), 0, "a session outlived the hub");
    let (code, stderr, _) = ended(exec.child, started).await;
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("the hub is shutting down"), "{stderr}");
    // The port-forward ends too, saying why: the hub waits for kubectl to read its pair's
    // error stream and close the connection itself (a GOAWAY first would race the reading).
    let (code, stderr, _) = ended(forward.child, started).await;
    assert_ne!(code, Some(0), "{stderr}");
    assert!(stderr.contains("the hub is shutting down"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_identity_holds_32_sessions_at_once_and_its_33rd_is_refused_naming_the_flag() {
    let nats = NatsServer::start();
    let hub = proxy_hub(&nats).await;
    // Two clusters: an agent serves at most 16 sessions of one caller.
    let _agents = [
        start_agent(agent_config("edge-1", &nats.url())),
        start_agent(agent_config("edge-2", &nats.url())),
    ];
    let mut admins = Vec::new();
    for name in ["edge-1", "edge-2"] {
        wait_inventory(&hub, name, true).await;
        let admin = kubectl(&hub, name, ADMIN).pinned("1.32");
        admin.ok(&["apply", "-f", "-"], Some(POD)).await;
        admin
            .ok(
                &["wait", "--for=condition=Ready", "pod/web", "--timeout=20s"],
                None,
            )
            .await;
        admins.push(admin);
    }
    // Each port-forward connection takes a place of its own. edge-1: 15 connections through
    // one port-forward; edge-2: 11 more and 4 execs; 32 with the two places.
    let forwards = [
        open_forward(&admins[0]).await,
        open_forward(&admins[1]).await,
    ];
    let mut open = Vec::new();
    for (forward, n) in forwards.iter().zip([15, 11]) {
        for _ in 0..n {
            open.push(forwarded(forward).await);
        }
    }
    let mut execs = Vec::new();
    for _ in 0..4 {
        execs.push(open_exec(&admins[1]).await);
    }
    assert_eq!(sessions(&hub), 32);
    // The 33rd: an exec is refused (over WebSocket, then kubectl's SPDY retry), naming the flag.
    let err = admins[0]
        .fails(&["exec", "web", "--", "echo", "hi"], None)
        .await;
    assert!(
        err.contains("already has 32 exec, attach and port-forward sessions open")
            && err.contains("--cluster-proxy-sessions-per-identity"),
        "{err}"
    );
    // So is a 33rd port-forward, before it is answered.
    let err = admins[0]
        .fails(&["port-forward", "pod/web", "0:80"], None)
        .await;
    assert!(
        err.contains("already has 32 exec, attach and port-forward sessions open")
            && err.contains("--cluster-proxy-sessions-per-identity"),
        "{err}"
    );
    // A 33rd forwarded connection is refused alone: kubectl drops it, the port-forward goes on.
    let mut refused = TcpStream::connect(("127.0.0.1", forwards[1].port))
        .await
        .unwrap();
    refused.write_all(b"ping").await.unwrap();
    let mut nothing = Vec::new();
    let _ = tokio::time::timeout(SOON, refused.read_to_end(&mut nothing)).await;
    assert!(nothing.is_empty(), "{nothing:?}");
    // Every echo still flows; one session closed makes room for another.
    for tcp in open.iter_mut() {
        tcp.write_all(b"more").await.unwrap();
        let mut back = [0u8; 4];
        tokio::time::timeout(SOON, tcp.read_exact(&mut back))
            .await
            .expect("the echo came")
            .unwrap();
        assert_eq!(&back, b"more");
    }
    drop(open.pop());
    until(
        || sessions(&hub) == 31,
        "a closed connection's session ended",
    )
    .await;
    assert_eq!(
        admins[1]
            .ok(&["exec", "web", "--", "echo", "hi"], None)
            .await,
        "hi\n"
    );
    drop(open);
    drop(execs);
    drop(forwards);
    until(|| sessions(&hub) == 0, "every session ended").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_gone_while_the_pod_reads_no_stdin_ends_its_session() {
    let nats = NatsServer::start();
    let (hub, _agent, admin) = with_pod(&nats).await;
    // The pod never reads stdin: kubectl's stdin backs up to the hub, which waits for room.
    let mut child = admin
        .command(&["exec", "-i", "web", "--", "sleep", "600"])
        .spawn()
        .expect("kubectl runs");
    let mut stdin = child.stdin.take().unwrap();
    let writer = tokio::spawn(async move {
        let block = vec![b'x'; 64 * 1024];
        while stdin.write_all(&block).await.is_ok() {}
    });
    until(|| sessions(&hub) == 1, "the exec opened").await;
    // Its window and kubectl's buffers full.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(sessions(&hub), 1);
    // kubectl is killed (Ctrl-C twice, a closed laptop): the hub finds it gone within a few
    // of its pings, and the session ends at the agent too.
    let killed = Instant::now();
    child.start_kill().unwrap();
    let _ = child.wait().await;
    until(|| sessions(&hub) == 0, "the session of a gone client ended").await;
    assert!(
        killed.elapsed() < Duration::from_secs(15),
        "{:?}",
        killed.elapsed()
    );
    writer.abort();
}
