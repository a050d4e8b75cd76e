//! `flotilla apply -f` of a many-document file: its works over one ApplyWorks stream with lines
//! in document order, and when the hub is gone, a report of exactly what was and was not
//! applied.

mod common;

use common::*;
use flotilla_testkit::NatsServer;

fn works(clusters: &[&str], per_cluster: usize) -> String {
    let mut out = String::new();
    for c in clusters {
        for i in 0..per_cluster {
            out.push_str(&format!(
                "---\napiVersion: work.open-cluster-management.io/v1\nkind: ManifestWork\nmetadata: {{namespace: {c}, name: w{i:03}}}\nspec:\n  workload:\n    manifests:\n      - {{apiVersion: v1, kind: ConfigMap, metadata: {{name: c{i}, namespace: default}}}}\n"
            ));
        }
    }
    out
}

#[test]
fn many_documents_apply_concurrently_in_order_and_a_lost_hub_is_reported_exactly() {
    let nats = NatsServer::start();
    let dir = tempfile::tempdir().unwrap();
    let hub = HubBuilder::new(&nats, dir.path()).auto_accept().start();
    let sim = start_sim(&nats, dir.path(), 2, "edge", &[]);
    wait_available(&hub, &[&hub.proc, &sim], "edge", 2);
    let file = dir.path().join("works.yaml");
    std::fs::write(&file, works(&["edge-0001", "edge-0002"], 100)).unwrap();
    let out = cli_ok(&hub.grpc, &["apply", "-f", file.to_str().unwrap()]);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 200, "{out}");
    assert!(
        lines[0].contains("/w000 applied (cluster edge-0001"),
        "{}",
        lines[0]
    );
    assert!(
        lines[199].contains("/w099 applied (cluster edge-0002"),
        "{}",
        lines[199]
    );

    // The hub dies mid-way: what was applied and what was not is said exactly.
    let mut hub = hub;
    std::fs::write(&file, works(&["edge-0001", "edge-0002"], 600)).unwrap();
    let mut child = std::process::Command::new(flotilla_testkit::binary("flotilla"))
        .args(["--hub", &hub.grpc, "apply", "-f", file.to_str().unwrap()])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    // The report is long: read stderr meanwhile, or the CLI blocks writing it.
    let mut stderr = child.stderr.take().unwrap();
    let err_reader = std::thread::spawn(move || {
        let mut text = String::new();
        std::io::Read::read_to_string(&mut stderr, &mut text).unwrap();
        text
    });
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(stdout));
    for _ in 0..20 {
        lines.next().expect("applied lines").unwrap();
    }
    hub.proc.kill();
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    let status = child.wait().unwrap();
    let err = err_reader.join().unwrap();
    assert!(!status.success(), "{err}");
    let applied = 20 + rest.len();
    assert!(
        err.contains(&format!(
            "the hub went away: {applied} of 1200 document(s) applied"
        )),
        "{applied} lines printed; {err}"
    );
    assert!(
        err.contains("document 1200 (ManifestWork edge-0002/w599)"),
        "{err}"
    );
    drop(sim);
}
