//! `flotilla addon enable|disable|status`: clusteradm's add-on verbs.
//!
//! - `enable NAME (--clusters a,b | --placement NS/NAME) [--namespace INSTALL_NS]`: creates the
//!   ManagedClusterAddOns on the named clusters, or adds the placement to the add-on's install
//!   strategy.
//! - `disable NAME (--clusters a,b | --all)`: removes the add-on from the named clusters, or from
//!   every cluster (its placements leave the install strategy too).
//! - `status NAME [--watch]`: the add-on's rollout per placement (progress bars per placement,
//!   per decision group and overall) and the clusters where it is not available. Without
//!   `--watch` it prints once; with it, it redraws until every placement's rollout is over, and
//!   exits non-zero when one stopped — as `rollout status` does.
//!
//! Flags are checked before the hub is called: exactly one of the cluster choices (clap), a
//! placement spelled `NS/NAME`, names that are DNS labels.

use super::progress::{LABEL, Step, bar, follow, group_bars, labelled_bar};
use crate::hub::Hub;
use anyhow::{Result, anyhow, bail};
use flotilla_api::addon::conditions::{AVAILABLE, PROGRESSING};
use flotilla_api::addon::validate::addon_name;
use flotilla_api::meta::{self, find_condition};
use flotilla_api::names::{validate_dns1123_label, validate_dns1123_subdomain};
use flotilla_api::v1::{
    ClusterManagementAddOn, DisableAddOnRequest, EnableAddOnRequest, GetAddOnRequest,
    InstallProgression, ListAddOnsRequest, ManagedClusterAddOn,
};

/// Clusters where the add-on is not available listed by `status`; the rest are counted.
pub const MAX_LISTED: usize = 20;

/// `flotilla addon` subcommands.
#[derive(clap::Subcommand, Debug, Clone)]
pub enum AddonWhat {
    /// Install an add-on on clusters, or on a placement's clusters.
    #[command(group(
        clap::ArgGroup::new("target").required(true).args(["clusters", "placement"])
    ))]
    Enable {
        /// Add-on name (its ClusterManagementAddOn).
        name: String,
        /// Clusters (comma-separated or repeated).
        #[arg(long, value_delimiter = ',', value_name = "CLUSTER,...")]
        clusters: Vec<String>,
        /// A placement, added to the add-on's install strategy.
        #[arg(long, value_name = "NS/NAME")]
        placement: Option<String>,
        /// Namespace of the add-on agent on the clusters (with --clusters).
        #[arg(long, alias = "install-namespace", value_name = "INSTALL_NS")]
        namespace: Option<String>,
    },
    /// Remove an add-on from clusters, or from every cluster.
    #[command(group(clap::ArgGroup::new("target").required(true).args(["clusters", "all"])))]
    Disable {
        /// Add-on name.
        name: String,
        /// Clusters (comma-separated or repeated).
        #[arg(long, value_delimiter = ',', value_name = "CLUSTER,...")]
        clusters: Vec<String>,
        /// Every cluster: the add-on's placements leave its install strategy too.
        #[arg(long)]
        all: bool,
    },
    /// Where an add-on's rollout stands: per placement, per decision group and overall.
    Status {
        /// Add-on name.
        name: String,
        /// Redraw until every placement's rollout is over.
        #[arg(short, long)]
        watch: bool,
    },
}

/// A checked `flotilla addon` command, ready to send.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// `enable`.
    Enable(EnableAddOnRequest),
    /// `disable`.
    Disable(DisableAddOnRequest),
    /// `status`.
    Status {
        /// Add-on name.
        name: String,
        /// Redraw until the rollout is over.
        watch: bool,
    },
}

/// Checks the flags before the hub is called, so bad flags fail fast and alone.
pub fn prepare(what: AddonWhat) -> Result<Action> {
    Ok(match what {
        AddonWhat::Enable {
            name,
            clusters,
            placement,
            namespace,
        } => Action::Enable(enable_request(name, clusters, placement, namespace)?),
        AddonWhat::Disable {
            name,
            clusters,
            all,
        } => Action::Disable(disable_request(name, clusters, all)?),
        AddonWhat::Status { name, watch } => {
            addon_name("NAME", &name).map_err(|e| anyhow!("{e}"))?;
            Action::Status { name, watch }
        }
    })
}

/// Runs a [`prepare`]d `flotilla addon …`.
pub async fn run(hub: &Hub, action: Action) -> Result<()> {
    match action {
        Action::Enable(r) => {
            let answer = hub
                .idempotent(async || hub.addons().enable_add_on(r.clone()).await)
                .await?;
            print!("{}", enabled(&r, &answer.created, answer.addon.as_ref()));
            Ok(())
        }
        Action::Disable(r) => {
            let answer = hub
                .idempotent(async || hub.addons().disable_add_on(r.clone()).await)
                .await?;
            print!("{}", disabled(&r, &answer.removed));
            Ok(())
        }
        Action::Status { name, watch } => status(hub, name, watch).await,
    }
}

/// The `EnableAddOn` request for the flags, or what is wrong with them.
pub fn enable_request(
    name: String,
    clusters: Vec<String>,
    placement: Option<String>,
    namespace: Option<String>,
) -> Result<EnableAddOnRequest> {
    addon_name("NAME", &name).map_err(|e| anyhow!("{e}"))?;
    let placement = match (clusters.is_empty(), placement) {
        (false, Some(_)) => bail!("give either --clusters or --placement, not both"),
        (true, None) => bail!("give --clusters CLUSTER,... or --placement NS/NAME"),
        (true, Some(p)) => {
            if namespace.is_some() {
                bail!(
                    "--namespace applies to --clusters only; the install namespace of a \
                     placement's clusters comes from the add-on's AddOnDeploymentConfig \
                     (spec.agentInstallNamespace)"
                );
            }
            let (ns, pname) = placement_ref(&p)?;
            format!("{ns}/{pname}")
        }
        (false, None) => String::new(),
    };
    let clusters = cluster_list(clusters)?;
    let install_namespace = namespace.unwrap_or_default();
    if !install_namespace.is_empty() {
        validate_dns1123_label("--namespace", &install_namespace).map_err(|e| anyhow!("{e}"))?;
    }
    Ok(EnableAddOnRequest {
        name,
        clusters,
        placement,
        install_namespace,
    })
}

/// The `DisableAddOn` request for the flags, or what is wrong with them.
pub fn disable_request(
    name: String,
    clusters: Vec<String>,
    all: bool,
) -> Result<DisableAddOnRequest> {
    addon_name("NAME", &name).map_err(|e| anyhow!("{e}"))?;
    match (clusters.is_empty(), all) {
        (false, true) => bail!("give either --clusters or --all, not both"),
        (true, false) => bail!("give --clusters CLUSTER,... or --all"),
        _ => {}
    }
    Ok(DisableAddOnRequest {
        name,
        clusters: cluster_list(clusters)?,
        all,
    })
}

/// `NS/NAME` of a placement, checked.
pub fn placement_ref(text: &str) -> Result<(String, String)> {
    let malformed = || anyhow!("--placement {text:?}: expected NAMESPACE/NAME (e.g. default/edge)");
    let (ns, name) = text.split_once('/').ok_or_else(malformed)?;
    if ns.is_empty() || name.is_empty() || name.contains('/') {
        return Err(malformed());
    }
    validate_dns1123_label("--placement namespace", ns).map_err(|e| anyhow!("{e}"))?;
    validate_dns1123_subdomain("--placement name", name).map_err(|e| anyhow!("{e}"))?;
    Ok((ns.to_string(), name.to_string()))
}

/// The clusters of `--clusters`, each a DNS label, duplicates dropped (first kept).
fn cluster_list(clusters: Vec<String>) -> Result<Vec<String>> {
    let mut out: Vec<String> = Vec::with_capacity(clusters.len());
    for c in clusters {
        let c = c.trim().to_string();
        validate_dns1123_label("--clusters", &c).map_err(|e| anyhow!("{e}"))?;
        if !out.contains(&c) {
            out.push(c);
        }
    }
    Ok(out)
}

/// What `enable` did, one line per ManagedClusterAddOn created (or kept), or the placement
/// now in the install strategy.
pub fn enabled(
    r: &EnableAddOnRequest,
    created: &[ManagedClusterAddOn],
    addon: Option<&ClusterManagementAddOn>,
) -> String {
    let name = &r.name;
    if !r.placement.is_empty() {
        let placements: Vec<String> = addon
            .and_then(|a| a.spec.as_ref())
            .and_then(|s| s.install_strategy.as_ref())
            .map(|s| {
                s.placements
                    .iter()
                    .map(|p| format!("{}/{}", p.namespace, p.name))
                    .collect()
            })
            .unwrap_or_default();
        let mut out = format!(
            "clustermanagementaddon.addon.open-cluster-management.io/{name} enabled on placement {}",
            r.placement
        );
        if !placements.is_empty() {
            out.push_str(&format!(
                " (install strategy Placements: {})",
                placements.join(", ")
            ));
        }
        out.push('\n');
        return out;
    }
    let mut out = String::new();
    for a in created {
        let m = a.metadata.clone().unwrap_or_default();
        let ns = a
            .spec
            .as_ref()
            .map(|s| s.install_namespace.clone())
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| flotilla_api::addon::DEFAULT_INSTALL_NAMESPACE.into());
        out.push_str(&format!(
            "managedclusteraddon.addon.open-cluster-management.io/{} enabled on cluster {} (install namespace {ns})\n",
            m.name, m.namespace
        ));
    }
    if created.is_empty() {
        out.push_str(&format!(
            "add-on {name}: no ManagedClusterAddOn created on {}\n",
            r.clusters.join(", ")
        ));
    }
    out
}

/// What `disable` did: one line per cluster the add-on left.
pub fn disabled(r: &DisableAddOnRequest, removed: &[String]) -> String {
    let name = &r.name;
    let mut out: String = removed
        .iter()
        .map(|c| format!("managedclusteraddon/{name} removed from cluster {c}\n"))
        .collect();
    if removed.is_empty() {
        out.push_str(&format!("add-on {name} was not installed on "));
        out.push_str(&if r.all {
            "any cluster\n".to_string()
        } else {
            format!("{}\n", r.clusters.join(", "))
        });
    }
    if r.all {
        out.push_str(&format!(
            "clustermanagementaddon/{name}: no placement installs it any more\n"
        ));
    }
    out
}

async fn status(hub: &Hub, name: String, watch: bool) -> Result<()> {
    follow(watch, || {
        let get = GetAddOnRequest {
            namespace: String::new(),
            name: name.clone(),
        };
        let list = ListAddOnsRequest {
            namespace: String::new(),
            name: name.clone(),
        };
        async move {
            let cma = hub
                .idempotent(async || {
                    hub.addons()
                        .get_cluster_management_add_on(get.clone())
                        .await
                })
                .await?;
            let mcas = hub
                .idempotent(async || {
                    hub.addons()
                        .list_managed_cluster_add_ons(list.clone())
                        .await
                })
                .await?
                .items;
            Ok(render(&cma, &mcas))
        }
    })
    .await
}

/// Whether a progression's rollout is over, and whether it failed.
fn progression_state(p: &InstallProgression) -> (bool, bool) {
    let progressing = find_condition(&p.conditions, PROGRESSING);
    let stopped = !p.stopped_reason.is_empty();
    let failed = stopped
        || progressing.is_some_and(|c| c.status == meta::status::FALSE && c.reason == "Failed");
    let over = stopped || progressing.is_some_and(|c| c.status == meta::status::FALSE);
    (over, failed)
}

/// The rendering of an add-on's rollout and the clusters where it is not available, and where
/// the rollout is: over when every placement's `Progressing` condition is False (or its rollout
/// stopped), failed when one stopped or failed. An add-on installed by hand (install strategy
/// Manual) has no rollout to wait for.
pub fn render(cma: &ClusterManagementAddOn, mcas: &[ManagedClusterAddOn]) -> (String, Step) {
    let name = cma
        .metadata
        .as_ref()
        .map(|m| m.name.clone())
        .unwrap_or_default();
    let strategy = cma
        .spec
        .as_ref()
        .and_then(|s| s.install_strategy.as_ref())
        .map(|s| s.r#type.clone())
        .filter(|t| !t.is_empty())
        .unwrap_or_else(|| "Manual".into());
    let progressions = cma
        .status
        .as_ref()
        .map(|s| s.install_progressions.as_slice())
        .unwrap_or_default();
    let mut out = format!("add-on {name} (install strategy {strategy})\n");
    let (mut total, mut updated, mut failed) = (0, 0, 0);
    let mut stops = Vec::new();
    let mut all_over = true;
    for p in progressions {
        let label = format!("{}/{}", p.namespace, p.name);
        out.push_str(&format!(
            "{} updated  (failed {})\n",
            labelled_bar(&label, p.updated, p.total),
            p.failed
        ));
        total += p.total;
        updated += p.updated;
        failed += p.failed;
        out.push_str(&group_bars(&p.decision_groups));
        if let Some(c) = find_condition(&p.conditions, PROGRESSING) {
            let mut why = format!("{:<LABEL$} {PROGRESSING}={} ({})", "", c.status, c.reason);
            if !c.message.is_empty() {
                why.push_str(&format!(": {}", c.message));
            }
            out.push_str(why.trim_end());
            out.push('\n');
        }
        if !p.stopped_reason.is_empty() {
            out.push_str(&format!("{:<LABEL$} stopped: {}\n", "", p.stopped_reason));
        }
        for n in &p.notes {
            out.push_str(&format!("{:<LABEL$} note: {n}\n", ""));
        }
        let (over, failed) = progression_state(p);
        all_over &= over;
        if failed {
            let why = if p.stopped_reason.is_empty() {
                find_condition(&p.conditions, PROGRESSING)
                    .map(|c| c.message.clone())
                    .unwrap_or_default()
            } else {
                p.stopped_reason.clone()
            };
            stops.push(format!("{label}: {why}"));
        }
    }
    if !progressions.is_empty() {
        out.push_str(&format!(
            "{:<LABEL$} {} {updated}/{total} updated  (failed {failed})\n",
            "overall",
            bar(updated, total)
        ));
    }
    out.push_str(&not_available(mcas));
    let manual = strategy == "Manual";
    let (state, step) = if progressions.is_empty() {
        if manual {
            (
                "installed by hand: no placement rollout".to_string(),
                Step::Done,
            )
        } else {
            ("not started".to_string(), Step::Wait)
        }
    } else if !all_over {
        ("in progress".to_string(), Step::Wait)
    } else if stops.is_empty() {
        ("complete".to_string(), Step::Done)
    } else {
        (
            format!("stopped: {}", stops.join("; ")),
            Step::Failed(format!("the rollout of add-on {name} stopped")),
        )
    };
    out.push_str(&format!("rollout {state}\n"));
    (out, step)
}

/// `clusters: N with the add-on, A available`, then a line per cluster where it is not
/// available (cluster, reason, message), at most [`MAX_LISTED`] of them.
fn not_available(mcas: &[ManagedClusterAddOn]) -> String {
    let mut down: Vec<(String, String)> = mcas
        .iter()
        .filter_map(|a| {
            let cluster = a
                .metadata
                .as_ref()
                .map(|m| m.namespace.clone())
                .unwrap_or_default();
            let conditions = a
                .status
                .as_ref()
                .map(|s| s.conditions.as_slice())
                .unwrap_or_default();
            match find_condition(conditions, AVAILABLE) {
                Some(c) if c.status == meta::status::TRUE => None,
                Some(c) => {
                    let mut why = format!("{}={}", AVAILABLE, c.status);
                    if !c.reason.is_empty() {
                        why.push_str(&format!(" ({})", c.reason));
                    }
                    if !c.message.is_empty() {
                        why.push_str(&format!(": {}", c.message));
                    }
                    Some((cluster, why))
                }
                None => Some((cluster, format!("no {AVAILABLE} condition yet"))),
            }
        })
        .collect();
    down.sort();
    let mut out = format!(
        "clusters: {} with the add-on, {} available\n",
        mcas.len(),
        mcas.len() - down.len()
    );
    if down.is_empty() {
        return out;
    }
    out.push_str("not available:\n");
    for (cluster, why) in down.iter().take(MAX_LISTED) {
        out.push_str(&format!("  {cluster}: {why}\n"));
    }
    if down.len() > MAX_LISTED {
        out.push_str(&format!("  and {} more\n", down.len() - MAX_LISTED));
    }
    out
}

#[cfg(test)]
mod tests;
