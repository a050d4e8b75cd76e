//! `apply -f FILE`: create or update resources from OCM YAML (multi-document; `-` is stdin).
//!
//! The whole file is parsed (and works and add-on kinds checked against the API's rules) before
//! anything is sent, so a bad document applies nothing. Then the documents are applied in order:
//! a run of ManifestWorks over one `ApplyWorks` stream ([`works`]: a file of ten thousand works
//! is one call), runs of ManagedClusters or ManagedClusterAddOns [`CONCURRENCY`] at a time,
//! every other document alone after what precedes it; their lines are printed in document order,
//! and a refused one is reported while the rest still go. When the hub goes away mid-way, nothing more is sent, and the command says exactly
//! which documents were applied and which were not.
//!
//! Applying sets desired state, so it is safe to repeat: a document the hub answers UNAVAILABLE
//! (its store did not answer in time) is sent again after a back-off for at most
//! `--retry-seconds` ([`Hub::idempotent`]; for a run of works, the works answered so).

mod one;
mod works;

use one::apply;

use crate::hub::Hub;
use anyhow::{Context, Result, bail};
use flotilla_api::ocm::{self, Document};
use futures::StreamExt as _;
use std::io::Read;
use std::sync::atomic::{AtomicBool, Ordering};

/// [`read`], then puts namespaced documents that name no namespace in `namespace` (`default`
/// when not given), as kubectl does: policy-collection's files leave it out. A document whose
/// namespace differs from a given `namespace` is refused, as kubectl refuses it. ManifestWorks
/// (whose namespace is their cluster) and ManagedClusterSetBindings keep theirs.
pub fn read_in(file: &str, namespace: Option<&str>) -> Result<Vec<Document>> {
    let mut docs = read(file)?;
    let mut errors = Vec::new();
    for (i, d) in docs.iter_mut().enumerate() {
        let meta = match d {
            Document::Policy(x) => x.metadata.get_or_insert_with(Default::default),
            Document::PlacementBinding(x) => x.metadata.get_or_insert_with(Default::default),
            Document::PolicySet(x) => x.metadata.get_or_insert_with(Default::default),
            Document::HubConfigMap(x) => x.metadata.get_or_insert_with(Default::default),
            Document::HubSecret(x) => x.metadata.get_or_insert_with(Default::default),
            Document::PlacementRule(x) => x.metadata.get_or_insert_with(Default::default),
            Document::Placement(x) => x.metadata.get_or_insert_with(Default::default),
            Document::ReplicaSet(x) => x.metadata.get_or_insert_with(Default::default),
            Document::GitRepo(x) => x.metadata.get_or_insert_with(Default::default),
            _ => continue,
        };
        match namespace {
            Some(ns) if !meta.namespace.is_empty() && meta.namespace != ns => errors.push(format!(
                "{file}: document {}: the namespace from the document ({:?}) does not match -n {ns:?}",
                i + 1,
                meta.namespace
            )),
            _ if !meta.namespace.is_empty() => {}
            Some(ns) => meta.namespace = ns.to_string(),
            None => meta.namespace = "default".into(),
        }
    }
    if !errors.is_empty() {
        bail!("nothing applied:\n  {}", errors.join("\n  "));
    }
    Ok(docs)
}

/// Reads and parses `file` (`-` for stdin), reporting every bad document at once.
pub fn read(file: &str) -> Result<Vec<Document>> {
    let text = if file == "-" {
        let mut s = String::new();
        std::io::stdin()
            .read_to_string(&mut s)
            .context("reading standard input")?;
        s
    } else {
        std::fs::read_to_string(file).with_context(|| format!("reading {file}"))?
    };
    let mut docs = Vec::new();
    let mut errors = Vec::new();
    for (i, d) in ocm::parse_documents(&text).into_iter().enumerate() {
        match d {
            // The API's own rules (size, names, feedback paths) are checked here too, so a
            // document the hub would refuse is named before anything is sent — and one larger
            // than a gRPC message is refused by its rule, not by the transport.
            Ok(d) => {
                let problems = problems(&d);
                if problems.is_empty() {
                    docs.push(d);
                } else {
                    errors.push(format!(
                        "{file}: {}: {}",
                        describe(i, &d),
                        problems.join("; ")
                    ));
                }
            }
            Err(e) => errors.push(format!("{file}: {e}")),
        }
    }
    if !errors.is_empty() {
        bail!("nothing applied:\n  {}", errors.join("\n  "));
    }
    if docs.is_empty() {
        bail!("{file}: no documents to apply");
    }
    Ok(docs)
}

/// What the API's own rules find wrong with a document (each problem names its field), for the
/// kinds whose rules live in the API crate: ManifestWorks and the add-on kinds.
fn problems(doc: &Document) -> Vec<String> {
    use flotilla_api::addon::validate;
    match doc {
        Document::Work(w) => flotilla_api::work::validate(w),
        Document::ClusterManagementAddOn(a) => validate::cluster_management_addon(a),
        Document::ManagedClusterAddOn(a) => validate::managed_cluster_addon(a),
        Document::AddOnTemplate(t) => validate::addon_template(t),
        Document::AddOnDeploymentConfig(c) => validate::addon_deployment_config(c),
        Document::ClusterSet(_)
        | Document::Binding(_)
        | Document::Placement(_)
        | Document::Score(_)
        | Document::ReplicaSet(_)
        | Document::Cluster(_)
        | Document::Policy(_)
        | Document::PlacementBinding(_)
        | Document::PolicySet(_)
        | Document::PlacementRule(_)
        | Document::ManagedServiceAccount(_)
        | Document::ImportPolicy(_)
        | Document::MirrorPeer(_)
        | Document::HubConfigMap(_)
        | Document::HubSecret(_)
        | Document::GitRepo(_) => Vec::new(),
    }
}

/// Documents in flight at once.
pub const CONCURRENCY: usize = 16;

/// `document N (Kind namespace/name)`, for reports.
fn describe(i: usize, doc: &Document) -> String {
    let (kind, meta) = match doc {
        Document::ClusterSet(x) => ("ManagedClusterSet", x.metadata.as_ref()),
        Document::Binding(x) => ("ManagedClusterSetBinding", x.metadata.as_ref()),
        Document::Work(x) => ("ManifestWork", x.metadata.as_ref()),
        Document::Placement(x) => ("Placement", x.metadata.as_ref()),
        Document::Score(x) => ("AddOnPlacementScore", x.metadata.as_ref()),
        Document::ReplicaSet(x) => ("ManifestWorkReplicaSet", x.metadata.as_ref()),
        Document::Cluster(x) => ("ManagedCluster", x.metadata.as_ref()),
        Document::ClusterManagementAddOn(x) => ("ClusterManagementAddOn", x.metadata.as_ref()),
        Document::ManagedClusterAddOn(x) => ("ManagedClusterAddOn", x.metadata.as_ref()),
        Document::AddOnTemplate(x) => ("AddOnTemplate", x.metadata.as_ref()),
        Document::AddOnDeploymentConfig(x) => ("AddOnDeploymentConfig", x.metadata.as_ref()),
        Document::Policy(x) => ("Policy", x.metadata.as_ref()),
        Document::PlacementBinding(x) => ("PlacementBinding", x.metadata.as_ref()),
        Document::PolicySet(x) => ("PolicySet", x.metadata.as_ref()),
        Document::PlacementRule(x) => ("PlacementRule", x.metadata.as_ref()),
        Document::ManagedServiceAccount(x) => ("ManagedServiceAccount", x.metadata.as_ref()),
        Document::ImportPolicy(x) => ("ClusterImportPolicy", x.metadata.as_ref()),
        Document::MirrorPeer(x) => ("MirrorPeer", x.metadata.as_ref()),
        Document::HubConfigMap(x) => ("ConfigMap", x.metadata.as_ref()),
        Document::HubSecret(x) => ("Secret", x.metadata.as_ref()),
        Document::GitRepo(x) => ("GitRepo", x.metadata.as_ref()),
    };
    let m = meta.cloned().unwrap_or_default();
    if m.namespace.is_empty() {
        format!("document {} ({kind} {})", i + 1, m.name)
    } else {
        format!("document {} ({kind} {}/{})", i + 1, m.namespace, m.name)
    }
}

/// Applies the documents [`read`] returned, printing a line for each in document order.
/// `force`: replica sets and Placements a GitRepo writes are written all the same.
pub async fn run(hub: &Hub, docs: Vec<Document>, force: bool) -> Result<()> {
    let total = docs.len();
    let lost = AtomicBool::new(false);
    let lost = &lost;
    // Runs of consecutive ManifestWorks, of consecutive ManagedClusters (a fleet provisioned
    // from one file), or of consecutive ManagedClusterAddOns (an add-on enabled cluster by
    // cluster) go concurrently: none of them depends on another of its run. Every other
    // document goes alone, after what comes before it (a binding before the placement that
    // needs it, the clusters before the works sent to them, a template and its config before the
    // ClusterManagementAddOn that names them).
    let independent = |d: &Document| {
        matches!(
            d,
            Document::Work(_) | Document::Cluster(_) | Document::ManagedClusterAddOn(_)
        )
    };
    let mut segments: Vec<Vec<(usize, Document)>> = Vec::new();
    for (i, d) in docs.into_iter().enumerate() {
        match segments.last_mut() {
            Some(seg)
                if independent(&d)
                    && seg.last().is_some_and(|(_, prev)| {
                        std::mem::discriminant(prev) == std::mem::discriminant(&d)
                    }) =>
            {
                seg.push((i, d));
            }
            _ => segments.push(vec![(i, d)]),
        }
    }
    let mut results = Vec::with_capacity(total);
    for segment in segments {
        if segment.len() > 1 && matches!(segment[0].1, Document::Work(_)) {
            // Lines are printed as the works are answered.
            results.extend(if lost.load(Ordering::Relaxed) {
                not_sent(segment)
            } else {
                works::apply_run(hub, segment, lost).await
            });
            continue;
        }
        for outcome in apply_each(hub, segment, lost, force).await {
            if let (_, Some(Ok(line))) = &outcome {
                println!("{line}");
            }
            results.push(outcome);
        }
    }
    let (mut failed, mut applied, mut not_applied) = (0, Vec::new(), Vec::new());
    for (what, outcome) in results {
        match outcome {
            Some(Ok(_)) => applied.push(what),
            Some(Err(e)) if lost.load(Ordering::Relaxed) => {
                not_applied.push(format!("{what}: {e:#}"));
            }
            Some(Err(e)) => {
                eprintln!("error: {what}: {e:#}");
                failed += 1;
            }
            None => not_applied.push(format!("{what}: not sent")),
        }
    }
    if !not_applied.is_empty() {
        bail!(
            "the hub went away: {} of {total} document(s) applied{}; not applied:\n  {}",
            applied.len(),
            if applied.is_empty() {
                String::new()
            } else {
                format!(" ({})", applied.join(", "))
            },
            not_applied.join("\n  ")
        );
    }
    if failed > 0 {
        bail!("{failed} document(s) were not applied");
    }
    Ok(())
}

/// What a document's application came to: its description, and its line or error (`None`: not
/// sent, or sent and never answered).
type Outcome = (String, Option<Result<String>>);

/// Applies each document of `segment`, [`CONCURRENCY`] at a time; once the hub is lost the
/// rest are not sent.
async fn apply_each(
    hub: &Hub,
    segment: Vec<(usize, Document)>,
    lost: &AtomicBool,
    force: bool,
) -> Vec<Outcome> {
    futures::stream::iter(segment)
        .map(|(i, doc)| async move {
            let what = describe(i, &doc);
            if lost.load(Ordering::Relaxed) {
                return (what, None);
            }
            let r = apply(hub, doc, force).await;
            if let Err(e) = &r
                && format!("{e:#}").starts_with("cannot reach the hub")
            {
                lost.store(true, Ordering::Relaxed);
            }
            (what, Some(r))
        })
        .buffered(CONCURRENCY)
        .collect()
        .await
}

/// The outcomes of documents never sent.
fn not_sent(segment: Vec<(usize, Document)>) -> Vec<Outcome> {
    segment
        .into_iter()
        .map(|(i, d)| (describe(i, &d), None))
        .collect()
}

/// The line of an applied work.
fn work_line(m: &flotilla_api::v1::ObjectMeta, generation: i64) -> String {
    format!(
        "manifestwork.work.open-cluster-management.io/{} applied (cluster {}, generation {generation})",
        m.name, m.namespace
    )
}

/// `message` as a request that forces the write when `force` (the `flotilla-force` header):
/// what a GitRepo writes is written all the same.
pub(crate) fn forced<T>(message: T, force: bool) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    if force {
        request.metadata_mut().insert(
            flotilla_api::meta::FORCE_HEADER,
            tonic::metadata::AsciiMetadataValue::from_static("true"),
        );
    }
    request
}
