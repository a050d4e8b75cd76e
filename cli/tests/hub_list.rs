//! `--hub` / `FLOTILLA_HUB` with several hubs: an unreachable one is passed over for the next,
//! and when none answers the error names every hub tried.

mod common;

use common::{HubBuilder, SOON, run_cli};
use flotilla_testkit::{NatsServer, binary, free_port};
use std::process::Command;
use std::time::Instant;

#[test]
fn an_unreachable_hub_in_the_list_is_passed_over_for_the_next() {
    let nats = NatsServer::start();
    let dir = tempfile::tempdir().unwrap();
    let hub = HubBuilder::new(&nats, dir.path()).start();
    let dead = format!("http://127.0.0.1:{}", free_port());
    let list = format!("{dead}, {}", hub.grpc);
    // The hub is started in the background: wait until it answers through the list.
    let started = Instant::now();
    let out = loop {
        let out = run_cli(&list, &["get", "clusters"], None);
        if out.code == Some(0) || started.elapsed() > SOON {
            break out;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    assert_eq!(out.code, Some(0), "{}\n{}", out.stderr, hub.proc.output());
    // kubectl's way: "No resources found" on stderr, naming the hub that answered.
    assert_eq!(
        out.stderr.trim(),
        format!("No clusters found on {}.", hub.grpc),
        "the live hub answered"
    );

    // The same list from the environment.
    let out = Command::new(binary("flotilla"))
        .args(["get", "clusters"])
        .env("FLOTILLA_HUB", &list)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn when_no_hub_answers_the_error_lists_every_hub_tried() {
    let a = format!("http://127.0.0.1:{}", free_port());
    let b = format!("http://127.0.0.1:{}", free_port());
    let out = run_cli(&format!("{a},{b}"), &["get", "clusters"], None);
    assert_ne!(out.code, Some(0));
    let err = out.stderr.trim_end();
    assert!(
        err.starts_with(&format!(
            "error: cannot use any of the 2 hubs tried: {a}: unreachable ("
        )) && err.contains(&format!("; {b}: unreachable ("))
            && err.ends_with("is flotilla-hub running? (set --hub or FLOTILLA_HUB)")
            && err.lines().count() == 1,
        "{err}"
    );
    assert!(out.stdout.is_empty());
}
