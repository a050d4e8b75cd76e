//! Tracing for every binary: logs to stderr filtered by `RUST_LOG`, and — when
//! `OTEL_EXPORTER_OTLP_ENDPOINT` is set — OpenTelemetry traces exported over OTLP/gRPC.
//!
//! A work's trace crosses processes through the CloudEvents `traceparent` extension
//! ([`crate::envelope::Event::traceparent`]): the hub's API span → the cluster actor's spec
//! event → the agent's apply → the agent's status event → the hub's status handling.
//! [`traceparent`] reads the W3C header of the current span; [`follow`] makes a span a child of
//! one received.
//!
//! Sampling follows the OpenTelemetry environment: `OTEL_TRACES_SAMPLER` (`always_on`,
//! `always_off`, `traceidratio`, `parentbased_always_on`, `parentbased_always_off`,
//! `parentbased_traceidratio` — the default) and `OTEL_TRACES_SAMPLER_ARG` (the ratio, default
//! 1.0). Decisions are made where a trace starts (the hub's API) and followed downstream, so a
//! ratio of 0.001 keeps one work in a thousand — with every one of its clusters — and a
//! 100,000-cluster fanout does not drown the collector. `OTEL_SERVICE_NAME` overrides the
//! service name.

use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{Sampler, SdkTracerProvider};
use std::collections::HashMap;
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::Layer as _;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

/// Keeps the trace exporter alive; flushes what is buffered when dropped.
#[must_use = "dropping the guard stops trace export"]
pub struct TracingGuard {
    provider: Option<SdkTracerProvider>,
}

impl Drop for TracingGuard {
    fn drop(&mut self) {
        if let Some(p) = self.provider.take() {
            let _ = p.shutdown();
        }
    }
}

/// The sampler the environment asks for (see the module documentation).
pub fn sampler_from_env() -> Result<Sampler, String> {
    let name =
        std::env::var("OTEL_TRACES_SAMPLER").unwrap_or_else(|_| "parentbased_traceidratio".into());
    let arg = std::env::var("OTEL_TRACES_SAMPLER_ARG").ok();
    sampler(&name, arg.as_deref())
}

/// A sampler by its OpenTelemetry name and argument.
pub fn sampler(name: &str, arg: Option<&str>) -> Result<Sampler, String> {
    let ratio = match arg {
        None => 1.0,
        Some(a) => a
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|r| (0.0..=1.0).contains(r))
            .ok_or_else(|| format!("OTEL_TRACES_SAMPLER_ARG {a:?}: a ratio between 0 and 1"))?,
    };
    Ok(match name.trim() {
        "always_on" => Sampler::AlwaysOn,
        "always_off" => Sampler::AlwaysOff,
        "traceidratio" => Sampler::TraceIdRatioBased(ratio),
        "parentbased_always_on" => Sampler::ParentBased(Box::new(Sampler::AlwaysOn)),
        "parentbased_always_off" => Sampler::ParentBased(Box::new(Sampler::AlwaysOff)),
        "parentbased_traceidratio" => {
            Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(ratio)))
        }
        other => {
            return Err(format!(
                "OTEL_TRACES_SAMPLER {other:?}: one of always_on, always_off, traceidratio, \
                 parentbased_always_on, parentbased_always_off, parentbased_traceidratio"
            ));
        }
    })
}

/// Sets up logging (stderr, `RUST_LOG` or `default_filter`) and, with
/// `OTEL_EXPORTER_OTLP_ENDPOINT`, trace export for `service`. A bad sampler setting or an
/// exporter that cannot be built is reported on stderr and traces stay off; logging works.
pub fn init(service: &str, default_filter: &str) -> TracingGuard {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_filter));
    // RUST_LOG filters the logs only: a simulator logging at `warn` still traces its agents.
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_filter(filter);
    let provider = std::env::var("OTEL_EXPORTER_OTLP_ENDPOINT")
        .ok()
        .filter(|e| !e.is_empty())
        .and_then(|_| match exporter(service) {
            Ok(p) => Some(p),
            Err(e) => {
                eprintln!("{service}: traces are off: {e}");
                None
            }
        });
    match &provider {
        Some(p) => {
            // Flotilla's own spans (hub, agent, simulator) at INFO and above are traced.
            let otel = tracing_opentelemetry::layer()
                .with_tracer(p.tracer(service.to_string()))
                .with_filter(Targets::new().with_target("flotilla", tracing::Level::INFO));
            let _ = tracing_subscriber::registry()
                .with(fmt)
                .with(otel)
                .try_init();
        }
        None => {
            let _ = tracing_subscriber::registry().with(fmt).try_init();
        }
    }
    TracingGuard { provider }
}

fn exporter(service: &str) -> Result<SdkTracerProvider, String> {
    use opentelemetry_otlp::WithExportConfig;
    let sampler = sampler_from_env()?;
    let mut builder = opentelemetry_otlp::SpanExporter::builder().with_tonic();
    if let Ok(endpoint) = std::env::var("OTEL_EXPORTER_OTLP_ENDPOINT") {
        builder = builder.with_endpoint(endpoint);
    }
    let exporter = builder
        .build()
        .map_err(|e| format!("the OTLP exporter: {e}"))?;
    let name = std::env::var("OTEL_SERVICE_NAME").unwrap_or_else(|_| service.to_string());
    Ok(SdkTracerProvider::builder()
        .with_sampler(sampler)
        .with_resource(
            opentelemetry_sdk::Resource::builder()
                .with_service_name(name)
                .build(),
        )
        .with_batch_exporter(exporter)
        .build())
}

/// The W3C `traceparent` of the current span, when it is being traced and sampled.
pub fn traceparent() -> Option<String> {
    let context = tracing::Span::current().context();
    let mut carrier = HashMap::new();
    TraceContextPropagator::new().inject_context(&context, &mut carrier);
    carrier.remove("traceparent")
}

/// Makes `span` a child of the span a received `traceparent` names (nothing when it is absent
/// or malformed: the span starts a trace of its own, subject to sampling).
pub fn follow(span: &tracing::Span, traceparent: Option<&str>) {
    let Some(tp) = traceparent else {
        return;
    };
    let carrier: HashMap<String, String> = [("traceparent".to_string(), tp.to_string())].into();
    let parent = TraceContextPropagator::new().extract(&carrier);
    let _ = span.set_parent(parent);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samplers_are_read_from_their_opentelemetry_names() {
        assert!(matches!(sampler("always_on", None), Ok(Sampler::AlwaysOn)));
        assert!(matches!(
            sampler("traceidratio", Some("0.25")),
            Ok(Sampler::TraceIdRatioBased(r)) if r == 0.25
        ));
        assert!(matches!(
            sampler("parentbased_traceidratio", None),
            Ok(Sampler::ParentBased(_))
        ));
        let e = sampler("sometimes", None).unwrap_err();
        assert!(e.contains("OTEL_TRACES_SAMPLER \"sometimes\""), "{e}");
        let e = sampler("traceidratio", Some("2")).unwrap_err();
        assert!(e.contains("between 0 and 1"), "{e}");
    }

    #[test]
    fn without_a_traced_span_there_is_no_traceparent() {
        assert_eq!(traceparent(), None);
    }
}
