//! Records the messages this build's agent sends a hub, as the wire fixtures of a release
//! (issue 49 §6.6; the replay is `hub/tests/upgrade.rs`). Run at a release only:
//!
//! ```text
//! cargo run -p flotilla-hub --example record_wire -- 0.1 testkit/fixtures/wire/v0.1
//! ```
//!
//! A real nats-server, a hub and a real agent (`flotilla_agent::run` on a simulated cluster,
//! cluster `fixture-c1`) in this process; a plain NATS client beside them copies every message
//! published on the cluster's agent → hub subjects (registration, spec resync, status). The
//! scenario: the agent registers and is accepted, works `fixture-w1` is applied and reported;
//! the agent stops, `fixture-w2` is applied while it is away, and the agent comes back (same
//! local state) and resyncs with its full map (an agent holding few works sends the map, not
//! its digest), getting `fixture-w2` in the answer, and reports it. The messages the replay needs are picked out by what they are and
//! written with `flotilla_testkit::wire::Recording::save`.

#[path = "../tests/common/mod.rs"]
mod common;

use anyhow::{Context, Result, bail};
use common::work::*;
use common::*;
use flotilla_agent::StateConfig;
use flotilla_api::v1::{RegistrationRequest, SpecResyncRequest, WorkStatusReport};
use flotilla_bus::envelope::Event;
use flotilla_testkit::NatsServer;
use flotilla_testkit::wire::{Message, Recording};
use futures::StreamExt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

const CLUSTER: &str = "fixture-c1";

/// A message seen on the wire, with the scenario's phase when it was seen.
struct Seen {
    phase: u8,
    message: Message,
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [release, out] = args.as_slice() else {
        bail!("usage: record_wire RELEASE OUT_DIR (such as: 0.1 testkit/fixtures/wire/v0.1)");
    };
    let nats = NatsServer::start();
    let hub = start_hub(hub_config(&nats.url())).await;
    let phase = Arc::new(Mutex::new(0u8));
    let seen = Arc::new(Mutex::new(Vec::<Seen>::new()));
    let tap = tap(&nats, phase.clone(), seen.clone()).await?;

    let mut clusters = clusters_client(&hub).await;
    let mut works = works_client(&hub).await;
    let store = Arc::new(flotilla_agent::store::LocalStore::memory(CLUSTER));
    let config = || {
        let mut c = agent_config(CLUSTER, &nats.url());
        c.state = StateConfig::Shared(store.clone());
        c
    };
    let backend = sim_backend();
    let agent = accepted_agent_on(&mut clusters, config(), backend.clone()).await;
    works
        .apply_work(config_map_work(CLUSTER, "fixture-w1"))
        .await?;
    wait_work(&mut works, CLUSTER, "fixture-w1", "converged", |w| {
        converged_at(w, 1)
    })
    .await;
    // Two resync periods: the agent's periodic resync now lists fixture-w1.
    tokio::time::sleep(Duration::from_secs(5)).await;
    agent.stop().await;

    *phase.lock().unwrap() = 1;
    works
        .apply_work(config_map_work(CLUSTER, "fixture-w2"))
        .await?;
    let agent = start_agent_on(config(), backend);
    wait_work(&mut works, CLUSTER, "fixture-w2", "converged", |w| {
        converged_at(w, 1)
    })
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    agent.stop().await;
    tap.abort();

    let seen = std::mem::take(&mut *seen.lock().unwrap());
    let recording = Recording {
        release: release.clone(),
        note: format!(
            "flotilla-agent {} (commit {}), default settings but for short test intervals, on a \
             simulated cluster, against a hub of the same build in plain mode: recorded by \
             hub/examples/record_wire.rs",
            flotilla_api::version::VERSION,
            commit()
        ),
        messages: pick(&seen)?,
    };
    recording.save(std::path::Path::new(out))?;
    println!("{} messages written to {out}", recording.messages.len());
    Ok(())
}

/// Copies every message on the cluster's agent → hub subjects into `seen`.
async fn tap(
    nats: &NatsServer,
    phase: Arc<Mutex<u8>>,
    seen: Arc<Mutex<Vec<Seen>>>,
) -> Result<tokio::task::JoinHandle<()>> {
    let client = async_nats::connect(nats.url()).await?;
    let mut subs = futures::stream::select_all([
        client
            .subscribe(flotilla_bus::subjects::register(CLUSTER))
            .await?,
        client
            .subscribe(flotilla_bus::subjects::sync(CLUSTER))
            .await?,
        client
            .subscribe(flotilla_bus::subjects::status_of_cluster(CLUSTER))
            .await?,
    ]);
    Ok(tokio::spawn(async move {
        let _client = client;
        while let Some(m) = subs.next().await {
            let headers = m
                .headers
                .iter()
                .flat_map(|h| h.iter())
                .flat_map(|(n, vs)| vs.iter().map(move |v| (n.to_string(), v.to_string())))
                .collect();
            let message = Message {
                name: String::new(),
                about: String::new(),
                subject: m.subject.to_string(),
                reply: m.reply.map(|r| r.to_string()),
                headers,
                payload: m.payload,
            };
            let phase = *phase.lock().unwrap();
            seen.lock().unwrap().push(Seen { phase, message });
        }
    }))
}

/// Picks the messages the replay uses, by what they are.
fn pick(seen: &[Seen]) -> Result<Vec<Message>> {
    let event = |m: &Message| Event::decode(&m.payload, 1 << 20).ok();
    let resync = |m: &Message| {
        event(m).and_then(|e| e.decode_data::<SpecResyncRequest>("SpecResyncRequest").ok())
    };
    let work_status = |m: &Message, work: &str| {
        event(m)
            .and_then(|e| e.decode_data::<WorkStatusReport>("WorkStatusReport").ok())
            .is_some_and(|r| r.work_name == work)
    };
    let kind = |m: &Message, k: &str| {
        flotilla_bus::subjects::StatusSubject::parse(&m.subject).is_ok_and(|s| s.kind == k)
    };
    let first = |name: &str, about: &str, f: &dyn Fn(&Seen) -> bool| -> Result<Message> {
        let s = seen.iter().find(|s| f(s)).context(format!("no {name}"))?;
        Ok(named(&s.message, name, about))
    };
    let last = |name: &str, about: &str, f: &dyn Fn(&Seen) -> bool| -> Result<Message> {
        let s = seen
            .iter()
            .rev()
            .find(|s| f(s))
            .context(format!("no {name}"))?;
        Ok(named(&s.message, name, about))
    };
    let register = first(
        "register",
        "the agent's first registration request (a new cluster: answered Pending)",
        &|s| {
            event(&s.message).is_some_and(|e| {
                e.decode_data::<RegistrationRequest>("RegistrationRequest")
                    .is_ok()
            }) && s.message.subject == flotilla_bus::subjects::register(CLUSTER)
        },
    )?;
    let resync_empty = first(
        "resync-empty",
        "its first spec resync: its full map, empty",
        &|s| resync(&s.message).is_some_and(|r| r.versions.is_empty()),
    )?;
    Ok(vec![
        register,
        resync_empty,
        first("lease", "its first lease renewal", &|s| {
            kind(&s.message, flotilla_bus::subjects::KIND_LEASE)
        })?,
        first("cluster-status", "its first cluster status report", &|s| {
            kind(&s.message, flotilla_bus::subjects::KIND_CLUSTER)
        })?,
        last(
            "work-status-w1",
            "its last status of fixture-w1 (generation 1) before it stopped",
            &|s| s.phase == 0 && work_status(&s.message, "fixture-w1"),
        )?,
        last(
            "resync-w1",
            "its last periodic resync before it stopped: its full map {fixture-w1: 1} (an agent holding few works sends the map, not its digest)",
            &|s| s.phase == 0 && resync(&s.message).is_some_and(|r| r.versions.len() == 1),
        )?,
        first(
            "resync-w1-back",
            "back after fixture-w2 was applied while it was away: its full map {fixture-w1: 1}, answered with fixture-w2",
            &|s| s.phase == 1 && resync(&s.message).is_some_and(|r| r.versions.len() == 1),
        )?,
        last(
            "work-status-w2",
            "its last status of fixture-w2 (generation 1), received in the resync answer",
            &|s| s.phase == 1 && work_status(&s.message, "fixture-w2"),
        )?,
    ])
}

fn named(m: &Message, name: &str, about: &str) -> Message {
    Message {
        name: name.into(),
        about: about.into(),
        ..m.clone()
    }
}

/// The commit this build is from, when git can say.
fn commit() -> String {
    std::process::Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .filter(|c| !c.is_empty())
        .unwrap_or_else(|| "unknown".into())
}
