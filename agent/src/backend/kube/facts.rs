//! Facts the Kubernetes backend reports about its cluster, as pure rules over what the API
//! server lists: total capacity, the platform from a node's provider ID, the product from the
//! server's version and the nodes' labels.

use serde_json::Value;

/// Sums quantities (`4`, `500m`, `16Gi`) as Kubernetes would print a total.
pub fn sum_quantities(values: &[&str], memory: bool) -> String {
    let total: f64 = values
        .iter()
        .filter_map(|v| flotilla_placement::quantity::parse_quantity(v).ok())
        .sum();
    if memory {
        let bytes = total.round() as u64;
        if bytes.is_multiple_of(1024 * 1024 * 1024) {
            format!("{}Gi", bytes / (1024 * 1024 * 1024))
        } else if bytes.is_multiple_of(1024 * 1024) {
            format!("{}Mi", bytes / (1024 * 1024))
        } else if bytes.is_multiple_of(1024) {
            format!("{}Ki", bytes / 1024)
        } else {
            bytes.to_string()
        }
    } else if (total - total.round()).abs() < 1e-9 {
        format!("{}", total.round() as i64)
    } else {
        format!("{}m", (total * 1000.0).round() as i64)
    }
}

/// The platform claim from a node's `spec.providerID`.
pub fn platform(provider_id: &str) -> &'static str {
    match provider_id.split("://").next().unwrap_or_default() {
        "aws" => "AWS",
        "gce" => "GCP",
        "azure" => "Azure",
        "openstack" => "OpenStack",
        "vsphere" => "VSphere",
        "ibm" => "IBM",
        "alicloud" => "AliCloud",
        "" => "Other",
        _ => "Other",
    }
}

/// The product claim from the version string and node labels.
pub fn product(git_version: &str, node_labels: &[&serde_json::Map<String, Value>]) -> &'static str {
    let v = git_version.to_ascii_lowercase();
    if node_labels
        .iter()
        .any(|l| l.contains_key("node.openshift.io/os_id"))
    {
        return "OpenShift";
    }
    if v.contains("+k3s") {
        "K3s"
    } else if v.contains("+rke2") {
        "RKE2"
    } else if v.contains("+k0s") {
        "k0s"
    } else if v.contains("-eks") {
        "EKS"
    } else if v.contains("-gke") {
        "GKE"
    } else {
        "Other"
    }
}
