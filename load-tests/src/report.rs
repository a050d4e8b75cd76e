//! What a scenario reports: a short human summary on stdout and, as the last line, one JSON
//! object with the fields every scenario shares (plus its own), and the samples behind the
//! plots (hub RSS and convergence over time, latencies). A measured phase's CPU per role
//! (hub, its JetStream server, leaf servers, simulators, this driver) comes from the run's
//! [`crate::cpu_ledger`]; the control plane's per converged cluster is the headline figure.

use crate::cpu::{CpuUsage, Totals};
use crate::cpu_ledger::ticks_per_second;
use crate::topology::Topology;
use serde::Serialize;
use serde_json::{Map, Value};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The summary every scenario prints.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    /// Scenario name.
    pub scenario: &'static str,
    /// Clusters in the fleet.
    pub clusters: usize,
    /// Every cluster reached the expected state and nothing was lost.
    pub converged: bool,
    /// Seconds of the measured phase.
    pub seconds: f64,
    /// Latency percentiles of the measured phase, in milliseconds.
    pub p50_ms: f64,
    /// 90th percentile.
    pub p90_ms: f64,
    /// 99th percentile.
    pub p99_ms: f64,
    /// Hub CPU seconds during the measured phase (every hub process: `cpu_hub_s`).
    pub hub_cpu_seconds: Option<f64>,
    /// Clusters that converged in the measured phase, when the scenario counts them (else the
    /// control plane's CPU is divided over the whole fleet).
    pub clusters_converged: Option<usize>,
    /// CPU of the measured phase per role (`cpu_*` fields).
    #[serde(flatten)]
    pub cpu: CpuUsage,
    /// Peak RSS of the hub process.
    pub hub_peak_rss_bytes: Option<u64>,
    /// Messages per second through the hub's NATS server during the measured phase.
    pub msgs_per_second: Option<f64>,
    /// Errors (failed calls, lost clusters, missing works).
    pub errors: u64,
    /// Scenario-specific fields.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl Summary {
    /// A summary with no measurement yet.
    pub fn new(scenario: &'static str, clusters: usize) -> Self {
        Self {
            scenario,
            clusters,
            converged: false,
            seconds: 0.0,
            p50_ms: 0.0,
            p90_ms: 0.0,
            p99_ms: 0.0,
            hub_cpu_seconds: None,
            clusters_converged: None,
            cpu: CpuUsage::default(),
            hub_peak_rss_bytes: None,
            msgs_per_second: None,
            errors: 0,
            extra: Map::new(),
        }
    }

    /// Sets the percentiles from sorted latencies in milliseconds.
    pub fn latencies(&mut self, sorted_ms: &[f64]) {
        self.p50_ms = round(percentile(sorted_ms, 0.50));
        self.p90_ms = round(percentile(sorted_ms, 0.90));
        self.p99_ms = round(percentile(sorted_ms, 0.99));
    }

    /// Adds a scenario-specific field.
    pub fn set(&mut self, key: &str, value: impl Serialize) {
        self.extra.insert(
            key.to_string(),
            serde_json::to_value(value).unwrap_or(Value::Null),
        );
    }

    /// Prints the human summary, then the JSON line (last line of stdout).
    pub fn print(&self, topology: &str) {
        println!("scenario   {}", self.scenario);
        println!("topology   {topology}");
        println!("clusters   {}", self.clusters);
        println!(
            "converged  {}{}",
            self.converged,
            if self.errors > 0 {
                format!(" ({} errors)", self.errors)
            } else {
                String::new()
            }
        );
        println!("seconds    {:.2}", self.seconds);
        println!(
            "latency    p50 {:.0} ms, p90 {:.0} ms, p99 {:.0} ms",
            self.p50_ms, self.p90_ms, self.p99_ms
        );
        if let Some(cpu) = self.hub_cpu_seconds {
            println!("hub CPU    {cpu:.2} s");
        }
        self.print_cpu();
        if let Some(rss) = self.hub_peak_rss_bytes {
            println!("hub RSS    {:.1} MiB peak", rss as f64 / 1_048_576.0);
        }
        if let Some(m) = self.msgs_per_second {
            println!("NATS       {m:.0} msgs/s");
        }
        for (k, v) in &self.extra {
            println!("{k:<10} {v}");
        }
        println!(
            "{}",
            serde_json::to_string(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
        );
    }
}

impl Summary {
    /// The CPU lines of the human summary: the control plane first.
    fn print_cpu(&self) {
        let c = &self.cpu;
        let s = |v: Option<f64>| v.map_or_else(|| "-".to_string(), |v| format!("{v:.2} s"));
        if c.cpu_control_plane_s.is_some() {
            println!(
                "CPU        control plane {} (hub {} + JetStream {}), {} per converged cluster",
                s(c.cpu_control_plane_s),
                s(c.cpu_hub_s),
                s(c.cpu_jetstream_s),
                c.cpu_control_plane_ms_per_cluster
                    .map_or_else(|| "-".to_string(), |v| format!("{v:.3} ms")),
            );
        }
        println!(
            "CPU        leaves {}, simulators {}, driver {}",
            s(c.cpu_leaves_s),
            s(c.cpu_simulators_s),
            s(c.cpu_driver_s)
        );
    }
}

fn round(v: f64) -> f64 {
    (v * 10.0).round() / 10.0
}

/// The `p` quantile of sorted values (nearest rank), 0 when empty.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx.min(sorted.len() - 1)]
}

/// CPU seconds (user + system) and peak RSS (VmHWM) of a process, from /proc.
pub fn proc_stats(pid: u32) -> Option<(f64, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks: f64 = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    Some((
        ticks / ticks_per_second() as f64,
        status_kib(pid, "VmHWM:")? * 1024,
    ))
}

/// Current RSS of a process.
pub fn rss_bytes(pid: u32) -> Option<u64> {
    status_kib(pid, "VmRSS:").map(|k| k * 1024)
}

fn status_kib(pid: u32, field: &str) -> Option<u64> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()?
        .lines()
        .find(|l| l.starts_with(field))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// One sample of a run.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Sample {
    /// Seconds since the measured phase began.
    pub t: f64,
    /// Hub RSS.
    pub hub_rss_bytes: u64,
    /// Clusters converged so far.
    pub converged: usize,
}

/// Samples hub RSS and progress twice a second while a phase runs.
pub struct Sampler {
    samples: Arc<Mutex<Vec<Sample>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Sampler {
    /// Starts sampling the hub whose PID `hub_pid` holds (0: none; it changes when the hub is
    /// restarted); `progress` says how many clusters converged so far.
    pub fn start(
        hub_pid: Arc<std::sync::atomic::AtomicU32>,
        progress: impl Fn() -> usize + Send + 'static,
    ) -> Self {
        let samples: Arc<Mutex<Vec<Sample>>> = Arc::default();
        let s = samples.clone();
        let t0 = Instant::now();
        let task = tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_millis(500));
            loop {
                tick.tick().await;
                let sample = Sample {
                    t: t0.elapsed().as_secs_f64(),
                    hub_rss_bytes: Some(hub_pid.load(std::sync::atomic::Ordering::Relaxed))
                        .filter(|p| *p != 0)
                        .and_then(rss_bytes)
                        .unwrap_or(0),
                    converged: progress(),
                };
                s.lock().expect("samples lock").push(sample);
            }
        });
        Self { samples, task }
    }

    /// Stops sampling and returns the samples.
    pub fn finish(self) -> Vec<Sample> {
        self.task.abort();
        self.samples.lock().expect("samples lock").clone()
    }
}

/// CPU per role, NATS message count and the clock at the start of a measured phase.
pub struct Phase {
    started: Instant,
    cpu: Totals,
    msgs: Option<u64>,
}

impl Phase {
    /// Starts measuring.
    pub async fn begin(topology: &Topology) -> Self {
        Self {
            started: Instant::now(),
            cpu: topology.cpu().totals(),
            msgs: topology.nats_messages().await,
        }
    }

    /// When the phase began.
    pub fn started(&self) -> Instant {
        self.started
    }

    /// The CPU per role since the phase began, the control plane's divided over `clusters`.
    pub fn cpu_so_far(&self, topology: &Topology, clusters: usize) -> crate::cpu::CpuUsage {
        crate::cpu::usage(
            &self.cpu,
            &topology.cpu().totals(),
            ticks_per_second(),
            clusters,
        )
    }

    /// Fills the summary's time, CPU per role, hub RSS and message rate. Every hub process
    /// counts (a hub killed during the phase up to its kill, its restart from its start); the
    /// control plane's CPU is divided over `summary.clusters_converged`, or the whole fleet
    /// when the scenario does not count them.
    pub async fn end(&self, topology: &Topology, summary: &mut Summary) {
        let seconds = self.started.elapsed().as_secs_f64();
        summary.seconds = (seconds * 100.0).round() / 100.0;
        let clusters = summary.clusters_converged.unwrap_or(summary.clusters);
        summary.cpu = crate::cpu::usage(
            &self.cpu,
            &topology.cpu().totals(),
            ticks_per_second(),
            clusters,
        );
        summary.hub_cpu_seconds = summary.cpu.cpu_hub_s;
        let now = topology.hub_pid().and_then(proc_stats);
        summary.hub_peak_rss_bytes = now.map(|(_, rss)| rss);
        if let (Some(a), Some(b)) = (self.msgs, topology.nats_messages().await) {
            summary.msgs_per_second =
                Some((b.saturating_sub(a) as f64 / seconds.max(1e-3)).round());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_json_line_has_every_shared_field() {
        let mut s = Summary::new("fanout", 3);
        s.latencies(&[1.0, 2.0, 3.0]);
        s.set("efficiency", 0.5);
        let v: Value = serde_json::to_value(&s).unwrap();
        for key in [
            "scenario",
            "clusters",
            "converged",
            "seconds",
            "p50_ms",
            "p90_ms",
            "p99_ms",
            "hub_cpu_seconds",
            "clusters_converged",
            "cpu_hub_s",
            "cpu_jetstream_s",
            "cpu_leaves_s",
            "cpu_control_plane_s",
            "cpu_control_plane_ms_per_cluster",
            "cpu_simulators_s",
            "cpu_driver_s",
            "hub_peak_rss_bytes",
            "msgs_per_second",
            "errors",
            "efficiency",
        ] {
            assert!(v.get(key).is_some(), "{key} missing from {v}");
        }
        assert_eq!(v["p50_ms"], 2.0);
    }

    #[test]
    fn percentiles_use_the_nearest_rank() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 0.5), 51.0);
        assert_eq!(percentile(&v, 0.99), 99.0);
        assert_eq!(percentile(&[], 0.5), 0.0);
    }
}
