//! Every fleet scenario of `flotilla-load` at a small size, self-started (its own nats-server,
//! leaf servers where the scenario is about them, hub and simulated fleet): each must converge
//! with nothing lost and end its stdout with the JSON summary. Timing is not asserted here —
//! numbers come from the large runs recorded in BENCHMARKS.md.

use serde_json::Value;
use std::process::Command;

/// Runs `flotilla-load ARGS` and returns its last stdout line as JSON, after checking it
/// succeeded.
fn scenario(args: &[&str]) -> Value {
    // Fail with the install hint, not a confusing scenario error, when nats-server is missing.
    let nats = flotilla_testkit::nats_server_binary();
    let path = format!(
        "{}:{}",
        nats.parent()
            .map(|p| p.display().to_string())
            .unwrap_or_default(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new(env!("CARGO_BIN_EXE_flotilla-load"))
        .args(args)
        .env("PATH", path)
        // The hubs it starts inherit the tests' status stream bound.
        .env(
            "FLOTILLA_STATUS_STREAM_MAX_BYTES",
            flotilla_testkit::STATUS_STREAM_MAX_BYTES.to_string(),
        )
        .output()
        .expect("run flotilla-load");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "flotilla-load {args:?} failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    let last = stdout.lines().last().unwrap_or_default();
    let v: Value = serde_json::from_str(last)
        .unwrap_or_else(|e| panic!("last line is not JSON ({e}): {last:?}\n{stdout}"));
    for key in [
        "scenario",
        "clusters",
        "converged",
        "seconds",
        "p50_ms",
        "p90_ms",
        "p99_ms",
        "hub_cpu_seconds",
        "hub_peak_rss_bytes",
        "msgs_per_second",
        "errors",
        "cpu_hub_s",
        "cpu_jetstream_s",
        "cpu_leaves_s",
        "cpu_control_plane_s",
        "cpu_control_plane_ms_per_cluster",
        "cpu_simulators_s",
        "cpu_driver_s",
    ] {
        assert!(v.get(key).is_some(), "{key} missing from {v}");
    }
    assert_eq!(v["converged"], true, "{v}");
    assert_eq!(v["errors"], 0, "{v}");
    v
}

#[test]
fn register_brings_every_cluster_to_available() {
    let v = scenario(&["register", "--clusters", "25", "--timeout-seconds", "120"]);
    assert_eq!(v["clusters"], 25);
    assert!(v["hub_peak_rss_bytes"].as_u64().unwrap() > 0, "{v}");
}

#[test]
fn the_proxy_streams_a_list_and_delivers_every_watch_event_through_a_leaf_node() {
    let v = scenario(&[
        "proxy",
        "--clusters",
        "4",
        "--leaf-nodes",
        "1",
        "--list-mib",
        "2",
        "--list-repeats",
        "1",
        "--watches",
        "40",
        "--kube-agent",
        "--timeout-seconds",
        "120",
    ]);
    assert_eq!(v["list_objects"], 32, "{v}");
    assert!(v["list_bytes"].as_u64().unwrap() > 2 << 20, "{v}");
    assert!(v["list_kube_bytes"].as_u64().unwrap() > 2 << 20, "{v}");
    assert_eq!(v["watch_events_delivered"], 40, "{v}");
    assert_eq!(v["watch_hub_open_calls"], 40.0, "{v}");
    assert!(v["watch_close_seconds"].as_f64().is_some(), "{v}");
}

#[test]
fn the_proxy_measures_exec_and_port_forward_sessions_through_the_hub_a_leaf_and_directly() {
    let v = scenario(&[
        "proxy",
        "--clusters",
        "1",
        "--leaf-nodes",
        "1",
        "--list-mib",
        "0",
        "--watches",
        "0",
        "--sessions",
        "--session-execs",
        "5",
        "--session-echoes",
        "10",
        "--session-forward-mib",
        "2",
        "--session-idle",
        "4",
        "--session-idle-agents",
        "3",
        "--timeout-seconds",
        "120",
    ]);
    assert_eq!(
        v["session_paths"],
        serde_json::json!(["hub", "leaf", "direct"])
    );
    for path in ["hub", "leaf", "direct"] {
        for figure in [
            "exec_p50_ms",
            "exec_p99_ms",
            "echo_p50_ms",
            "forward_mib_per_second",
        ] {
            let key = format!("session_{path}_{figure}");
            assert!(v[&key].as_f64().is_some_and(|x| x > 0.0), "{key}: {v}");
        }
    }
    for key in [
        "session_hub_exec_p50_ms_ratio",
        "session_leaf_forward_mib_per_second_ratio",
        "session_tcp_forward_mib_per_second",
    ] {
        assert!(v[key].as_f64().is_some_and(|x| x > 0.0), "{key}: {v}");
    }
    for key in [
        "session_hub_bytes_per_exec_session",
        "session_agent_bytes_per_exec_session",
        "session_hub_bytes_per_forwarded_connection",
        "session_agent_bytes_per_forwarded_connection",
    ] {
        assert!(v[key].as_u64().is_some(), "{key}: {v}");
    }
}

#[test]
fn fanout_converges_and_reports_its_efficiency_and_plots() {
    let out = tempfile::tempdir().unwrap();
    let v = scenario(&[
        "fanout",
        "--clusters",
        "25",
        "--leaf-nodes",
        "2",
        // The works over ApplyWorks streams (the other scenarios apply one call each).
        "--streams",
        "2",
        "--timeout-seconds",
        "120",
        "--out",
        out.path().to_str().unwrap(),
    ]);
    let efficiency = v["efficiency"].as_f64().expect("efficiency");
    assert!(efficiency > 0.0, "{v}");
    assert!(v["status_events"].as_u64().unwrap() >= 25, "{v}");
    // The control plane's cost is known for a self-started topology, the leaves' apart.
    assert_eq!(v["clusters_converged"], 25, "{v}");
    assert!(
        v["cpu_control_plane_ms_per_cluster"].as_f64().is_some(),
        "{v}"
    );
    assert!(v["cpu_leaves_s"].as_f64().is_some(), "{v}");
    for plot in [
        "fanout-latency-cdf.png",
        "fanout-convergence.png",
        "fanout-hub-rss.png",
    ] {
        let bytes = std::fs::read(out.path().join(plot)).expect(plot);
        assert_eq!(&bytes[1..4], b"PNG", "{plot} is a PNG");
    }
}

#[test]
fn a_reconnect_storm_through_leaf_servers_converges_on_the_new_version() {
    let v = scenario(&[
        "reconnect-storm",
        "--clusters",
        "25",
        "--leaf-nodes",
        "2",
        "--timeout-seconds",
        "120",
    ]);
    assert_eq!(v["cut"], "leaf servers killed", "{v}");
}

#[test]
fn a_reconnect_storm_of_in_process_agents_converges() {
    let v = scenario(&[
        "reconnect-storm",
        "--clusters",
        "25",
        "--timeout-seconds",
        "120",
    ]);
    assert_eq!(v["cut"], "agent links down", "{v}");
}

#[test]
fn a_hub_killed_mid_fanout_loses_nothing() {
    let v = scenario(&[
        "hub-restart",
        "--clusters",
        "30",
        "--timeout-seconds",
        "120",
    ]);
    let at_kill = v["converged_at_kill"].as_u64().unwrap();
    // The killed hub up to its kill and the restarted one both count.
    assert!(v["cpu_hub_s"].as_f64().unwrap() > 0.0, "{v}");
    assert!(
        at_kill <= 15,
        "the kill came before the second half was applied: {v}"
    );
}

#[test]
fn flapping_clusters_do_not_disturb_the_rest_and_all_converge_after() {
    let v = scenario(&[
        "flapping",
        "--clusters",
        "30",
        "--share",
        "0.3",
        "--flap-seconds",
        "8",
        "--change-every-seconds",
        "2",
        "--mean-up-seconds",
        "1",
        "--mean-down-seconds",
        "1",
        "--timeout-seconds",
        "120",
    ]);
    assert!(v["flapping_clusters"].as_u64().unwrap() > 0, "{v}");
    assert!(
        v["link_downs"].as_u64().unwrap() > 0,
        "links really went down: {v}"
    );
    assert_eq!(v["steady_clusters_marked_unavailable"], 0, "{v}");
    assert_eq!(v["hub_stable"], true, "{v}");
}

#[test]
fn steady_reports_the_idle_hub() {
    let v = scenario(&["steady", "--clusters", "20", "--seconds", "3"]);
    assert!(v["hub_cpu_percent"].as_f64().is_some(), "{v}");
    assert!(v["msgs_per_second"].as_f64().is_some(), "{v}");
}

#[test]
fn the_transport_limit_runs_through_leaf_servers() {
    let v = scenario(&["transport-limit", "--clusters", "200", "--leaf-nodes", "2"]);
    assert!(v["round_trips_per_second"].as_f64().unwrap() > 0.0, "{v}");
}

#[test]
fn a_fleet_in_simulator_processes_registers() {
    let v = scenario(&[
        "register",
        "--clusters",
        "20",
        "--sim-processes",
        "2",
        "--timeout-seconds",
        "120",
    ]);
    assert_eq!(v["clusters"], 20);
}

#[test]
fn one_commit_to_every_bundle_reaches_every_cluster() {
    let v = scenario(&[
        "gitops",
        "--clusters",
        "10",
        "--bundles",
        "3",
        "--timeout-seconds",
        "120",
    ]);
    assert_eq!(v["bundles"], 3, "{v}");
    assert_eq!(v["initial_pairs_converged"], 30, "{v}");
    assert_eq!(v["commit_pairs_converged"], 30, "{v}");
}

#[test]
fn bad_arguments_fail_with_a_clear_error_and_start_nothing() {
    let out = Command::new(env!("CARGO_BIN_EXE_flotilla-load"))
        .args(["fanout", "--nats-url", "nats://127.0.0.1:1"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("give both --nats-url and --hub"), "{err}");
    let dir = tempfile::tempdir().unwrap();
    let profile = dir.path().join("p.yaml");
    std::fs::write(
        &profile,
        "taints: [{key: gpu, effect: NoSchedule, share: 0.1}]",
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_flotilla-load"))
        .args(["register", "--profile", profile.to_str().unwrap()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("taints[0].effect"), "{err}");
    let out = Command::new(env!("CARGO_BIN_EXE_flotilla-load"))
        .args(["proxy", "--sessions", "--session-idle", "17"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("--session-idle 17"), "{err}");
}

#[test]
fn the_apply_api_alone_stores_every_work() {
    let v = scenario(&[
        "apply",
        "--clusters",
        "20",
        "--works-per-cluster",
        "3",
        "--concurrency",
        "16",
    ]);
    assert_eq!(v["works_listed"], 60, "{v}");
    assert!(v["works_per_second"].as_f64().unwrap() > 0.0, "{v}");
}

#[test]
fn the_apply_api_over_streams_stores_every_work() {
    let v = scenario(&[
        "apply",
        "--clusters",
        "20",
        "--works-per-cluster",
        "3",
        "--streams",
        "2",
    ]);
    assert_eq!(v["streams"], 2, "{v}");
    assert_eq!(v["errors"], 0, "{v}");
    assert_eq!(v["works_listed"], 60, "{v}");
}
