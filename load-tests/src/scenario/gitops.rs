//! `gitops`: a Git repository of B bundles (a directory each: a ConfigMap and a Deployment),
//! made with the system `git` before the hub starts and read over `file://` (the hub is started
//! with `--gitops-file-root` on it). Once the fleet is Available, a GitRepo over every cluster
//! (a Placement of the default set): measured until every bundle's work is Ready on every
//! cluster at the first commit. Then one commit changes every bundle, `SyncGitRepo` fetches it
//! at once: measured until every cluster runs every bundle at the new commit — the issue's
//! "one commit to 10 bundles reaches every cluster".
//!
//! Progress is followed through the hub's work watch: a (cluster, bundle) pair is done when its
//! work carries the commit (`apps.flotilla.io/commit`) and is Applied and Available at its
//! generation; its latency is from the apply or the sync to that event.

use super::Run;
use crate::report::{Phase, Summary};
use crate::watch::converged_generation;
use anyhow::{Context, Result, bail, ensure};
use flotilla_api::ocm::{Document, parse_documents};
use flotilla_api::v1::git_repo_service_client::GitRepoServiceClient;
use flotilla_api::v1::placement_service_client::PlacementServiceClient;
use flotilla_api::v1::work_service_client::WorkServiceClient;
use flotilla_api::v1::{GetGitRepoRequest, GitRepo, WatchWorksRequest};
use flotilla_hub::replicaset::rules::COMMIT_ANNOTATION;
use flotilla_testkit::git::Repo;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tonic::transport::Channel;

const NAMESPACE: &str = "default";
const NAME: &str = "fleet";

/// The repository a gitops run follows, on disk for the run.
pub struct Repository {
    /// The directory the hub may read (`--gitops-file-root`): removed with the run.
    dir: tempfile::TempDir,
    /// The work tree.
    repo: Repo,
    /// Bundles.
    bundles: usize,
}

/// Bundle `b`'s manifests at `version`.
fn bundle(b: usize, version: u32) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: app-{b}, namespace: default}}\n\
         data: {{version: \"{version}\"}}\n---\n\
         apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: app-{b}, namespace: default}}\n\
         spec:\n  replicas: 1\n  selector: {{matchLabels: {{app: app-{b}}}}}\n  template:\n\
         \x20   metadata: {{labels: {{app: app-{b}}}}}\n\
         \x20   spec: {{containers: [{{name: app, image: \"nginx:1.27\"}}]}}\n"
    )
}

impl Repository {
    /// `git init` in a new temporary directory and a first commit of `bundles` bundles.
    pub fn create(bundles: usize) -> Result<Self> {
        ensure!(bundles > 0, "--bundles must be at least 1");
        let dir = tempfile::tempdir().context("a directory for the repository")?;
        let repo = Repo::init(dir.path(), "fleet");
        let me = Self { dir, repo, bundles };
        me.write(1);
        me.repo.commit("version 1");
        Ok(me)
    }

    fn write(&self, version: u32) {
        for b in 0..self.bundles {
            self.repo
                .write(&format!("apps/app-{b}/manifests.yaml"), bundle(b, version));
        }
    }

    /// Changes every bundle to `version` in one commit; its id.
    fn commit(&self, version: u32) -> String {
        self.write(version);
        self.repo.commit(&format!("version {version}"))
    }

    /// The hub's flags to read it.
    pub fn hub_args(&self) -> Vec<String> {
        vec![
            "--gitops-file-root".into(),
            self.dir.path().display().to_string(),
        ]
    }

    fn url(&self) -> String {
        format!("file://{}", self.repo.dir.display())
    }
}

fn gitrepo(url: &str) -> Result<GitRepo> {
    let text = format!(
        "apiVersion: apps.flotilla.io/v1alpha1\nkind: GitRepo\n\
         metadata: {{name: {NAME}, namespace: {NAMESPACE}}}\n\
         spec:\n  repo: {url}\n  branch: main\n  paths: [\"apps/*\"]\n  pollingInterval: 1h\n\
         \x20 targets:\n  - name: all\n    placementRef: {{name: all}}\n"
    );
    match parse_documents(&text).remove(0) {
        Ok(Document::GitRepo(r)) => Ok(r),
        other => bail!("the GitRepo fixture: {other:?}"),
    }
}

async fn setup(channel: &Channel) -> Result<()> {
    super::bind_default_set(channel, NAMESPACE).await?;
    let text = "apiVersion: cluster.open-cluster-management.io/v1beta1\nkind: Placement\n\
                metadata: {name: all, namespace: default}\nspec: {clusterSets: [default]}\n";
    let Ok(Document::Placement(p)) = parse_documents(text).remove(0) else {
        bail!("the placement fixture");
    };
    PlacementServiceClient::new(channel.clone())
        .apply_placement(p)
        .await
        .context("the placement")?;
    Ok(())
}

/// The works the GitRepo delivered, as the hub's watch shows them: per (cluster, work) the
/// commit it last converged at and when that was first seen.
#[derive(Clone, Default)]
struct Pairs(Arc<Mutex<HashMap<WorkKey, (String, Instant)>>>);

/// A work: its cluster (namespace) and name.
type WorkKey = (String, String);

impl Pairs {
    /// Follows every work of the clusters named `prefix…` that carries a commit.
    fn watch(channel: Channel, prefix: String) -> (Self, tokio::task::JoinHandle<()>) {
        let pairs = Self::default();
        let seen = pairs.clone();
        let task = tokio::spawn(async move {
            let mut api = WorkServiceClient::new(channel).max_decoding_message_size(64 << 20);
            let Ok(stream) = api.watch_works(WatchWorksRequest::default()).await else {
                tracing::error!("the work watch could not be opened");
                return;
            };
            let mut stream = stream.into_inner();
            while let Ok(Some(ev)) = stream.message().await {
                let Some(w) = ev.work else { continue };
                let Some(m) = w.metadata.as_ref() else {
                    continue;
                };
                let Some(commit) = m.annotations.get(COMMIT_ANNOTATION) else {
                    continue;
                };
                if !m.namespace.starts_with(&prefix) || converged_generation(&w).is_none() {
                    continue;
                }
                let key = (m.namespace.clone(), m.name.clone());
                let mut map = seen.0.lock().expect("pairs lock");
                match map.get(&key) {
                    Some((c, _)) if c == commit => {}
                    _ => {
                        map.insert(key, (commit.clone(), Instant::now()));
                    }
                }
            }
        });
        (pairs, task)
    }

    /// Latencies (ms from `t0`, sorted) of the pairs converged at `commit`.
    fn at(&self, commit: &str, t0: Instant) -> Vec<f64> {
        let map = self.0.lock().expect("pairs lock");
        let mut l: Vec<f64> = map
            .values()
            .filter(|(c, _)| c == commit)
            .map(|(_, at)| at.saturating_duration_since(t0).as_secs_f64() * 1000.0)
            .collect();
        l.sort_by(f64::total_cmp);
        l
    }
}

/// One measured phase: `start` (apply or sync), then until `want` pairs converged at `commit`
/// (or the deadline); the phase's summary with the pairs' latencies.
async fn phase(
    run: &Run,
    pairs: &Pairs,
    commit: &str,
    want: usize,
    start: impl std::future::Future<Output = Result<()>>,
) -> Result<Summary> {
    let mut s = Summary::new("gitops", run.fleet.clusters);
    let phase = Phase::begin(&run.topology).await;
    let t0 = Instant::now();
    start.await?;
    let deadline = run.deadline();
    let mut done = pairs.at(commit, t0).len();
    while done < want && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
        done = pairs.at(commit, t0).len();
    }
    let latencies = pairs.at(commit, t0);
    s.clusters_converged = Some(latencies.len() / (want / run.fleet.clusters).max(1));
    phase.end(&run.topology, &mut s).await;
    s.latencies(&latencies);
    s.set("pairs_converged", latencies.len());
    s.errors = (want - latencies.len().min(want)) as u64;
    s.converged = latencies.len() >= want;
    Ok(s)
}

/// Runs the scenario over `repository` (its hub started with [`Repository::hub_args`]).
pub async fn run(mut run: Run, repository: &Repository) -> Result<(Summary, Run)> {
    let mut summary = Summary::new("gitops", run.fleet.clusters);
    let (fleet, _clusters, register) = run.start_fleet().await?;
    summary.set("register_seconds", register.as_secs_f64());
    summary.set("bundles", repository.bundles);
    let channel = run.channel()?;
    setup(&channel).await?;
    let (pairs, watch) = Pairs::watch(channel.clone(), run.prefix());
    let api = GitRepoServiceClient::new(channel);
    let want = run.fleet.clusters * repository.bundles;

    // The first commit: every bundle to every cluster.
    let first = repository.repo.head();
    let repo = gitrepo(&repository.url())?;
    let mut apply_api = api.clone();
    let initial = phase(&run, &pairs, &first, want, async move {
        apply_api
            .apply_git_repo(repo)
            .await
            .context("applying the GitRepo")?;
        Ok(())
    })
    .await?;
    summary.set("initial_seconds", initial.seconds);
    summary.set("initial_p50_ms", initial.p50_ms);
    summary.set("initial_p99_ms", initial.p99_ms);
    summary.set("initial_hub_cpu_seconds", initial.hub_cpu_seconds);
    summary.set(
        "initial_pairs_converged",
        initial.extra.get("pairs_converged"),
    );
    summary.errors += initial.errors;

    // One commit to every bundle, fetched at once.
    run.next_phase();
    let second = repository.commit(2);
    let mut sync_api = api.clone();
    let pushed = phase(&run, &pairs, &second, want, async move {
        sync_api
            .sync_git_repo(GetGitRepoRequest {
                namespace: NAMESPACE.into(),
                name: NAME.into(),
            })
            .await
            .context("syncing the GitRepo")?;
        Ok(())
    })
    .await?;
    summary.seconds = pushed.seconds;
    summary.hub_cpu_seconds = pushed.hub_cpu_seconds;
    summary.clusters_converged = pushed.clusters_converged;
    summary.p50_ms = pushed.p50_ms;
    summary.p90_ms = pushed.p90_ms;
    summary.p99_ms = pushed.p99_ms;
    summary.set(
        "commit_pairs_converged",
        pushed.extra.get("pairs_converged"),
    );
    summary.errors += pushed.errors;
    summary.converged = initial.converged && pushed.converged && summary.errors == 0;
    run.record_hub_rss_per_cluster(&mut summary);
    watch.abort();
    fleet.stop().await;
    Ok((summary, run))
}
