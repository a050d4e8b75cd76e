//! OpenTelemetry traces over OTLP from real processes: a hub and a simulated agent export to a
//! collector (a small OTLP/gRPC trace receiver in this test), and one applied work yields one
//! trace crossing both — the API call, the hub's apply, the agent's apply and the hub's
//! handling of the agent's status — linked through the CloudEvents `traceparent` extension.

mod common;

use common::{HubBuilder, run_cli, wait_for};
use flotilla_testkit::{NatsServer, free_port};
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use std::sync::{Arc, Mutex};

/// (service, span name, trace id) of every span received.
type Spans = Arc<Mutex<Vec<(String, String, Vec<u8>)>>>;

struct Collector(Spans);

#[tonic::async_trait]
impl TraceService for Collector {
    async fn export(
        &self,
        req: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        let mut spans = self.0.lock().unwrap();
        for rs in req.into_inner().resource_spans {
            let service = rs
                .resource
                .iter()
                .flat_map(|r| r.attributes.iter())
                .find(|kv| kv.key == "service.name")
                .and_then(|kv| kv.value.as_ref())
                .and_then(|v| match &v.value {
                    Some(
                        opentelemetry_proto::tonic::common::v1::any_value::Value::StringValue(s),
                    ) => Some(s.clone()),
                    _ => None,
                })
                .unwrap_or_default();
            for ss in rs.scope_spans {
                for s in ss.spans {
                    spans.push((service.clone(), s.name, s.trace_id));
                }
            }
        }
        Ok(tonic::Response::new(ExportTraceServiceResponse::default()))
    }
}

const WORK: &str = r#"apiVersion: work.open-cluster-management.io/v1
kind: ManifestWork
metadata: {namespace: tr-0001, name: traced}
spec:
  workload:
    manifests:
      - {apiVersion: v1, kind: ConfigMap, metadata: {name: t, namespace: default}, data: {a: b}}
"#;

#[test]
fn one_work_is_one_trace_from_the_api_through_the_agent_and_back() {
    let spans: Spans = Arc::default();
    let port = free_port();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let collector = Collector(spans.clone());
    runtime.spawn(async move {
        tonic::transport::Server::builder()
            .add_service(TraceServiceServer::new(collector))
            .serve(format!("127.0.0.1:{port}").parse().unwrap())
            .await
    });
    let endpoint = format!("http://127.0.0.1:{port}");
    let otel = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
        ("OTEL_BSP_SCHEDULE_DELAY", "200"),
        ("OTEL_TRACES_SAMPLER", "parentbased_always_on"),
    ];
    let nats = NatsServer::start();
    let dir = tempfile::tempdir().unwrap();
    let mut hub = HubBuilder::new(&nats, dir.path()).auto_accept();
    for (k, v) in otel {
        hub = hub.env(k, v);
    }
    let hub = hub.start();
    let mut cmd = std::process::Command::new(flotilla_testkit::binary("flotilla-sim"));
    cmd.args([
        "--nats-url",
        &nats.url(),
        "--clusters",
        "1",
        "--name-prefix",
        "tr",
    ])
    .args(["--pending-poll-seconds", "1", "--ready-delay-ms", "0"])
    .envs(otel);
    let sim = flotilla_testkit::Proc::spawn("flotilla-sim", cmd, dir.path().join("sim.log"));
    common::wait_available(&hub, &[&hub.proc, &sim], "tr-0001", 1);
    let out = run_cli(&hub.grpc, &["apply", "-f", "-"], Some(WORK));
    assert_eq!(out.code, Some(0), "{}{}", out.stdout, out.stderr);
    let trace = wait_for(
        "the work's spans at the collector",
        &[&hub.proc, &sim],
        || {
            let spans = spans.lock().unwrap().clone();
            println!(
                "spans so far: {:?}",
                spans
                    .iter()
                    .map(|(s, n, t)| format!("{s}/{n}/{}", t.len()))
                    .collect::<Vec<_>>()
            );
            let root = spans
                .iter()
                .find(|(svc, name, _)| svc == "flotilla-hub" && name == "ApplyWork")?;
            let in_trace = |svc: &str, name: &str| {
                spans
                    .iter()
                    .any(|(s, n, t)| s == svc && n == name && *t == root.2)
            };
            (in_trace("flotilla-hub", "work.apply")
                && in_trace("flotilla-sim", "work.apply")
                && in_trace("flotilla-hub", "work.status"))
            .then(|| root.2.clone())
        },
    );
    assert_eq!(trace.len(), 16, "a W3C trace id");
}
