//! Well-known label keys (a leaf module: clusters and sets both read them).

/// Label that puts a cluster into an `ExclusiveClusterSetLabel` set.
pub const CLUSTERSET_LABEL: &str = "cluster.open-cluster-management.io/clusterset";
