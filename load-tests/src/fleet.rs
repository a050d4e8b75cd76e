//! The simulated fleet of a scenario: in this process (one [`Fleet`] per agent URL, so that
//! agents spread over the leaf servers), or `flotilla-sim` processes when one process cannot
//! hold the connections (`--sim-processes`, each at most ~15,000 agents under the machine's
//! open-file limit). In-process fleets can take every link down and up (the reconnect storm
//! without leaf servers); simulator processes play the profile's connectivity model themselves.

use crate::topology::{Topology, sibling_binary};
use anyhow::{Context, Result, bail};
use flotilla_sim::{Fleet, FleetConfig, FleetProfile};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// How the fleet is built.
#[derive(Debug, Clone)]
pub struct FleetArgs {
    /// Clusters.
    pub clusters: usize,
    /// Name prefix.
    pub name_prefix: String,
    /// Agents started per second, over the whole fleet.
    pub start_rate: u32,
    /// `flotilla-sim` processes (0 = agents in this process).
    pub sim_processes: usize,
    /// A fleet profile file.
    pub profile: Option<PathBuf>,
    /// Time for simulated workloads to become ready (a profile's `readyDelayMs` overrides it).
    pub ready_delay: Duration,
    /// How often each agent observes its works' resources (`--work-status-interval-ms`).
    pub work_status_interval: Duration,
    /// AddOnPlacementScore interval (None = no reports).
    pub score_interval: Option<Duration>,
    /// Secure mode: bootstrap credentials of the agents.
    pub bootstrap_creds: Option<PathBuf>,
    /// CA of the NATS servers' certificates.
    pub nats_ca: Option<PathBuf>,
    /// Agents per NATS connection (1: one each).
    pub share_connections: usize,
    /// Niceness of the `flotilla-sim` processes (0: as this process).
    pub sim_nice: u8,
}

/// A running fleet.
pub enum LoadFleet {
    /// Agents in this process.
    InProcess(Vec<Fleet>),
    /// `flotilla-sim` child processes (killed on drop).
    Processes(Vec<Child>),
}

impl FleetArgs {
    /// The name of cluster `n` (0-based) of the fleet.
    pub fn name(&self, n: usize) -> String {
        flotilla_sim::cluster_name(&self.name_prefix, n + 1)
    }

    /// Every cluster's name.
    pub fn names(&self) -> Vec<String> {
        (0..self.clusters).map(|n| self.name(n)).collect()
    }

    /// The loaded profile, if any.
    pub fn load_profile(&self) -> Result<Option<FleetProfile>> {
        self.profile
            .as_ref()
            .map(|p| FleetProfile::load(p).map_err(|e| anyhow::anyhow!("--profile {e}")))
            .transpose()
    }

    /// The simulator's configuration of the part `first..first+count` on `url`.
    fn config(&self, url: &str, first: usize, count: usize) -> Result<FleetConfig> {
        let mut c = FleetConfig::new(url, count);
        c.name_prefix = self.name_prefix.clone();
        c.first_index = first + 1;
        c.start_rate = self.start_rate;
        c.pending_poll = Duration::from_secs(2);
        c.work_status_interval = self.work_status_interval;
        c.ready_delay = self.ready_delay;
        c.scores = self
            .score_interval
            .map(flotilla_sim::scores::ScoreConfig::every);
        c.bootstrap_creds = self.bootstrap_creds.clone();
        c.nats.ca = self.nats_ca.clone();
        c.share_connections = self.share_connections;
        if let Some(p) = self.load_profile()? {
            c = c.with_profile(p);
        }
        Ok(c)
    }
}

/// Splits `total` into `parts` nearly equal ranges (first, count).
fn split(total: usize, parts: usize) -> Vec<(usize, usize)> {
    let parts = parts.max(1).min(total.max(1));
    let base = total / parts;
    let extra = total % parts;
    let mut first = 0;
    (0..parts)
        .map(|k| {
            let count = base + usize::from(k < extra);
            let r = (first, count);
            first += count;
            r
        })
        .collect()
}

impl LoadFleet {
    /// Starts the fleet against the topology's agent URLs.
    pub async fn start(topology: &Topology, args: &FleetArgs) -> Result<Self> {
        let urls = topology.agent_urls();
        if args.sim_processes == 0 {
            let parts = split(args.clusters, urls.len());
            let rate = (args.start_rate as usize / parts.len()).max(1) as u32;
            let mut starts = tokio::task::JoinSet::new();
            for (k, (first, count)) in parts.into_iter().enumerate() {
                let mut config = args.config(&urls[k % urls.len()], first, count)?;
                config.start_rate = rate;
                starts.spawn(async move { Fleet::start(&config).await });
            }
            let mut fleets = Vec::new();
            while let Some(r) = starts.join_next().await {
                fleets.push(r.context("fleet start task")??);
            }
            return Ok(Self::InProcess(fleets));
        }
        let parts = split(args.clusters, args.sim_processes);
        let rate = (args.start_rate as usize / parts.len()).max(1);
        let bin = sibling_binary("flotilla-sim");
        let mut children = Vec::new();
        for (k, (first, count)) in parts.into_iter().enumerate() {
            // `nice` executes the simulator in its own process: the child's pid is the
            // simulator's.
            let mut cmd = if args.sim_nice > 0 {
                let mut cmd = Command::new("nice");
                cmd.arg("-n").arg(args.sim_nice.to_string()).arg(&bin);
                cmd
            } else {
                Command::new(&bin)
            };
            cmd.arg("--nats-url")
                .arg(&urls[k % urls.len()])
                .arg("--clusters")
                .arg(count.to_string())
                .arg("--first-index")
                .arg((first + 1).to_string())
                .arg("--name-prefix")
                .arg(&args.name_prefix)
                .arg("--start-rate")
                .arg(rate.to_string())
                .arg("--pending-poll-seconds=2")
                .arg(format!(
                    "--work-status-interval-ms={}",
                    args.work_status_interval.as_millis()
                ))
                .arg(format!("--ready-delay-ms={}", args.ready_delay.as_millis()))
                .arg("--score-interval-seconds")
                .arg(
                    args.score_interval
                        .map_or(0, |d| d.as_secs().max(1))
                        .to_string(),
                );
            if let Some(p) = &args.profile {
                cmd.arg("--profile").arg(p);
            }
            if args.share_connections > 1 {
                cmd.arg(format!("--share-connections={}", args.share_connections));
            }
            if let Some(c) = &args.bootstrap_creds {
                cmd.arg("--bootstrap-creds").arg(c);
            }
            if let Some(c) = &args.nats_ca {
                cmd.arg("--nats-ca").arg(c);
            }
            let child = cmd
                .env("RUST_LOG", "warn")
                .stdout(Stdio::null())
                .stderr(Stdio::inherit())
                .spawn()
                .with_context(|| format!("starting {}", bin.display()))?;
            topology
                .cpu()
                .track(crate::cpu::Role::Simulator, child.id());
            children.push(child);
        }
        Ok(Self::Processes(children))
    }

    /// Takes every agent's link down (in-process fleets only).
    pub async fn all_links_down(&self) -> Result<()> {
        match self {
            Self::InProcess(fleets) => {
                let downs = fleets.iter().map(Fleet::all_links_down);
                futures::future::join_all(downs).await;
                Ok(())
            }
            Self::Processes(_) => bail!(
                "agents in flotilla-sim processes are cut off through their leaf servers: use --leaf-nodes"
            ),
        }
    }

    /// Brings every agent's link up at once.
    pub async fn all_links_up(&self) -> Result<()> {
        match self {
            Self::InProcess(fleets) => {
                futures::future::join_all(fleets.iter().map(Fleet::all_links_up)).await;
                Ok(())
            }
            Self::Processes(_) => bail!("agents in flotilla-sim processes: use --leaf-nodes"),
        }
    }

    /// Links taken down so far (in-process fleets).
    pub fn link_downs(&self) -> Option<u64> {
        match self {
            Self::InProcess(fleets) => Some(
                fleets
                    .iter()
                    .map(|f| {
                        f.counters
                            .link_downs
                            .load(std::sync::atomic::Ordering::Relaxed)
                    })
                    .sum(),
            ),
            Self::Processes(_) => None,
        }
    }

    /// Whether every simulator process is still running.
    pub fn check_running(&mut self) -> Result<()> {
        if let Self::Processes(children) = self {
            for c in children.iter_mut() {
                if let Ok(Some(status)) = c.try_wait() {
                    bail!(
                        "a flotilla-sim process (pid {}) exited with {status}",
                        c.id()
                    );
                }
            }
        }
        Ok(())
    }

    /// The PIDs whose memory is the fleet's (this process for in-process fleets).
    pub fn pids(&self) -> Vec<u32> {
        match self {
            Self::InProcess(_) => vec![std::process::id()],
            Self::Processes(children) => children.iter().map(Child::id).collect(),
        }
    }

    /// Stops every agent (and process).
    pub async fn stop(mut self) {
        match &mut self {
            Self::InProcess(fleets) => {
                let fleets = std::mem::take(fleets);
                futures::future::join_all(fleets.into_iter().map(Fleet::stop)).await;
            }
            Self::Processes(children) => {
                for c in children.iter_mut() {
                    terminate(c);
                }
                for c in children.iter_mut() {
                    let _ = c.wait();
                }
            }
        }
    }
}

/// SIGTERM (a clean stop of the simulator's agents), then the caller waits.
fn terminate(child: &mut Child) {
    let pid = child.id().to_string();
    let sent = Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .is_ok_and(|s| s.success());
    if !sent {
        let _ = child.kill();
    }
}

impl Drop for LoadFleet {
    fn drop(&mut self) {
        if let Self::Processes(children) = self {
            for c in children.iter_mut() {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::split;

    #[test]
    fn splits_cover_every_cluster_once() {
        assert_eq!(split(10, 3), vec![(0, 4), (4, 3), (7, 3)]);
        assert_eq!(split(2, 5), vec![(0, 1), (1, 1)]);
        assert_eq!(split(7, 1), vec![(0, 7)]);
    }
}
