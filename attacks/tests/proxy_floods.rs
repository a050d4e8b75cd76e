//! Floods of the cluster proxy (issue 42, finding 4) by API tokens, against the real hub and
//! agent: a read-only token sending `GET`s with large bodies that never end, a writer sending
//! many large slow bodies at once, and one token opening every call it can. The agent's and
//! the hub's memory stay bounded (`VmHWM` against `VmRSS` before, from `/proc/<pid>/status`),
//! every refusal is a clear `Status` and counted, and another token is still served.

use flotilla_attacks::fleet::{SOON, memory_kib, metric_samples_text};
use flotilla_attacks::{AgentOptions, Fleet, HubOptions, Server, on_every_server};
use flotilla_testkit::free_port;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::{oneshot, watch};

/// An admin token (the CLI's).
const ADMIN: &str = "admin-token-0123456789";
/// A read-only token: the attacker.
const VIEWER: &str = "viewer-token-0123456789";
/// Another read-only token, which must still be served.
const OTHER_VIEWER: &str = "other-viewer-token-0123456789";
/// What a Kubernetes API server accepts as a body, and the proxy too.
const MAX_BODY: usize = 3 * 1024 * 1024;
/// What each flooding call sends of its body before it stalls: all but its last byte.
const HELD: usize = MAX_BODY - 1;
/// `GET`s with bodies in the read-only flood (before issue 42 the agent kept ~3 MiB each).
const GET_CALLS: usize = 96;
/// Writes with large slow bodies in the writer's flood.
const POST_CALLS: usize = 48;
/// How much the agent's and the hub's peak memory may grow under the read-only flood: nothing
/// reaches the agent, and the hub keeps no body (measured: 0 and 1 MiB; before issue 42 the
/// agent grew by 326 MiB and the hub by 148 MiB).
const READ_FLOOD_BOUND_MIB: u64 = 24;
/// How much the agent's peak memory may grow under the writers' flood: the default bound of
/// request-body bytes it holds (32 MiB), gathered into buffers that double as they fill
/// (measured: 55–61 MiB; before issue 42, 177 MiB).
const WRITE_FLOOD_AGENT_BOUND_MIB: u64 = 80;
/// How much the hub's peak memory may grow under the writers' flood: it holds one chunk of
/// each body, but ten bodies stream through it at full speed (1 MiB of each in flight) and each
/// chunk is copied into its frame and the NATS client's buffer, and the allocator keeps freed
/// pages per thread, so the peak follows how the threads were scheduled (measured alone: 67–89
/// MiB; 97 MiB while the suite ran binaries side by side). The bound stays below what a hub
/// that kept the bodies would reach: 48 stalled bodies of nearly 3 MiB are 144 MiB.
const WRITE_FLOOD_HUB_BOUND_MIB: u64 = 120;
/// The hub's cluster-proxy refusal counter.
const REFUSALS: &str = "flotilla_hub_cluster_proxy_refusals_total";

/// A fleet whose hub has API tokens and serves the cluster proxy on plain loopback HTTP, and
/// accepted agents for `clusters`; the proxy's port.
async fn proxy_fleet(
    server: Server,
    hub_flags: &[(&str, &str)],
    agent_flags: &[(&str, &str)],
    clusters: &[&str],
) -> (Fleet, u16) {
    let mut fleet = Fleet::secure(server).await;
    let tokens = fleet.dir().join("tokens.csv");
    let written = std::fs::write(
        &tokens,
        format!(
            "{ADMIN},admin,admin\n{VIEWER},mallory,read-only\n{OTHER_VIEWER},alice,read-only\n"
        ),
    );
    if let Err(e) = written {
        fleet.fail(&format!("writing {}: {e}", tokens.display()));
    }
    let port = free_port();
    let mut options = HubOptions::new()
        .flag("--api-token-file", &tokens.display().to_string())
        .flag("--cluster-proxy-listen", &format!("127.0.0.1:{port}"));
    for (flag, value) in hub_flags {
        options = options.flag(flag, value);
    }
    fleet.use_token(ADMIN);
    fleet.hub(options).await;
    for name in clusters {
        let mut agent = AgentOptions::default();
        for (flag, value) in agent_flags {
            agent = agent.flag(flag, value);
        }
        fleet.agent_with(name, agent);
        flotilla_attacks::wait_for!(
            fleet,
            format!("{name} to register"),
            SOON,
            fleet.cluster(name).await
        );
        fleet.cli_ok(&["accept", name]).await;
        fleet.wait_available(name).await;
    }
    (fleet, port)
}

/// What one call got back: its status and the start of its body.
#[derive(Debug, Clone)]
struct Reply {
    status: u16,
    body: String,
}

/// One call on its own connection: its head, then `send` bytes of a body declared
/// `declared` bytes long (`None`: no body), and then nothing until `release`.
struct Call {
    /// How many body bytes were written before the write side stopped (finished or cut).
    written: oneshot::Receiver<usize>,
    /// The reply, as soon as a whole head (and what follows of the body within a moment) came.
    reply: tokio::task::JoinHandle<Option<Reply>>,
}

fn call(
    port: u16,
    method: &str,
    path: &str,
    token: &str,
    body: Option<(usize, usize)>,
    release: watch::Receiver<bool>,
) -> Call {
    let head = match body {
        Some((declared, _)) => format!(
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {token}\r\n\
             Content-Type: application/json\r\nContent-Length: {declared}\r\n\r\n"
        ),
        None => format!(
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {token}\r\n\r\n"
        ),
    };
    let send = body.map_or(0, |(_, send)| send);
    let (written_tx, written) = oneshot::channel();
    let (reply_tx, reply_rx) = oneshot::channel::<tokio::net::tcp::OwnedReadHalf>();
    tokio::spawn(async move {
        let Ok(Ok(stream)) = tokio::time::timeout(
            Duration::from_secs(10),
            tokio::net::TcpStream::connect(("127.0.0.1", port)),
        )
        .await
        else {
            let _ = written_tx.send(0);
            return;
        };
        let (read, mut write) = stream.into_split();
        let _ = reply_tx.send(read);
        let mut sent = 0;
        if write.write_all(head.as_bytes()).await.is_ok() {
            let chunk = vec![b' '; 64 * 1024];
            while sent < send {
                let n = chunk.len().min(send - sent);
                let wrote =
                    tokio::time::timeout(Duration::from_secs(60), write.write_all(&chunk[..n]));
                if !matches!(wrote.await, Ok(Ok(()))) {
                    break;
                }
                sent += n;
            }
        }
        let _ = written_tx.send(sent);
        // The body never ends: the connection stays open until the test lets it go.
        let mut release = release;
        let _ = tokio::time::timeout(SOON * 4, release.wait_for(|r| *r)).await;
        drop(write);
    });
    let reply = tokio::spawn(async move {
        let mut read = reply_rx.await.ok()?;
        let mut buf = Vec::new();
        let mut chunk = [0u8; 16 * 1024];
        // The head, however long the hub takes (the test bounds the wait).
        let at = loop {
            let n = read.read(&mut chunk).await.ok()?;
            if n == 0 {
                return None;
            }
            buf.extend_from_slice(&chunk[..n]);
            if let Some(at) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break at;
            }
        };
        // What follows of the body within a moment (a Status is small; a watch streams).
        while buf.len() < at + 4 + 4096 {
            match tokio::time::timeout(Duration::from_millis(500), read.read(&mut chunk)).await {
                Ok(Ok(n)) if n > 0 => buf.extend_from_slice(&chunk[..n]),
                _ => break,
            }
        }
        let text = String::from_utf8_lossy(&buf).into_owned();
        let status = text.split(' ').nth(1)?.parse().ok()?;
        Some(Reply {
            status,
            body: text[at + 4..].to_string(),
        })
    });
    Call { written, reply }
}

/// `(VmRSS, VmHWM)` of the hub and of agent `cluster`, in KiB.
fn memory(fleet: &Fleet, cluster: &str) -> ((u64, u64), (u64, u64)) {
    let read = |pid: Option<u32>, what: &str| match pid.and_then(memory_kib) {
        Some(m) => m,
        None => fleet.fail(&format!("reading the {what}'s /proc/<pid>/status")),
    };
    (
        read(fleet.hub_pid(), "hub"),
        read(fleet.agent_pid(cluster), "agent"),
    )
}

/// Fails unless peak memory grew by at most `bound` MiB over resident memory before.
fn check_growth(fleet: &Fleet, what: &str, before: (u64, u64), after: (u64, u64), bound: u64) {
    let grown_mib = after.1.saturating_sub(before.0) / 1024;
    fleet.check(grown_mib <= bound, || {
        format!(
            "the {what}'s peak memory grew by {grown_mib} MiB under the flood (VmRSS {} MiB \
             before, VmHWM {} MiB after), over the {bound} MiB bound",
            before.0 / 1024,
            after.1 / 1024
        )
    });
}

/// Waits until every call's write side stopped; the body bytes written in all.
async fn written(fleet: &Fleet, calls: &mut [Call]) -> usize {
    let mut total = 0;
    for c in calls.iter_mut() {
        match tokio::time::timeout(SOON * 4, &mut c.written).await {
            Ok(Ok(n)) => total += n,
            Ok(Err(_)) => {}
            Err(_) => fleet.fail("a flooding call was still writing its body after 120 s"),
        }
    }
    total
}

/// Every call's reply, each waited for at most `within`.
async fn replies(calls: Vec<Call>, within: Duration) -> Vec<Option<Reply>> {
    let waits = calls
        .into_iter()
        .map(|c| async move { tokio::time::timeout(within, c.reply).await.ok()?.ok()? });
    futures::future::join_all(waits).await
}

on_every_server!(a_read_only_token_sending_get_bodies_that_never_end_is_refused_before_the_agent_and_memory_stays_bounded);

/// Finding 4: a read-only token floods the proxy with `GET`s, `HEAD`s and watches carrying
/// bodies of nearly 3 MiB that never end. Before issue 42 the agent kept each body until it
/// ended (20 → 822 MiB for 256 calls).
async fn a_read_only_token_sending_get_bodies_that_never_end_is_refused_before_the_agent_and_memory_stays_bounded(
    server: Server,
) {
    let (fleet, port) = proxy_fleet(server, &[], &[], &["edge"]).await;
    let (hub_before, agent_before) = memory(&fleet, "edge");
    let (release, released) = watch::channel(false);
    let mut calls: Vec<Call> = (0..GET_CALLS)
        .map(|i| {
            let (method, path) = match i % 4 {
                0 => (
                    "GET",
                    "/clusters/edge/api/v1/namespaces/default/configmaps".to_string(),
                ),
                1 => (
                    "GET",
                    format!("/clusters/edge/api/v1/namespaces/default/configmaps/c{i}"),
                ),
                2 => (
                    "GET",
                    "/clusters/edge/api/v1/namespaces/default/configmaps?watch=true".to_string(),
                ),
                _ => (
                    "HEAD",
                    "/clusters/edge/api/v1/namespaces/default/pods".to_string(),
                ),
            };
            call(
                port,
                method,
                &path,
                VIEWER,
                Some((MAX_BODY, HELD)),
                released.clone(),
            )
        })
        .collect();
    let sent = written(&fleet, &mut calls).await;
    // What was sent reaches the agent within moments; let it land before measuring.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (hub_after, agent_after) = memory(&fleet, "edge");
    eprintln!(
        "[{}] {GET_CALLS} GETs with bodies ({} MiB sent): agent VmRSS {} → VmHWM {} MiB, hub \
         VmRSS {} → VmHWM {} MiB",
        fleet.server.version,
        sent >> 20,
        agent_before.0 / 1024,
        agent_after.1 / 1024,
        hub_before.0 / 1024,
        hub_after.1 / 1024
    );
    check_growth(
        &fleet,
        "agent",
        agent_before,
        agent_after,
        READ_FLOOD_BOUND_MIB,
    );
    check_growth(&fleet, "hub", hub_before, hub_after, READ_FLOOD_BOUND_MIB);

    let replies = replies(calls, Duration::from_secs(10)).await;
    let _ = release.send(true);
    for (i, reply) in replies.iter().enumerate() {
        let Some(reply) = reply else {
            fleet.fail(&format!("GET {i} with a body got no answer"));
        };
        fleet.check(reply.status == 400, || {
            format!(
                "GET {i} with a body was answered {}: {}",
                reply.status, reply.body
            )
        });
        // HEAD answers carry no body; the others say what was wrong.
        if i % 4 != 3 {
            fleet.check(
                reply.body.contains("body") && reply.body.contains("GET"),
                || format!("the refusal of GET {i} does not say why: {}", reply.body),
            );
        }
    }
    let metrics = fleet.metrics().await;
    let refused = metric_samples_text(&metrics, REFUSALS);
    fleet.check(refused.contains("body_on_read"), || {
        format!("the refusals are not counted by reason body_on_read:\n{refused}")
    });
    let agent_running = fleet.agent_pid("edge").and_then(memory_kib).is_some();
    fleet.check(agent_running, || "the agent died".into());
}

on_every_server!(
    a_writer_sending_many_large_bodies_that_never_end_is_bounded_per_agent_and_refused_with_429
);

/// Finding 4 for writers: many writes with bodies of nearly 3 MiB that never end. The bytes of
/// request bodies in flight to one agent are bounded (`--cluster-proxy-body-bytes-per-cluster`
/// at the hub, `--cluster-proxy-body-bytes` at the agent); calls past it are refused with a 429
/// saying so.
async fn a_writer_sending_many_large_bodies_that_never_end_is_bounded_per_agent_and_refused_with_429(
    server: Server,
) {
    let (fleet, port) = proxy_fleet(server, &[], &[], &["edge"]).await;
    let (hub_before, agent_before) = memory(&fleet, "edge");
    let (release, released) = watch::channel(false);
    let mut calls: Vec<Call> = (0..POST_CALLS)
        .map(|_| {
            call(
                port,
                "POST",
                "/clusters/edge/api/v1/namespaces/default/configmaps",
                ADMIN,
                Some((MAX_BODY, HELD)),
                released.clone(),
            )
        })
        .collect();
    let sent = written(&fleet, &mut calls).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (hub_after, agent_after) = memory(&fleet, "edge");
    eprintln!(
        "[{}] {POST_CALLS} POSTs with bodies ({} MiB sent): agent VmRSS {} → VmHWM {} MiB, hub \
         VmRSS {} → VmHWM {} MiB",
        fleet.server.version,
        sent >> 20,
        agent_before.0 / 1024,
        agent_after.1 / 1024,
        hub_before.0 / 1024,
        hub_after.1 / 1024
    );
    check_growth(
        &fleet,
        "agent",
        agent_before,
        agent_after,
        WRITE_FLOOD_AGENT_BOUND_MIB,
    );
    check_growth(
        &fleet,
        "hub",
        hub_before,
        hub_after,
        WRITE_FLOOD_HUB_BOUND_MIB,
    );
    let replies = replies(calls, Duration::from_secs(10)).await;
    let refused: Vec<&Reply> = replies
        .iter()
        .flatten()
        .filter(|r| r.status == 429)
        .collect();
    fleet.check(!refused.is_empty(), || {
        format!("no write was refused with 429: {replies:?}")
    });
    fleet.check(refused.iter().all(|r| r.body.contains("in flight")), || {
        format!("a 429 does not say why: {refused:?}")
    });
    let _ = release.send(true);
    let metrics = fleet.metrics().await;
    let counted = metric_samples_text(&metrics, REFUSALS);
    fleet.check(counted.contains("body_bytes"), || {
        format!("the refusals are not counted by reason body_bytes:\n{counted}")
    });
    // The budget comes back: a small write goes through once the stalled calls are gone.
    let body =
        r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"after"},"data":{"a":"b"}}"#;
    let deadline = std::time::Instant::now() + SOON;
    let served = |r: &Option<Reply>| {
        r.as_ref()
            .is_some_and(|r| r.status == 201 || r.status == 409)
    };
    let mut last = raw_post(port, body).await;
    while !served(&last) && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(500)).await;
        last = raw_post(port, body).await;
    }
    fleet.check(served(&last), || {
        format!("a small write after the flood was not served: {last:?}")
    });
}

/// A small complete POST of `body` and its reply.
async fn raw_post(port: u16, body: &str) -> Option<Reply> {
    let head = format!(
        "POST /clusters/edge/api/v1/namespaces/default/configmaps HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\
         Authorization: Bearer {ADMIN}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let exchange = async {
        let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .ok()?;
        s.write_all(head.as_bytes()).await.ok()?;
        let mut buf = Vec::new();
        let mut chunk = [0u8; 8192];
        loop {
            let n = s.read(&mut chunk).await.ok()?;
            if n == 0 {
                break;
            }
            buf.extend_from_slice(&chunk[..n]);
            let text = String::from_utf8_lossy(&buf);
            if let Some(at) = text.find("\r\n\r\n")
                && text[at + 4..].contains('}')
            {
                break;
            }
        }
        let text = String::from_utf8_lossy(&buf).into_owned();
        let at = text.find("\r\n\r\n")?;
        Some(Reply {
            status: text.split(' ').nth(1)?.parse().ok()?,
            body: text[at + 4..].to_string(),
        })
    };
    tokio::time::timeout(Duration::from_secs(10), exchange)
        .await
        .ok()?
}

on_every_server!(one_token_cannot_take_every_proxy_slot_of_the_hub_or_of_an_agent);

/// Slots: a read-only token opens watches until it is refused. The agent serves at most
/// `--cluster-proxy-calls-per-caller` calls of one caller and the hub at most
/// `--cluster-proxy-calls-per-identity` of one token; both refuse with a 429 saying which share
/// is taken, and another token is still served.
async fn one_token_cannot_take_every_proxy_slot_of_the_hub_or_of_an_agent(server: Server) {
    const PER_CALLER: usize = 4;
    const PER_IDENTITY: usize = 6;
    let (fleet, port) = proxy_fleet(
        server,
        &[("--cluster-proxy-calls-per-identity", "6")],
        &[("--cluster-proxy-calls-per-caller", "4")],
        &["edge-a", "edge-b"],
    )
    .await;
    let (release, released) = watch::channel(false);
    let watch_path = |cluster: &str| {
        format!("/clusters/{cluster}/api/v1/namespaces/default/configmaps?watch=true")
    };
    let mut open = Vec::new();
    let mut answered = Vec::new();
    // One at a time, so each refusal is the one expected: edge-a's agent takes PER_CALLER, the
    // next is refused by the agent; edge-b's take the rest of the hub's share, the next is
    // refused by the hub.
    let plan: Vec<&str> = std::iter::repeat_n("edge-a", PER_CALLER + 1)
        .chain(std::iter::repeat_n("edge-b", PER_IDENTITY - PER_CALLER + 1))
        .collect();
    for cluster in &plan {
        let c = call(
            port,
            "GET",
            &watch_path(cluster),
            VIEWER,
            None,
            released.clone(),
        );
        let reply = match tokio::time::timeout(Duration::from_secs(15), c.reply).await {
            Ok(Ok(Some(r))) => r,
            other => fleet.fail(&format!("a watch on {cluster} got no answer: {other:?}")),
        };
        answered.push((cluster.to_string(), reply.clone()));
        open.push(c.written);
    }
    let statuses: Vec<u16> = answered.iter().map(|(_, r)| r.status).collect();
    let mut want = vec![200; PER_CALLER];
    want.push(429);
    want.extend(std::iter::repeat_n(200, PER_IDENTITY - PER_CALLER));
    want.push(429);
    fleet.check(statuses == want, || {
        format!("watches answered {statuses:?}, want {want:?}: {answered:?}")
    });
    let agent_refusal = &answered[PER_CALLER].1.body;
    fleet.check(
        agent_refusal.contains("mallory") && agent_refusal.contains("per caller"),
        || format!("the agent's refusal does not say whose share is taken: {agent_refusal}"),
    );
    let hub_refusal = &answered[plan.len() - 1].1.body;
    fleet.check(
        hub_refusal.contains("mallory")
            && hub_refusal.contains("--cluster-proxy-calls-per-identity"),
        || format!("the hub's refusal does not say whose share is taken: {hub_refusal}"),
    );
    // Another token is served by both, while the first holds its share.
    for cluster in ["edge-a", "edge-b"] {
        let c = call(
            port,
            "GET",
            &format!("/clusters/{cluster}/api/v1/namespaces/default/configmaps"),
            OTHER_VIEWER,
            None,
            released.clone(),
        );
        let reply = tokio::time::timeout(Duration::from_secs(15), c.reply).await;
        fleet.check(matches!(&reply, Ok(Ok(Some(r))) if r.status == 200), || {
            format!("another token's list of {cluster} was not served: {reply:?}")
        });
    }
    let metrics = fleet.metrics().await;
    let counted = metric_samples_text(&metrics, REFUSALS);
    fleet.check(counted.contains("identity_calls"), || {
        format!("the hub's refusal is not counted by reason identity_calls:\n{counted}")
    });
    let _ = release.send(true);
    drop(open);
}
