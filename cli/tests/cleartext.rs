//! The CLI never sends a bearer token in the clear off loopback: the real `flotilla` binary
//! refuses before connecting.

use flotilla_testkit::binary;
use std::process::Command;
use std::time::{Duration, Instant};

const REFUSAL: &str = "refusing to send the bearer token in the clear to 10.1.2.3 \
(--hub http://10.1.2.3:50051): use an https:// hub with --ca (FLOTILLA_CA), or pass --insecure \
(FLOTILLA_INSECURE=true) to send it over plain http anyway";

#[test]
fn a_token_for_plain_http_off_loopback_is_refused_before_any_connection() {
    for verb in [
        &["get", "clusters"][..],
        &["join", "edge-1", "--nats-url", "nats://hub:4222"],
    ] {
        let started = Instant::now();
        let out = Command::new(binary("flotilla"))
            .args(["--hub", "http://10.1.2.3:50051", "--token", "x"])
            .args(verb)
            .env_remove("FLOTILLA_INSECURE")
            .output()
            .expect("run flotilla");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(64), "{verb:?}: {err}");
        assert!(
            err.starts_with("error: ")
                && err.trim_end().ends_with(REFUSAL)
                && err.lines().count() == 1,
            "{verb:?}: {err}"
        );
        assert!(out.stdout.is_empty());
        // No connection was tried: no "cannot reach", and no wait for the 5 s connect timeout.
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "{:?}",
            started.elapsed()
        );
    }
}
