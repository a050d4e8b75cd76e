//! Fleet profiles: what the simulated clusters look like and how their links behave.
//!
//! Without a profile file the built-in fleet is used ([`crate::builtin`]: four regions, three
//! environments, a canary every tenth cluster, …). A profile file (YAML) replaces the sections it
//! names and keeps the built-in ones it omits, so a file holding only `connectivity:` adds
//! flapping to the usual fleet. Every choice is a deterministic function of the profile's
//! `seed`, the cluster's index and the field, so a run is repeatable and a restarted simulator
//! recreates the same clusters.
//!
//! ```yaml
//! seed: 7
//! labels:
//!   region: {eu-west: 4, us-east: 3, ap-south: 1}   # value: weight
//!   canary: {"true": 1, "": 9}                       # "" = label absent
//! claims:
//!   region.open-cluster-management.io: {fromLabel: region}
//!   site.flotilla.io: {prefix: site-, count: 200}    # site-0 … site-199, uniform
//! capacity: {cpu: [4, 8, 16], memoryGi: [16, 64]}
//! allocatable: {min: 0.5, max: 0.9}                  # share of capacity allocatable
//! kubernetesVersions: {v1.30.2: 3, v1.31.1: 1}
//! platforms: {AWS: 1, Other: 1}
//! taints: [{key: gpu, effect: NoSelect, share: 0.05}]
//! readyDelayMs: {min: 200, max: 2000}
//! applyFailures: {share: 0.01, message: "admission webhook denied the request"}
//! scoreIntervalSeconds: 30                           # 0 = no AddOnPlacementScores
//! connectivity:
//!   flapping: {share: 0.2, meanUpSeconds: 30, meanDownSeconds: 10}
//!   outages: [{atSeconds: 60, forSeconds: 30, share: 0.1}]
//!   restarts: [{atSeconds: 120, share: 0.05, keepState: false}]
//!   latency: [{share: 0.3, rttMs: 250}, {share: 0.05, rttMs: 1500}]  # satellite sites
//! ```
//!
//! Taints are the hub's to set (OCM's too): `flotilla-load` applies a profile's taints through
//! the API once the clusters have registered.

use serde::Deserialize;
use std::collections::BTreeMap;

/// A fleet profile file, every section optional.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FleetProfile {
    /// Seed of every deterministic choice.
    #[serde(default)]
    pub seed: u64,
    /// Label key → value distribution (replaces the built-in labels).
    pub labels: Option<BTreeMap<String, Values>>,
    /// Custom claim name → value distribution (replaces the built-in claims).
    pub claims: Option<BTreeMap<String, Values>>,
    /// Capacity choices.
    pub capacity: Option<Capacity>,
    /// Allocatable share of capacity.
    pub allocatable: Option<Range>,
    /// Kubernetes version distribution.
    pub kubernetes_versions: Option<BTreeMap<String, f64>>,
    /// Platform (`platform.open-cluster-management.io` claim) distribution.
    pub platforms: Option<BTreeMap<String, f64>>,
    /// Taints a share of the fleet carries (applied by `flotilla-load`).
    #[serde(default)]
    pub taints: Vec<TaintShare>,
    /// Time for workloads to become ready, in milliseconds.
    pub ready_delay_ms: Option<Range>,
    /// A share of clusters on which every apply fails.
    pub apply_failures: Option<ApplyFailures>,
    /// Seconds between AddOnPlacementScore reports (0 = none).
    pub score_interval_seconds: Option<u64>,
    /// How the clusters' links behave.
    #[serde(default)]
    pub connectivity: Connectivity,
}

/// How a label's or claim's values are spread over the fleet.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(untagged)]
pub enum Values {
    /// The value of a label of the same cluster (claims mirroring labels).
    FromLabel {
        /// The label key.
        #[serde(rename = "fromLabel")]
        from_label: String,
    },
    /// `PREFIX0` … `PREFIX(count-1)`, uniformly.
    Numbered {
        /// Value prefix.
        prefix: String,
        /// Number of distinct values.
        count: u32,
    },
    /// Value → weight; the empty value leaves the label or claim out.
    Weighted(BTreeMap<String, f64>),
}

/// Capacity choices (uniform over each list).
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Capacity {
    /// CPU cores.
    pub cpu: Vec<u32>,
    /// Memory in GiB.
    pub memory_gi: Vec<u32>,
}

/// A closed range, uniform.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Range {
    /// Lower bound.
    pub min: f64,
    /// Upper bound.
    pub max: f64,
}

/// A taint carried by a share of the fleet.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TaintShare {
    /// Taint key.
    pub key: String,
    /// Taint value.
    #[serde(default)]
    pub value: String,
    /// `NoSelect`, `PreferNoSelect` or `NoSelectIfNew`.
    pub effect: String,
    /// Share of the fleet (0–1).
    pub share: f64,
}

/// Clusters whose applies all fail.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ApplyFailures {
    /// Share of the fleet (0–1).
    pub share: f64,
    /// The error every apply returns.
    #[serde(default = "default_failure_message")]
    pub message: String,
}

fn default_failure_message() -> String {
    "simulated apply failure (fleet profile applyFailures)".into()
}

/// How the clusters' links behave. A cluster that is "down" has its agent stopped while its
/// simulated cluster keeps running; when it comes back the agent reconnects with its state
/// (unless a restart says otherwise), as an edge cluster does after its link returns.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Connectivity {
    /// A share of the fleet alternating up and down.
    pub flapping: Option<Flapping>,
    /// Scheduled outages.
    #[serde(default)]
    pub outages: Vec<Outage>,
    /// Scheduled agent restarts.
    #[serde(default)]
    pub restarts: Vec<Restart>,
    /// Latency classes: a share of the fleet reaches NATS through a link with this round-trip
    /// time (`crate::latency`). A cluster drawn into several classes takes the first.
    #[serde(default)]
    pub latency: Vec<Latency>,
}

/// A share of the fleet behind a slow link.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Latency {
    /// Share of the fleet (0–1).
    pub share: f64,
    /// Added round-trip time in milliseconds (half each way).
    pub rtt_ms: u64,
}

/// Longest round trip a latency class may add (a minute: beyond it every request times out).
pub const MAX_RTT_MS: u64 = 60_000;

/// Flapping links: exponentially distributed up and down periods.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Flapping {
    /// Share of the fleet that flaps (0–1).
    pub share: f64,
    /// Mean time up, in seconds.
    pub mean_up_seconds: f64,
    /// Mean time down, in seconds.
    pub mean_down_seconds: f64,
    /// Stop flapping (and stay up) this many seconds after the fleet started (default: never).
    pub for_seconds: Option<f64>,
}

/// A share of the fleet down at once.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Outage {
    /// Seconds after the fleet started.
    pub at_seconds: f64,
    /// How long.
    pub for_seconds: f64,
    /// Share of the fleet (0–1).
    pub share: f64,
}

/// A share of the agents restarted at once.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Restart {
    /// Seconds after the fleet started.
    pub at_seconds: f64,
    /// Share of the fleet (0–1).
    pub share: f64,
    /// Whether the agents keep their state (key, works) across the restart.
    #[serde(default = "yes")]
    pub keep_state: bool,
}

fn yes() -> bool {
    true
}

/// A profile that cannot be used, with where and why.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    /// The file cannot be read.
    #[error("{path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The YAML does not fit the profile's shape.
    #[error("{path}: {message}")]
    Parse {
        /// The file.
        path: String,
        /// The parser's message (with line and column).
        message: String,
    },
    /// A value out of range.
    #[error("{path}: {field}: {message}")]
    Invalid {
        /// The file.
        path: String,
        /// The field path.
        field: String,
        /// What is wrong.
        message: String,
    },
}

impl FleetProfile {
    /// Reads and checks a profile file.
    pub fn load(path: &std::path::Path) -> Result<Self, ProfileError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ProfileError::Read {
            path: shown.clone(),
            source,
        })?;
        Self::parse(&text, &shown)
    }

    /// Parses and checks a profile (`origin` names it in errors).
    pub fn parse(text: &str, origin: &str) -> Result<Self, ProfileError> {
        let profile: Self = serde_yaml::from_str(text).map_err(|e| ProfileError::Parse {
            path: origin.to_string(),
            message: e.to_string(),
        })?;
        profile
            .check()
            .map_err(|(field, message)| ProfileError::Invalid {
                path: origin.to_string(),
                field,
                message,
            })?;
        Ok(profile)
    }

    fn check(&self) -> Result<(), (String, String)> {
        let share = |field: String, v: f64| {
            if (0.0..=1.0).contains(&v) {
                Ok(())
            } else {
                Err((field, format!("{v} is not a share between 0 and 1")))
            }
        };
        let weights = |field: String, m: &BTreeMap<String, f64>| {
            if m.values().any(|w| !w.is_finite() || *w < 0.0) {
                return Err((field, "weights must be zero or more".into()));
            }
            if m.values().sum::<f64>() <= 0.0 {
                return Err((
                    field,
                    "needs at least one value with a weight above 0".into(),
                ));
            }
            Ok(())
        };
        for (section, map) in [("labels", &self.labels), ("claims", &self.claims)] {
            for (key, values) in map.iter().flatten() {
                let field = format!("{section}.{key}");
                match values {
                    Values::Weighted(m) => weights(field, m)?,
                    Values::Numbered { count: 0, .. } => {
                        return Err((field, "count must be at least 1".into()));
                    }
                    Values::Numbered { .. } => {}
                    Values::FromLabel { from_label } => {
                        let known = self
                            .labels
                            .as_ref()
                            .map_or(BUILTIN_LABELS.contains(&from_label.as_str()), |l| {
                                l.contains_key(from_label)
                            });
                        if !known {
                            return Err((field, format!("no label {from_label:?} in the profile")));
                        }
                    }
                }
            }
        }
        if let Some(c) = &self.capacity {
            if c.cpu.is_empty() || c.cpu.contains(&0) {
                return Err(("capacity.cpu".into(), "needs core counts above 0".into()));
            }
            if c.memory_gi.is_empty() || c.memory_gi.contains(&0) {
                return Err(("capacity.memoryGi".into(), "needs sizes above 0".into()));
            }
        }
        if let Some(r) = self.allocatable {
            share("allocatable.min".into(), r.min)?;
            share("allocatable.max".into(), r.max)?;
        }
        for (field, r) in [
            ("allocatable", self.allocatable),
            ("readyDelayMs", self.ready_delay_ms),
        ] {
            if let Some(r) = r
                && (r.min > r.max || r.min < 0.0)
            {
                return Err((
                    field.into(),
                    format!("min {} must be ≥ 0 and ≤ max {}", r.min, r.max),
                ));
            }
        }
        for (field, m) in [
            ("kubernetesVersions", &self.kubernetes_versions),
            ("platforms", &self.platforms),
        ] {
            if let Some(m) = m {
                weights(field.into(), m)?;
            }
        }
        for (i, t) in self.taints.iter().enumerate() {
            share(format!("taints[{i}].share"), t.share)?;
            if !["NoSelect", "PreferNoSelect", "NoSelectIfNew"].contains(&t.effect.as_str()) {
                return Err((
                    format!("taints[{i}].effect"),
                    format!(
                        "{:?} is not NoSelect, PreferNoSelect or NoSelectIfNew",
                        t.effect
                    ),
                ));
            }
        }
        if let Some(f) = &self.apply_failures {
            share("applyFailures.share".into(), f.share)?;
        }
        let c = &self.connectivity;
        if let Some(f) = c.flapping {
            share("connectivity.flapping.share".into(), f.share)?;
            for (field, v) in [
                ("meanUpSeconds", f.mean_up_seconds),
                ("meanDownSeconds", f.mean_down_seconds),
            ] {
                if !(v.is_finite() && v > 0.0) {
                    return Err((
                        format!("connectivity.flapping.{field}"),
                        format!("{v} must be above 0"),
                    ));
                }
            }
        }
        for (i, o) in c.outages.iter().enumerate() {
            share(format!("connectivity.outages[{i}].share"), o.share)?;
            if o.at_seconds < 0.0 || o.for_seconds <= 0.0 {
                return Err((
                    format!("connectivity.outages[{i}]"),
                    "atSeconds must be ≥ 0 and forSeconds above 0".into(),
                ));
            }
        }
        for (i, r) in c.restarts.iter().enumerate() {
            share(format!("connectivity.restarts[{i}].share"), r.share)?;
            if r.at_seconds < 0.0 {
                return Err((
                    format!("connectivity.restarts[{i}].atSeconds"),
                    "must be ≥ 0".into(),
                ));
            }
        }
        for (i, l) in c.latency.iter().enumerate() {
            share(format!("connectivity.latency[{i}].share"), l.share)?;
            if !(1..=MAX_RTT_MS).contains(&l.rtt_ms) {
                return Err((
                    format!("connectivity.latency[{i}].rttMs"),
                    format!("{} must be from 1 to {MAX_RTT_MS}", l.rtt_ms),
                ));
            }
        }
        Ok(())
    }

    /// The added round-trip time of cluster `i`'s link, if a latency class draws it.
    pub fn link_latency(&self, i: usize) -> Option<(usize, u64)> {
        self.connectivity
            .latency
            .iter()
            .enumerate()
            .find(|(k, l)| self.in_share(i, &format!("latency/{k}"), l.share))
            .map(|(k, l)| (k, l.rtt_ms))
    }

    /// Whether cluster `i` is in the first `share` of the fleet for `what` (a stable, seeded
    /// draw: the same clusters every run).
    pub fn in_share(&self, i: usize, what: &str, share: f64) -> bool {
        unit(self.seed, i, what) < share
    }

    /// A seeded draw in [0, 1) for cluster `i` and `what`.
    pub fn draw(&self, i: usize, what: &str) -> f64 {
        unit(self.seed, i, what)
    }

    /// The labels of cluster `i` (`None`: the section is not in the profile).
    pub fn labels(&self, i: usize) -> Option<BTreeMap<String, String>> {
        let labels = self.labels.as_ref()?;
        let mut out = BTreeMap::new();
        for (key, values) in labels {
            if let Some(v) = self.pick(i, &format!("label/{key}"), values, &out) {
                out.insert(key.clone(), v);
            }
        }
        Some(out)
    }

    /// The custom claims of cluster `i`, given its labels.
    pub fn claims(
        &self,
        i: usize,
        labels: &BTreeMap<String, String>,
    ) -> Option<BTreeMap<String, String>> {
        let claims = self.claims.as_ref()?;
        Some(
            claims
                .iter()
                .filter_map(|(name, values)| {
                    self.pick(i, &format!("claim/{name}"), values, labels)
                        .map(|v| (name.clone(), v))
                })
                .collect(),
        )
    }

    fn pick(
        &self,
        i: usize,
        what: &str,
        values: &Values,
        labels: &BTreeMap<String, String>,
    ) -> Option<String> {
        match values {
            Values::FromLabel { from_label } => labels.get(from_label).cloned(),
            Values::Numbered { prefix, count } => {
                let n = (self.draw(i, what) * f64::from(*count)) as u32;
                Some(format!("{prefix}{}", n.min(count - 1)))
            }
            Values::Weighted(m) => weighted(m, self.draw(i, what)).filter(|v| !v.is_empty()),
        }
    }

    /// A weighted choice from `m` for cluster `i`, or `None` when the profile lacks `m`.
    pub fn choose(
        &self,
        i: usize,
        what: &str,
        m: Option<&BTreeMap<String, f64>>,
    ) -> Option<String> {
        m.and_then(|m| weighted(m, self.draw(i, what)))
    }

    /// A uniform choice in `r` for cluster `i`.
    pub fn within(&self, i: usize, what: &str, r: Range) -> f64 {
        r.min + (r.max - r.min) * self.draw(i, what)
    }
}

/// Label keys of the built-in fleet (for `fromLabel` in a profile without `labels`).
pub const BUILTIN_LABELS: [&str; 4] = ["region", "env", "purpose", "canary"];

fn weighted(m: &BTreeMap<String, f64>, u: f64) -> Option<String> {
    let total: f64 = m.values().sum();
    let mut at = u * total;
    for (v, w) in m {
        if at < *w {
            return Some(v.clone());
        }
        at -= w;
    }
    m.keys().last().cloned()
}

/// A stable draw in [0, 1) from a seed, an index and a salt (splitmix64 over FNV-1a).
pub fn unit(seed: u64, i: usize, salt: &str) -> f64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ seed;
    for b in salt.bytes().chain((i as u64).to_le_bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    let mut z = h.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests;
