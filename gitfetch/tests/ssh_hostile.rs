//! The fetch worker over SSH against servers that are not SSH servers, or hostile ones: plain
//! TCP listeners the test writes, in front of the real `flotilla-git-fetch` binary. A server that
//! never speaks costs the worker's deadline and no more; endless or broken version lines, a
//! packet length of 4 GiB and a hang-up are each answered at once as a transport failure (retried
//! with back-off) naming the address and what was wrong, never read into memory without bound.

mod support;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::time::{Duration, Instant};

use flotilla_gitfetch::launch::LaunchError;
use flotilla_gitfetch::protocol::{ErrorKind, FetchRequest};
use flotilla_testkit::sshd::keygen;
use support::{credentials, ssh_request};

/// A hostile server on a free loopback port: `serve` gets each accepted connection.
fn server(serve: fn(std::net::TcpStream)) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || serve(stream));
        }
    });
    port
}

/// An SSH request to the server on `port`, with a real key and a `known_hosts` line for it.
fn hostile_request(dir: &std::path::Path, port: u16) -> FetchRequest {
    let client = keygen(dir, "client", "ed25519");
    let host = keygen(dir, "host", "ed25519");
    let host_pub = std::fs::read_to_string(host.with_extension("pub")).unwrap();
    ssh_request(
        &format!("ssh://git@127.0.0.1:{port}/shop.git"),
        credentials(
            std::fs::read(client).unwrap(),
            format!("[127.0.0.1]:{port} {host_pub}"),
        ),
    )
}

/// Runs the fetch with the worker's deadline at `deadline`: the error answered, or how the
/// worker ended.
async fn outcome(
    port: u16,
    deadline: Duration,
) -> (Result<(ErrorKind, String), LaunchError>, Duration) {
    let base = tempfile::tempdir().unwrap();
    let req = hostile_request(base.path(), port);
    let mut worker = support::worker();
    worker.timeout = deadline;
    let started = Instant::now();
    let got = worker
        .fetch(&base.path().join("cache.git"), &req)
        .await
        .map(|done| {
            let e = done.result.error.expect("an error answer");
            (ErrorKind::try_from(e.kind).unwrap(), e.message)
        });
    (got, started.elapsed())
}

/// Asserts the fetch ends well before its deadline with a transport failure that names the
/// server and contains `what`.
async fn refused_at_once(port: u16, what: &str) {
    let (got, took) = outcome(port, Duration::from_secs(15)).await;
    let (kind, message) = got.expect("an answer, not a killed worker");
    assert_eq!(kind, ErrorKind::Transport, "{message}");
    assert!(
        message.starts_with(&format!("127.0.0.1:{port}: ")),
        "{message}"
    );
    assert!(message.contains(what), "{message}");
    assert!(took < Duration::from_secs(10), "{took:?}");
}

#[tokio::test]
async fn a_server_that_never_sends_its_banner_costs_the_deadline() {
    let port = server(|mut s| {
        let mut sink = [0u8; 1024];
        while matches!(s.read(&mut sink), Ok(n) if n > 0) {}
    });
    let (got, took) = outcome(port, Duration::from_secs(2)).await;
    let err = got.expect_err("the worker is killed at its deadline");
    assert!(matches!(err, LaunchError::Timeout(_)), "{err}");
    assert!(took < Duration::from_secs(6), "{took:?}");
}

#[tokio::test]
async fn endless_lines_before_the_banner_are_cut() {
    let port = server(|mut s| {
        let line = [b'x'; 250];
        loop {
            if s.write_all(&line)
                .and_then(|()| s.write_all(b"\r\n"))
                .is_err()
            {
                return;
            }
        }
    });
    refused_at_once(port, "ssh: invalid SSH version string").await;
}

#[tokio::test]
async fn one_endless_banner_line_is_cut() {
    let port = server(|mut s| {
        let _ = s.write_all(b"SSH-2.0-");
        let chunk = [b'y'; 4096];
        while s.write_all(&chunk).is_ok() {}
    });
    refused_at_once(port, "ssh: invalid SSH version string").await;
}

#[tokio::test]
async fn garbage_after_the_banner_is_a_protocol_error() {
    let port = server(|mut s| {
        let _ = s.write_all(b"SSH-2.0-OpenSSH_9.6\r\n");
        // A packet length of 4 GiB, then noise.
        let _ = s.write_all(&[0xff, 0xff, 0xff, 0xf0, 7, 7, 7, 7]);
        let mut sink = [0u8; 1024];
        while matches!(s.read(&mut sink), Ok(n) if n > 0) {}
    });
    refused_at_once(port, "ssh: Bad packet size: 4294967280").await;
}

#[tokio::test]
async fn a_server_that_hangs_up_after_its_banner_is_a_transport_failure() {
    let port = server(|mut s| {
        let _ = s.write_all(b"SSH-2.0-OpenSSH_9.6\r\n");
    });
    // Reset or end of stream, as the kernel has it: either way the address and "ssh:".
    refused_at_once(port, "ssh: ").await;
}
