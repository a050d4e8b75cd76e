//! `teams` (issue 48): what the grants cost at fleet scale. C clusters in T cluster sets
//! (`set-000` … , exclusive label, C/T clusters each; created ahead of their agents, no agent
//! connects), one work per cluster, T member tokens `team-NNN` each `admin` on its set by the
//! generated grants file, and the CSV `admin`. Measured, a team against the fleet admin on the
//! same hub:
//!
//! - `ListClusters` and `ListWorks` paged through (500 a page): the filtered list scans the same
//!   inventory with one set-mask test per item;
//! - `GetCluster` of one of its own clusters;
//! - `WatchClusters`: T watchers (one per team, or T as the admin) while 1,000 clusters are
//!   relabelled (a label no set reads): hub CPU and the events delivered;
//! - a set move: one team's clusters relabelled into another team's set, until that team's
//!   list shows them (the set index's publication and the filters following it);
//! - in this process, on the same shapes: the set index's build, a cluster's change and a
//!   set's change (`Membership`), and the cluster proxy's grant decision
//!   (`kubeproxy::access::decide_at`) per request.
//!
//! `filtered_over_unfiltered_*` is team ÷ admin per measure; the run has not converged when a
//! list or get costs a team more than [`MAX_RATIO`] times the admin's (the target).

use super::Run;
use crate::report::{Phase, Summary};
use anyhow::{Context, Result};
use flotilla_api::meta::CLUSTERSET_LABEL;
use flotilla_api::v1::cluster_service_client::ClusterServiceClient;
use flotilla_api::v1::cluster_set_service_client::ClusterSetServiceClient;
use flotilla_api::v1::work_service_client::WorkServiceClient;
use flotilla_api::v1::{
    EventType, GetClusterRequest, LabelClusterRequest, ListClustersRequest, ListWorksRequest,
    ManagedCluster, ManagedClusterSet, ManagedClusterSpec, ObjectMeta, WatchClustersRequest,
};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tokio::task::JoinSet;
use tonic::metadata::{Ascii, MetadataValue};
use tonic::service::Interceptor;
use tonic::transport::Channel;

/// A team's list or get may cost at most this many times the fleet admin's.
pub const MAX_RATIO: f64 = 2.0;

/// Times each list is paged through (the median is reported).
const LIST_REPEATS: usize = 5;

/// `GetCluster` calls timed per caller.
const GETS: usize = 300;

/// Clusters relabelled while the watchers are open.
const RELABELS: usize = 1_000;

/// The tokens and grants file a teams run's hub starts with.
pub struct TeamsFiles {
    /// Where they are: kept for the run, removed with it.
    _dir: tempfile::TempDir,
    /// The CSV token file.
    pub tokens: PathBuf,
    /// The grants file.
    pub grants: PathBuf,
    /// The admin's token.
    pub admin: String,
    /// Team `i`'s token.
    pub teams: Vec<String>,
}

/// 64 random bits, from the system's source.
fn random() -> Result<u64> {
    use std::io::Read;
    let mut bytes = [0u8; 8];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .context("reading /dev/urandom")?;
    Ok(u64::from_le_bytes(bytes))
}

/// Set `i`'s name.
pub fn set_name(i: usize) -> String {
    format!("set-{i:03}")
}

/// Team `i`'s user name.
fn team_name(i: usize) -> String {
    format!("team-{i:03}")
}

impl TeamsFiles {
    /// Writes the token file (the admin and `teams` members) and the grants file (team `i`
    /// `admin` on set `i`, by user name).
    pub fn write(teams: usize) -> Result<Self> {
        anyhow::ensure!(
            (1..=1000).contains(&teams),
            "--teams must be 1 to 1000, not {teams}"
        );
        let dir = tempfile::tempdir().context("a directory for the tokens and grants")?;
        let secret = |who: &str| Ok::<_, anyhow::Error>(format!("load-{who}-{:016x}", random()?));
        let admin = secret("admin")?;
        let teams: Vec<String> = (0..teams)
            .map(|i| secret(&team_name(i)))
            .collect::<Result<_>>()?;
        let mut csv = format!("{admin},admin,admin\n");
        let mut yaml =
            String::from("apiVersion: flotilla.io/v1alpha1\nkind: Grants\nclusterSets:\n");
        for (i, token) in teams.iter().enumerate() {
            csv.push_str(&format!("{token},{},member\n", team_name(i)));
            yaml.push_str(&format!(
                "  {}:\n    admin: {{ users: [{}] }}\n",
                set_name(i),
                team_name(i)
            ));
        }
        let (tokens, grants) = (
            dir.path().join("tokens.csv"),
            dir.path().join("grants.yaml"),
        );
        std::fs::write(&tokens, csv).context("writing the token file")?;
        std::fs::write(&grants, yaml).context("writing the grants file")?;
        Ok(Self {
            _dir: dir,
            tokens,
            grants,
            admin,
            teams,
        })
    }

    /// The hub's flags for them.
    pub fn hub_args(&self) -> Vec<String> {
        let path = |p: &Path| p.display().to_string();
        vec![
            "--api-token-file".into(),
            path(&self.tokens),
            "--grants-file".into(),
            path(&self.grants),
            // The admin's round opens one watch per team as one identity.
            "--grpc-watches-per-identity".into(),
            "1024".into(),
        ]
    }
}

/// Adds a bearer token to every call.
#[derive(Clone)]
struct Bearer(MetadataValue<Ascii>);

impl Bearer {
    fn new(token: &str) -> Result<Self> {
        Ok(Self(
            format!("Bearer {token}")
                .parse()
                .context("a token as a header")?,
        ))
    }
}

impl Interceptor for Bearer {
    fn call(&mut self, mut req: tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> {
        req.metadata_mut().insert("authorization", self.0.clone());
        Ok(req)
    }
}

type Clusters =
    ClusterServiceClient<tonic::service::interceptor::InterceptedService<Channel, Bearer>>;
type Works = WorkServiceClient<tonic::service::interceptor::InterceptedService<Channel, Bearer>>;

/// Team ÷ admin per measure.
type Ratios = BTreeMap<&'static str, f64>;

/// A run's callers: the fleet admin and each team's member, on one channel.
struct Callers<'a> {
    channel: &'a Channel,
    admin: &'a Bearer,
    teams: &'a [Bearer],
}

impl Callers<'_> {
    fn clusters(&self, bearer: &Bearer) -> Clusters {
        ClusterServiceClient::with_interceptor(self.channel.clone(), bearer.clone())
    }

    fn works(&self, bearer: &Bearer) -> Works {
        WorkServiceClient::with_interceptor(self.channel.clone(), bearer.clone())
    }
}

/// Runs the scenario: `files` are what the hub started with.
pub async fn run(run: Run, files: &TeamsFiles) -> Result<(Summary, Run)> {
    let teams = files.teams.len();
    let mut summary = Summary::new("teams", run.fleet.clusters);
    summary.set("teams", teams);
    let channel = run.channel()?;
    let admin = Bearer::new(&files.admin)?;
    let bearers: Vec<Bearer> = (files.teams.iter())
        .map(|t| Bearer::new(t))
        .collect::<Result<_>>()?;
    populate(&run, &channel, &admin, teams).await?;
    let per_team = run.fleet.clusters.div_ceil(teams);
    let callers = Callers {
        channel: &channel,
        admin: &admin,
        teams: &bearers,
    };
    // Team 0 sees its set once the set index has caught up with the labels.
    let mut t0 = callers.clusters(&bearers[0]);
    wait_listing(&mut t0, per_team.min(run.fleet.clusters), run.deadline()).await?;

    let phase = Phase::begin(&run.topology).await;
    let mut ratios = Ratios::new();
    list_measures(&run, &callers, &mut summary, &mut ratios).await?;
    get_measures(&run, &callers, &mut summary, &mut ratios).await?;
    watch_measures(&run, &callers, &mut summary, &mut ratios).await?;
    // A set move: team 0's clusters into team 1's set, until team 1 lists them.
    if teams > 1 {
        let moved = set_move(&run, &channel, &admin, bearers[1].clone(), teams).await?;
        summary.set("set_move_clusters", per_team);
        summary.set("set_move_seen_ms", ms(moved));
    }
    phase.end(&run.topology, &mut summary).await;
    in_process_measures(&run, teams, &mut summary, &mut ratios)?;
    verdict(&mut summary, &ratios);
    Ok((summary, run))
}

/// `ListClusters` and `ListWorks` paged through: the admin's, then the teams' in turn.
async fn list_measures(
    run: &Run,
    callers: &Callers<'_>,
    summary: &mut Summary,
    ratios: &mut Ratios,
) -> Result<()> {
    let teams = callers.teams.len();
    let per_team = run.fleet.clusters.div_ceil(teams);
    let (a, _) = repeat_lists(run, LIST_REPEATS, |_| {
        (
            callers.clusters(callers.admin),
            callers.works(callers.admin),
        )
    })
    .await?;
    let (t, seen) = repeat_lists(run, LIST_REPEATS, |k| {
        let bearer = &callers.teams[k % teams];
        (callers.clusters(bearer), callers.works(bearer))
    })
    .await?;
    anyhow::ensure!(
        seen.0 <= per_team && seen.0 > 0,
        "a team listed {} clusters, not its set's {per_team}",
        seen.0
    );
    for (name, admin_s, team_s, cpu) in [
        (
            "list_clusters",
            a.clusters,
            t.clusters,
            (a.clusters_cpu, t.clusters_cpu),
        ),
        ("list_works", a.works, t.works, (a.works_cpu, t.works_cpu)),
    ] {
        summary.set(&format!("{name}_admin_ms"), ms(admin_s));
        summary.set(&format!("{name}_team_ms"), ms(team_s));
        summary.set(&format!("{name}_admin_hub_cpu_ms"), ms(cpu.0));
        summary.set(&format!("{name}_team_hub_cpu_ms"), ms(cpu.1));
        ratios.insert(name, ratio(team_s, admin_s));
    }
    summary.set("team_listed_clusters", seen.0);
    summary.set("team_listed_works", seen.1);
    Ok(())
}

/// Gets of one of team 0's clusters: the admin's and team 0's.
async fn get_measures(
    run: &Run,
    callers: &Callers<'_>,
    summary: &mut Summary,
    ratios: &mut Ratios,
) -> Result<()> {
    let own = run.fleet.name(0);
    let admin_get = gets(&mut callers.clusters(callers.admin), &own).await?;
    let team_get = gets(&mut callers.clusters(&callers.teams[0]), &own).await?;
    summary.set("get_cluster_admin_p50_ms", admin_get);
    summary.set("get_cluster_team_p50_ms", team_get);
    ratios.insert("get_cluster", ratio(team_get, admin_get));
    Ok(())
}

/// Watches: T at once while 1,000 clusters are relabelled — T as the admin, then one per team.
async fn watch_measures(
    run: &Run,
    callers: &Callers<'_>,
    summary: &mut Summary,
    ratios: &mut Ratios,
) -> Result<()> {
    let admins = vec![callers.admin.clone(); callers.teams.len()];
    let relabelled = RELABELS.min(run.fleet.clusters);
    let (channel, admin) = (callers.channel, callers.admin);
    let w_admin = watch_phase(run, channel, admin, &admins, relabelled, "admin").await?;
    let w_team = watch_phase(run, channel, admin, callers.teams, relabelled, "team").await?;
    for (who, w) in [("admin", &w_admin), ("team", &w_team)] {
        summary.set(&format!("watch_{who}_events"), w.events);
        summary.set(&format!("watch_{who}_seconds"), round3(w.seconds));
        summary.set(&format!("watch_{who}_hub_cpu_ms"), ms(w.hub_cpu));
    }
    // The same changes under as many watchers: the hub's CPU, team ÷ admin.
    ratios.insert("watch_hub_cpu", ratio(w_team.hub_cpu, w_admin.hub_cpu));
    let per_event = |w: &Watched| w.hub_cpu / w.events.max(1) as f64;
    summary.set(
        "watch_hub_cpu_per_event_us",
        [
            ("admin", (per_event(&w_admin) * 1e6).round()),
            ("team", (per_event(&w_team) * 1e6).round()),
        ]
        .into_iter()
        .collect::<BTreeMap<_, _>>(),
    );
    Ok(())
}

/// The set index and the proxy's decisions, timed in this process on the same shapes.
fn in_process_measures(
    run: &Run,
    teams: usize,
    summary: &mut Summary,
    ratios: &mut Ratios,
) -> Result<()> {
    let index = in_process::set_index(run.fleet.clusters, teams)?;
    summary.set("set_index", index);
    let proxy = in_process::proxy_decisions(run.fleet.clusters, teams)?;
    ratios.insert("proxy_decision", proxy.team_ns / proxy.admin_ns.max(1e-3));
    summary.set("proxy_decision_admin_ns", proxy.admin_ns.round());
    summary.set("proxy_decision_team_ns", proxy.team_ns.round());
    Ok(())
}

/// Converged when no team's list, get or watch costs more than [`MAX_RATIO`] times the
/// admin's (the proxy decision is reported, not gated: nanoseconds against a request's
/// milliseconds) and nothing failed.
fn verdict(summary: &mut Summary, ratios: &Ratios) {
    let over: Vec<_> = (ratios.iter())
        .filter(|(k, r)| **r > MAX_RATIO && !k.starts_with("proxy"))
        .map(|(k, r)| format!("{k} {r:.2}"))
        .collect();
    summary.set(
        "filtered_over_unfiltered",
        (ratios.iter())
            .map(|(k, r)| (*k, (r * 100.0).round() / 100.0))
            .collect::<BTreeMap<_, _>>(),
    );
    summary.converged = over.is_empty() && summary.errors == 0;
    if !over.is_empty() {
        tracing::error!(over = ?over, "a team's call costs more than {MAX_RATIO}× the admin's");
    }
}

fn ms(seconds: f64) -> f64 {
    (seconds * 1e6).round() / 1000.0
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

fn ratio(team: f64, admin: f64) -> f64 {
    team / admin.max(1e-9)
}

/// The sets, the clusters (C/T in each set, accepted, no agent) and one work per cluster.
async fn populate(run: &Run, channel: &Channel, admin: &Bearer, teams: usize) -> Result<()> {
    let mut sets = ClusterSetServiceClient::with_interceptor(channel.clone(), admin.clone());
    for i in 0..teams {
        sets.apply_cluster_set(ManagedClusterSet {
            metadata: Some(ObjectMeta {
                name: set_name(i),
                ..Default::default()
            }),
            spec: Some(Default::default()),
            status: None,
        })
        .await
        .with_context(|| format!("creating set {}", set_name(i)))?;
    }
    let clusters = ClusterServiceClient::with_interceptor(channel.clone(), admin.clone());
    let works = WorkServiceClient::with_interceptor(channel.clone(), admin.clone());
    let sem = std::sync::Arc::new(tokio::sync::Semaphore::new(run.concurrency.max(1)));
    let mut tasks = tokio::task::JoinSet::new();
    for (n, name) in run.fleet.names().into_iter().enumerate() {
        let permit = sem.clone().acquire_owned().await?;
        let (mut clusters, mut works) = (clusters.clone(), works.clone());
        let set = set_name(n % teams);
        tasks.spawn(async move {
            let cluster = ManagedCluster {
                metadata: Some(ObjectMeta {
                    name: name.clone(),
                    labels: [(CLUSTERSET_LABEL.to_string(), set)].into(),
                    ..Default::default()
                }),
                spec: Some(ManagedClusterSpec {
                    hub_accepts_client: true,
                    ..Default::default()
                }),
                ..Default::default()
            };
            clusters
                .apply_cluster(cluster)
                .await
                .with_context(|| format!("creating cluster {name}"))?;
            works
                .apply_work(super::load_work(&name, 1))
                .await
                .with_context(|| format!("a work on {name}"))?;
            drop(permit);
            anyhow::Ok(())
        });
    }
    while let Some(r) = tasks.join_next().await {
        r.context("populating task")??;
    }
    Ok(())
}

/// Waits until `client` lists `want` clusters.
async fn wait_listing(client: &mut Clusters, want: usize, deadline: Instant) -> Result<()> {
    loop {
        let n = list_clusters(client).await?;
        if n >= want {
            return Ok(());
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "a team listed {n} of its {want} clusters by the deadline"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn list_clusters(client: &mut Clusters) -> Result<usize> {
    let (mut token, mut n) = (String::new(), 0);
    loop {
        let page = client
            .list_clusters(ListClustersRequest {
                label_selector: String::new(),
                page_size: 500,
                page_token: token,
            })
            .await
            .context("listing clusters")?
            .into_inner();
        n += page.items.len();
        if page.next_page_token.is_empty() {
            return Ok(n);
        }
        token = page.next_page_token;
    }
}

async fn list_works(client: &mut Works) -> Result<usize> {
    let (mut token, mut n) = (String::new(), 0);
    loop {
        let page = client
            .list_works(ListWorksRequest {
                page_size: 500,
                page_token: token,
                ..Default::default()
            })
            .await
            .context("listing works")?
            .into_inner();
        n += page.items.len();
        if page.next_page_token.is_empty() {
            return Ok(n);
        }
        token = page.next_page_token;
    }
}

/// Median seconds (and hub CPU seconds) of a whole paged list.
#[derive(Default)]
struct Lists {
    clusters: f64,
    works: f64,
    clusters_cpu: f64,
    works_cpu: f64,
}

/// Pages through both lists `repeats` times with the clients `make(k)` gives: the medians, and
/// the items the last lists held.
async fn repeat_lists(
    run: &Run,
    repeats: usize,
    mut make: impl FnMut(usize) -> (Clusters, Works),
) -> Result<(Lists, (usize, usize))> {
    let (mut c, mut w, mut cc, mut wc) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut seen = (0, 0);
    for k in 0..repeats {
        let (mut clusters, mut works) = make(k);
        let cpu = Phase::begin(&run.topology).await;
        let t = Instant::now();
        seen.0 = list_clusters(&mut clusters).await?;
        c.push(t.elapsed().as_secs_f64());
        cc.push(hub_cpu(&cpu, run));
        let cpu = Phase::begin(&run.topology).await;
        let t = Instant::now();
        seen.1 = list_works(&mut works).await?;
        w.push(t.elapsed().as_secs_f64());
        wc.push(hub_cpu(&cpu, run));
    }
    Ok((
        Lists {
            clusters: median(c),
            works: median(w),
            clusters_cpu: median(cc),
            works_cpu: median(wc),
        },
        seen,
    ))
}

fn hub_cpu(phase: &Phase, run: &Run) -> f64 {
    run.topology.cpu().refresh();
    phase
        .cpu_so_far(&run.topology, 1)
        .cpu_hub_s
        .unwrap_or_default()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or_default()
}

/// Median milliseconds of [`GETS`] `GetCluster` calls of `name`.
async fn gets(client: &mut Clusters, name: &str) -> Result<f64> {
    let mut times = Vec::with_capacity(GETS);
    for _ in 0..GETS {
        let t = Instant::now();
        client
            .get_cluster(GetClusterRequest { name: name.into() })
            .await
            .with_context(|| format!("getting {name}"))?;
        times.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    Ok((median(times) * 1000.0).round() / 1000.0)
}

/// What one watch phase cost.
struct Watched {
    events: u64,
    seconds: f64,
    hub_cpu: f64,
}

/// The label the watch phases set (no set reads it).
const TICK: &str = "flotilla.io/load-tick";

/// Opens a `WatchClusters` per bearer, relabels `relabelled` clusters (a label no set reads)
/// as the admin, and waits until every watcher got the MODIFIED events of the relabelled
/// clusters it sees (a team's own, the admin's all).
async fn watch_phase(
    run: &Run,
    channel: &Channel,
    admin: &Bearer,
    watchers: &[Bearer],
    relabelled: usize,
    round: &str,
) -> Result<Watched> {
    let value = format!("{round}-{:08x}", random()? as u32);
    let events = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let mut tasks = JoinSet::new();
    let (ready_tx, mut ready_rx) = tokio::sync::mpsc::channel(watchers.len().max(1));
    let teams = watchers.len();
    for (i, bearer) in watchers.iter().enumerate() {
        let mine = |n: &usize| round == "admin" || n % teams == i;
        let watcher = Watcher {
            client: ClusterServiceClient::with_interceptor(channel.clone(), bearer.clone()),
            names: (0..relabelled)
                .filter(mine)
                .map(|n| run.fleet.name(n))
                .collect(),
            // Its initial list: every cluster, or its set's.
            initial: (0..run.fleet.clusters).filter(mine).count(),
            value: value.clone(),
            events: events.clone(),
        };
        tasks.spawn(watcher.run(ready_tx.clone()));
    }
    drop(ready_tx);
    for _ in 0..teams {
        ready_rx.recv().await.context("a watch never opened")?;
    }
    let cpu = Phase::begin(&run.topology).await;
    let t = Instant::now();
    relabel(run, channel, admin, relabelled, &value).await?;
    let deadline = run.deadline();
    while let Some(r) = tokio::time::timeout_at(deadline.into(), tasks.join_next())
        .await
        .context("the watchers' events by the deadline")?
    {
        r.context("watch task")??;
    }
    Ok(Watched {
        events: events.load(std::sync::atomic::Ordering::Relaxed),
        seconds: t.elapsed().as_secs_f64(),
        hub_cpu: hub_cpu(&cpu, run),
    })
}

/// One watcher of a watch phase.
struct Watcher {
    client: Clusters,
    /// The relabelled clusters it sees, until their MODIFIED events come.
    names: std::collections::HashSet<String>,
    /// The clusters of its initial list.
    initial: usize,
    /// The phase's label value.
    value: String,
    /// The phase's MODIFIED events, every watcher's.
    events: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl Watcher {
    /// Watches until each of its clusters was MODIFIED with the phase's value; says `ready`
    /// once its initial list (ADDED events) is in.
    async fn run(mut self, ready: tokio::sync::mpsc::Sender<()>) -> Result<()> {
        let mut stream = (self.client)
            .watch_clusters(WatchClustersRequest::default())
            .await
            .context("opening a watch")?
            .into_inner();
        let (mut added, mut ready) = (0, Some(ready));
        if self.initial == 0
            && let Some(r) = ready.take()
        {
            let _ = r.try_send(());
        }
        while !self.names.is_empty() {
            let Some(e) = stream.message().await.context("watching")? else {
                anyhow::bail!("a watch ended with {} events missing", self.names.len());
            };
            if e.r#type == EventType::Added as i32 {
                added += 1;
                if added >= self.initial
                    && let Some(r) = ready.take()
                {
                    let _ = r.try_send(());
                }
            }
            let Some(c) = e.cluster else { continue };
            let meta = c.metadata.unwrap_or_default();
            if e.r#type == EventType::Modified as i32 && meta.labels.get(TICK) == Some(&self.value)
            {
                (self.events).fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                self.names.remove(&meta.name);
            }
        }
        Ok(())
    }
}

/// Labels the first `relabelled` clusters `TICK=value` as the admin, `run.concurrency` at once.
async fn relabel(
    run: &Run,
    channel: &Channel,
    admin: &Bearer,
    relabelled: usize,
    value: &str,
) -> Result<()> {
    let clusters = ClusterServiceClient::with_interceptor(channel.clone(), admin.clone());
    let sem = std::sync::Arc::new(tokio::sync::Semaphore::new(run.concurrency.max(1)));
    let mut labels = JoinSet::new();
    for n in 0..relabelled {
        let permit = sem.clone().acquire_owned().await?;
        let mut clusters = clusters.clone();
        let (name, value) = (run.fleet.name(n), value.to_string());
        labels.spawn(async move {
            clusters
                .label_cluster(LabelClusterRequest {
                    name: name.clone(),
                    set: [(TICK.to_string(), value)].into(),
                    remove: Vec::new(),
                })
                .await
                .with_context(|| format!("relabelling {name}"))?;
            drop(permit);
            anyhow::Ok(())
        });
    }
    while let Some(r) = labels.join_next().await {
        r.context("relabel task")??;
    }
    Ok(())
}

/// Relabels team 0's `per_team` clusters into set 1 and returns the seconds until team 1
/// lists them.
async fn set_move(
    run: &Run,
    channel: &Channel,
    admin: &Bearer,
    team1: Bearer,
    teams: usize,
) -> Result<f64> {
    let mut clusters = ClusterServiceClient::with_interceptor(channel.clone(), admin.clone());
    let mut watcher = ClusterServiceClient::with_interceptor(channel.clone(), team1);
    let before = list_clusters(&mut watcher).await?;
    let t = Instant::now();
    for n in (0..run.fleet.clusters).filter(|n| n % teams == 0) {
        clusters
            .label_cluster(LabelClusterRequest {
                name: run.fleet.name(n),
                set: [(CLUSTERSET_LABEL.to_string(), set_name(1))].into(),
                remove: Vec::new(),
            })
            .await
            .context("moving a cluster")?;
    }
    let moved = (0..run.fleet.clusters).filter(|n| n % teams == 0).count();
    wait_listing(&mut watcher, before + moved, run.deadline()).await?;
    Ok(t.elapsed().as_secs_f64())
}

/// The pure parts, timed in this process on the run's shapes.
mod in_process {
    use super::{set_name, team_name};
    use anyhow::Result;
    use flotilla_api::meta::CLUSTERSET_LABEL;
    use flotilla_api::v1::{ManagedCluster, ManagedClusterSet, ObjectMeta};
    use flotilla_hub::grants::members::Membership;
    use std::collections::BTreeMap;
    use std::time::Instant;

    fn cluster(n: usize, set: &str) -> ManagedCluster {
        ManagedCluster {
            metadata: Some(ObjectMeta {
                name: format!("c-{n:06}"),
                labels: [(CLUSTERSET_LABEL.to_string(), set.to_string())].into(),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn set(name: &str) -> ManagedClusterSet {
        ManagedClusterSet {
            metadata: Some(ObjectMeta {
                name: name.into(),
                ..Default::default()
            }),
            spec: Some(Default::default()),
            status: None,
        }
    }

    /// The set index at `clusters` clusters in `teams` sets: its build, a cluster's change, a
    /// set's change and a view's publication, in microseconds.
    pub fn set_index(clusters: usize, teams: usize) -> Result<BTreeMap<&'static str, f64>> {
        let sets: Vec<_> = (0..teams).map(|i| set(&set_name(i))).collect();
        let fleet: Vec<_> = (0..clusters)
            .map(|n| cluster(n, &set_name(n % teams)))
            .collect();
        let us = |t: Instant| (t.elapsed().as_secs_f64() * 1e7).round() / 10.0;
        let t = Instant::now();
        let mut m = Membership::new(sets.iter(), fleet.iter())?;
        let build = us(t);
        let t = Instant::now();
        let moved = cluster(0, &set_name(1 % teams));
        for _ in 0..100 {
            m.cluster("c-000000", Some(&moved));
            m.cluster("c-000000", Some(&fleet[0]));
        }
        let cluster_change = us(t) / 200.0;
        let mut extra = set("extra");
        let t = Instant::now();
        m.set("extra", Some(&extra), fleet.iter())?;
        let set_added = us(t);
        extra
            .spec
            .get_or_insert_with(Default::default)
            .cluster_selector = Some(flotilla_api::v1::ManagedClusterSelector {
            selector_type: flotilla_api::clusterset::LABEL_SELECTOR.into(),
            label_selector: Some(Default::default()),
        });
        let t = Instant::now();
        m.set("extra", Some(&extra), fleet.iter())?;
        let set_changed = us(t);
        let t = Instant::now();
        m.set("extra", None, fleet.iter())?;
        let set_deleted = us(t);
        let t = Instant::now();
        let _ = m.view();
        let publish = us(t);
        Ok([
            ("build_us", build),
            ("cluster_change_us", cluster_change),
            ("set_added_us", set_added),
            ("set_selector_changed_us", set_changed),
            ("set_deleted_us", set_deleted),
            ("publish_us", publish),
        ]
        .into())
    }

    /// Nanoseconds per proxy grant decision, the fleet admin's and a set admin's.
    pub struct Decisions {
        pub admin_ns: f64,
        pub team_ns: f64,
    }

    pub fn proxy_decisions(clusters: usize, teams: usize) -> Result<Decisions> {
        use flotilla_hub::grants::file::{Builder, user};
        use flotilla_hub::grants::live::Live;
        use flotilla_hub::grants::{SetIndexView, SetRole};
        use flotilla_hub::grpc::auth::{Identity, Role};
        use flotilla_hub::kubeproxy::access::{Asked, decide_at};
        use flotilla_hub::kubeproxy::request::RequestInfo;
        let mut grants = Builder::default();
        for i in 0..teams {
            grants = grants.set(&set_name(i), SetRole::Admin, user(&team_name(i)));
        }
        let names: Vec<String> = (0..teams).map(set_name).collect();
        let members = (0..clusters).map(|n| (format!("c-{n:06}"), vec![names[n % teams].clone()]));
        anyhow::ensure!(clusters >= teams, "fewer clusters than teams");
        let index = flotilla_hub::setindex::SetIndex::new();
        index.publish(SetIndexView::build(1, 1, names.iter().cloned(), members)?);
        let live = Live::new(grants.build()).with_index(index);
        let admin = Identity::token("admin", Role::Admin, Vec::new()).scoped(&live);
        let team = Identity::token(&team_name(0), Role::Member, Vec::new()).scoped(&live);
        let info = RequestInfo::parse(&http::Method::GET, "/api/v1/namespaces/d/pods", "");
        let asked = Asked::default();
        let time = |who: &Identity| -> Result<f64> {
            const N: usize = 20_000;
            let t = Instant::now();
            let per_team = (clusters / teams).max(1);
            for k in 0..N {
                // Team 0's clusters (n % teams == 0), in turn.
                let cluster = format!("c-{:06}", (k % per_team) * teams);
                decide_at(who, Some(&live), &cluster, &info, &asked)
                    .map_err(|r| anyhow::anyhow!("refused: {}", r.0))?;
            }
            Ok(t.elapsed().as_secs_f64() * 1e9 / N as f64)
        };
        Ok(Decisions {
            admin_ns: time(&admin)?,
            team_ns: time(&team)?,
        })
    }
}
