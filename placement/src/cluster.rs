//! The scheduler's view of a ManagedCluster: only what placement reads.

use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use crate::pairs::Pairs;
use crate::quantity::{QuantityError, parse_quantity};

/// What a taint does to placements that do not tolerate it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum TaintEffect {
    /// Placements must not select the cluster unless they tolerate the taint.
    NoSelect,
    /// Placements may select the cluster; Flotilla ranks it after clusters without such a taint
    /// (OCM ignores this effect entirely).
    PreferNoSelect,
    /// Placements that already selected the cluster keep it; new ones need a toleration.
    NoSelectIfNew,
}

impl TaintEffect {
    /// The effect as written in YAML.
    pub fn as_str(self) -> &'static str {
        match self {
            TaintEffect::NoSelect => "NoSelect",
            TaintEffect::PreferNoSelect => "PreferNoSelect",
            TaintEffect::NoSelectIfNew => "NoSelectIfNew",
        }
    }
}

/// A taint on a cluster (`spec.taints[]`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Taint {
    /// Taint key, e.g. `cluster.open-cluster-management.io/unreachable`.
    pub key: String,
    /// Taint value; may be empty.
    #[serde(default)]
    pub value: String,
    /// What the taint does.
    pub effect: TaintEffect,
    /// Set by the hub when the taint appeared; `tolerationSeconds` count from here.
    pub time_added: SystemTime,
}

impl Taint {
    /// A taint from its parts.
    pub fn new(
        key: impl Into<String>,
        value: impl Into<String>,
        effect: TaintEffect,
        time_added: SystemTime,
    ) -> Self {
        Taint {
            key: key.into(),
            value: value.into(),
            effect,
            time_added,
        }
    }
}

/// Allocatable resources as numbers. `None` when the cluster did not report the resource; such a
/// cluster gets score 0 from the matching resource prioritizer and does not move min/max.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Allocatable {
    /// CPU in cores.
    pub cpu: Option<f64>,
    /// Memory in bytes.
    pub memory: Option<f64>,
}

impl Allocatable {
    /// Reads the quantity strings of `status.allocatable` (`cpu`, `memory`); an absent entry
    /// stays `None`.
    pub fn from_quantities(cpu: Option<&str>, memory: Option<&str>) -> Result<Self, QuantityError> {
        Ok(Allocatable {
            cpu: cpu.map(parse_quantity).transpose()?,
            memory: memory.map(parse_quantity).transpose()?,
        })
    }
}

/// A ManagedCluster as the scheduler sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Cluster {
    /// Cluster name; unique in the fleet.
    pub name: String,
    /// `metadata.labels`. A fleet's clusters share its interned strings
    /// ([`Fleet::upsert_cluster`](crate::Fleet::upsert_cluster)).
    #[serde(default)]
    pub labels: Pairs,
    /// `status.clusterClaims` as name → value.
    #[serde(default)]
    pub claims: Pairs,
    /// `spec.taints`.
    #[serde(default)]
    pub taints: Vec<Taint>,
    /// `status.allocatable` cpu and memory.
    #[serde(default)]
    pub allocatable: Allocatable,
    /// The cluster has a deletion timestamp; it is never a candidate.
    #[serde(default)]
    pub deleting: bool,
    /// `status.version.kubernetes` (read by CEL selectors only).
    #[serde(default)]
    pub kubernetes_version: Option<String>,
}

impl Cluster {
    /// A cluster with only a name (builder style; chain the setters below).
    pub fn new(name: impl Into<String>) -> Self {
        Cluster {
            name: name.into(),
            labels: Pairs::new(),
            claims: Pairs::new(),
            taints: Vec::new(),
            allocatable: Allocatable::default(),
            deleting: false,
            kubernetes_version: None,
        }
    }

    /// Adds a label.
    pub fn label(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        let (key, value): (String, String) = (key.into(), value.into());
        self.labels.insert(key, value);
        self
    }

    /// Adds a cluster claim.
    pub fn claim(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        let (name, value): (String, String) = (name.into(), value.into());
        self.claims.insert(name, value);
        self
    }

    /// Adds a taint.
    pub fn taint(mut self, taint: Taint) -> Self {
        self.taints.push(taint);
        self
    }

    /// Sets allocatable CPU (cores).
    pub fn cpu(mut self, cores: f64) -> Self {
        self.allocatable.cpu = Some(cores);
        self
    }

    /// Sets allocatable memory (bytes).
    pub fn memory(mut self, bytes: f64) -> Self {
        self.allocatable.memory = Some(bytes);
        self
    }

    /// Sets `status.version.kubernetes`.
    pub fn kubernetes_version(mut self, version: impl Into<String>) -> Self {
        self.kubernetes_version = Some(version.into());
        self
    }

    /// Marks the cluster as being deleted.
    pub fn deleting(mut self, deleting: bool) -> Self {
        self.deleting = deleting;
        self
    }

    /// Puts the cluster in the exclusive ManagedClusterSet `set`
    /// (label `cluster.open-cluster-management.io/clusterset`).
    pub fn in_set(self, set: impl Into<String>) -> Self {
        self.label(crate::labels::CLUSTERSET_LABEL, set)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocatable_reads_quantity_strings() {
        let a = Allocatable::from_quantities(Some("500m"), Some("1Gi")).unwrap();
        assert_eq!(a.cpu, Some(0.5));
        assert_eq!(a.memory, Some(1073741824.0));
        let none = Allocatable::from_quantities(None, None).unwrap();
        assert_eq!(none, Allocatable::default());
        assert!(Allocatable::from_quantities(Some("lots"), None).is_err());
    }

    #[test]
    fn builder_sets_every_field() {
        let t = Taint::new("gpu", "true", TaintEffect::NoSelect, SystemTime::UNIX_EPOCH);
        let c = Cluster::new("c1")
            .label("env", "prod")
            .claim("platform.open-cluster-management.io", "aws")
            .taint(t.clone())
            .cpu(4.0)
            .memory(8.0)
            .deleting(true)
            .in_set("prod");
        assert_eq!(c.labels["env"], "prod");
        assert_eq!(c.labels[crate::labels::CLUSTERSET_LABEL], "prod");
        assert_eq!(c.claims["platform.open-cluster-management.io"], "aws");
        assert_eq!(c.taints, vec![t]);
        assert_eq!(c.allocatable.cpu, Some(4.0));
        assert!(c.deleting);
    }
}
