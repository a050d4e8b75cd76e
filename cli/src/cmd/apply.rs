//! `apply -f FILE`: create or update resources from OCM YAML (multi-document; `-` is stdin).
//!
//! The whole file is parsed before anything is sent, so a bad document applies nothing. Then
//! every document is applied in order; a refused one is reported and the rest still go.

use crate::hub::Hub;
use anyhow::{Context, Result, bail};
use flotilla_api::meta::find_condition;
use flotilla_api::ocm::{self, Document};
use std::io::Read;

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
            Ok(Document::Work(w)) => {
                let problems = flotilla_api::work::validate(&w);
                if problems.is_empty() {
                    docs.push(Document::Work(w));
                } else {
                    let m = w.metadata.clone().unwrap_or_default();
                    errors.push(format!(
                        "{file}: document {} (ManifestWork {}/{}): {}",
                        i + 1,
                        m.namespace,
                        m.name,
                        problems.join("; ")
                    ));
                }
            }
            Ok(d) => docs.push(d),
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

/// Applies the documents [`read`] returned, printing a line for each.
pub async fn run(hub: &Hub, docs: Vec<Document>) -> Result<()> {
    let mut failed = 0;
    for doc in docs {
        match apply(hub, doc).await {
            Ok(line) => println!("{line}"),
            Err(e) => {
                eprintln!("error: {e:#}");
                failed += 1;
            }
        }
    }
    if failed > 0 {
        bail!("{failed} document(s) were not applied");
    }
    Ok(())
}

/// Applies one document; the line says what the hub made of it.
async fn apply(hub: &Hub, doc: Document) -> Result<String> {
    Ok(match doc {
        Document::ClusterSet(s) => {
            let name = s
                .metadata
                .as_ref()
                .map(|m| m.name.clone())
                .unwrap_or_default();
            hub.call(hub.sets().apply_cluster_set(s)).await?;
            format!("managedclusterset.cluster.open-cluster-management.io/{name} applied")
        }
        Document::Work(w) => {
            let m = w.metadata.clone().unwrap_or_default();
            let applied = hub.call(hub.works().apply_work(w)).await?;
            let generation = applied.metadata.map_or(0, |m| m.generation);
            format!(
                "manifestwork.work.open-cluster-management.io/{} applied (cluster {}, generation {generation})",
                m.name, m.namespace
            )
        }
        Document::Placement(p) => {
            let m = p.metadata.clone().unwrap_or_default();
            let applied = hub.call(hub.placements().apply_placement(p)).await?;
            let st = applied.status.unwrap_or_default();
            let mut line = format!(
                "placement.cluster.open-cluster-management.io/{} applied (namespace {}, {} clusters selected)",
                m.name, m.namespace, st.number_of_selected_clusters
            );
            // Applied but not schedulable: the hub keeps it and says why in a condition.
            if let Some(c) = find_condition(&st.conditions, "PlacementMisconfigured")
                .filter(|c| c.status == "True")
            {
                line.push_str(&format!("\nwarning: PlacementMisconfigured: {}", c.message));
            }
            line
        }
        Document::Score(sc) => {
            let m = sc.metadata.clone().unwrap_or_default();
            hub.call(hub.placements().apply_score(sc)).await?;
            format!(
                "addonplacementscore.cluster.open-cluster-management.io/{} applied (cluster {})",
                m.name, m.namespace
            )
        }
        Document::ReplicaSet(r) => {
            let m = r.metadata.clone().unwrap_or_default();
            hub.call(hub.replica_sets().apply_replica_set(r)).await?;
            format!(
                "manifestworkreplicaset.work.open-cluster-management.io/{} applied (namespace {})",
                m.name, m.namespace
            )
        }
        Document::Binding(b) => {
            let m = b.metadata.clone().unwrap_or_default();
            hub.call(hub.sets().apply_binding(b)).await?;
            format!(
                "managedclustersetbinding.cluster.open-cluster-management.io/{} applied (namespace {})",
                m.name, m.namespace
            )
        }
    })
}
