//! `apply`: the hub's ManifestWork API alone. C clusters are created ahead of their agents
//! (ManagedCluster documents, accepted, no agent ever connects), then W works per cluster are
//! applied by `--concurrency` concurrent callers. Measured: works per second and the latency of
//! each `ApplyWork` call. Converged when every call succeeded and the hub lists every work.
//! With no agent connected the hub stores each work and publishes its spec to nobody, so this
//! is the API → cluster actor → JetStream KV path without the fleet's load on the machine.
//! With `--streams S` the works go over S `ApplyWorks` streams instead of one call each (the
//! latency is then from a work's message to its answer).

use super::{Run, load_work};
use crate::report::{Phase, Summary};
use anyhow::{Context, Result};
use flotilla_api::v1::cluster_service_client::ClusterServiceClient;
use flotilla_api::v1::work_service_client::WorkServiceClient;
use flotilla_api::v1::{ListWorksRequest, ManagedCluster, ManagedClusterSpec, ObjectMeta};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// Runs the scenario with `works_per_cluster` works on each cluster.
pub async fn run(run: Run, works_per_cluster: usize) -> Result<(Summary, Run)> {
    let total = run.fleet.clusters * works_per_cluster;
    let mut summary = Summary::new("apply", run.fleet.clusters);
    let channel = run.channel()?;
    let clusters = ClusterServiceClient::new(channel.clone());
    let sem = Arc::new(tokio::sync::Semaphore::new(run.concurrency.max(1)));
    let mut tasks = tokio::task::JoinSet::new();
    for name in run.fleet.names() {
        let permit = sem.clone().acquire_owned().await?;
        let mut api = clusters.clone();
        tasks.spawn(async move {
            let r = api
                .apply_cluster(ManagedCluster {
                    metadata: Some(ObjectMeta {
                        name: name.clone(),
                        ..Default::default()
                    }),
                    spec: Some(ManagedClusterSpec {
                        hub_accepts_client: true,
                        ..Default::default()
                    }),
                    ..Default::default()
                })
                .await
                .with_context(|| format!("creating cluster {name}"));
            drop(permit);
            r.map(|_| ())
        });
    }
    while let Some(r) = tasks.join_next().await {
        r.context("cluster task")??;
    }
    let works = WorkServiceClient::new(channel);
    let latencies: Arc<Mutex<Vec<f64>>> = Arc::default();
    let errors = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let phase = Phase::begin(&run.topology).await;
    if run.streams > 0 {
        // One list of every work, over `--streams` ApplyWorks streams.
        let mut all = Vec::with_capacity(total);
        for name in run.fleet.names() {
            for k in 0..works_per_cluster {
                all.push(numbered(&name, k));
            }
        }
        let (answers, missing) = super::streams::apply(&works, all, run.streams).await?;
        let mut lat = latencies.lock().expect("latencies lock");
        for a in answers {
            if a.result.code == 0 {
                lat.push(a.sent.elapsed().as_secs_f64() * 1000.0);
            } else {
                errors.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                tracing::error!(error = %a.result.message, "apply failed");
            }
        }
        errors.fetch_add(missing.len() as u64, std::sync::atomic::Ordering::Relaxed);
    }
    for name in run.fleet.names().into_iter().filter(|_| run.streams == 0) {
        for k in 0..works_per_cluster {
            let permit = sem.clone().acquire_owned().await?;
            let mut api = works.clone();
            let (latencies, errors) = (latencies.clone(), errors.clone());
            let work = numbered(&name, k);
            tasks.spawn(async move {
                let t = Instant::now();
                let r = api.apply_work(work).await;
                let ms = t.elapsed().as_secs_f64() * 1000.0;
                drop(permit);
                match r {
                    Ok(_) => latencies.lock().expect("latencies lock").push(ms),
                    Err(e) => {
                        errors.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        tracing::error!(error = %e, "apply failed");
                    }
                }
                Ok(())
            });
        }
    }
    while let Some(r) = tasks.join_next().await {
        r.context("apply task")??;
    }
    phase.end(&run.topology, &mut summary).await;
    let mut lat = latencies.lock().expect("latencies lock").clone();
    lat.sort_by(f64::total_cmp);
    summary.latencies(&lat);
    summary.errors = errors.load(std::sync::atomic::Ordering::Relaxed);
    let listing = Instant::now();
    let listed = count_works(&works, &run.prefix()).await?;
    summary.set("works", total);
    summary.set("works_listed", listed);
    // Every work listed back, 1,000 a page: the cost of paging through the whole inventory.
    summary.set(
        "list_seconds",
        (listing.elapsed().as_secs_f64() * 1000.0).round() / 1000.0,
    );
    summary.set(
        "works_per_second",
        (total as f64 / summary.seconds.max(1e-3)).round(),
    );
    summary.set("concurrency", run.concurrency);
    summary.set("streams", run.streams);
    summary.converged = summary.errors == 0 && listed == total;
    Ok((summary, run))
}

/// The `k`th load work of cluster `name`.
fn numbered(name: &str, k: usize) -> flotilla_api::v1::ManifestWork {
    let mut work = load_work(name, 1);
    if let Some(m) = work.metadata.as_mut() {
        m.name = format!("{}-{k}", m.name);
    }
    work
}

/// Load works the hub lists in clusters of this run (an attached hub may hold other runs').
async fn count_works(
    api: &WorkServiceClient<tonic::transport::Channel>,
    prefix: &str,
) -> Result<usize> {
    let mut api = api.clone();
    let mut token = String::new();
    let mut n = 0;
    loop {
        let page = api
            .list_works(ListWorksRequest {
                label_selector: "flotilla.io/load=true".into(),
                page_size: 1000,
                page_token: token,
                ..Default::default()
            })
            .await
            .context("listing works")?
            .into_inner();
        n += page
            .items
            .iter()
            .filter(|w| {
                w.metadata
                    .as_ref()
                    .is_some_and(|m| m.namespace.starts_with(prefix))
            })
            .count();
        if page.next_page_token.is_empty() {
            return Ok(n);
        }
        token = page.next_page_token;
    }
}
