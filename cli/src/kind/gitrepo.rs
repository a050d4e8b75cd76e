//! GitRepos: NAME, REPO, BRANCH, COMMIT, BUNDLES (ready/total), FETCHED, RENDERED, STATE (the
//! worst of its clusters' Fleet states); `-o wide` adds PATHS, TARGETS, LAST FETCH. `get gitrepos
//! NAME --clusters`: one row per bundle and decided cluster.

use super::{Delete, Gone, Kind, Target};
use crate::hub::Hub;
use flotilla_api::meta::find_condition;
use flotilla_api::ocm::gitrepo as shapes;
use flotilla_api::v1::{
    GitRepo, GitRepoClusterRow, ListGitRepoClustersRequest, ListGitRepoClustersResponse, ObjectMeta,
};

/// `True`, or the condition's reason; `-` when absent.
fn state(r: &GitRepo, type_: &str) -> String {
    let conditions = r
        .status
        .as_ref()
        .map(|s| s.conditions.as_slice())
        .unwrap_or_default();
    match find_condition(conditions, type_) {
        Some(c) if c.status == flotilla_api::meta::status::TRUE => "True".into(),
        Some(c) => c.reason.clone(),
        None => "-".into(),
    }
}

impl Kind for GitRepo {
    type Ocm = shapes::GitRepo;
    const COLUMNS: &'static [&'static str] = &[
        "NAME", "REPO", "BRANCH", "COMMIT", "BUNDLES", "FETCHED", "RENDERED", "STATE",
    ];
    const WIDE_COLUMNS: &'static [&'static str] = &["PATHS", "TARGETS", "LAST FETCH"];

    fn metadata(&self) -> Option<&ObjectMeta> {
        self.metadata.as_ref()
    }

    fn row(&self) -> Vec<String> {
        let spec = self.spec.clone().unwrap_or_default();
        let status = self.status.clone().unwrap_or_default();
        let branch = if spec.branch.is_empty() {
            spec.revision.clone()
        } else {
            spec.branch.clone()
        };
        let commit = status.commit.get(..7).unwrap_or("-").to_owned();
        let bundles = if status.ready_bundles.is_empty() {
            "-".into()
        } else {
            status.ready_bundles.clone()
        };
        vec![
            self.name(),
            spec.repo,
            branch,
            commit,
            bundles,
            state(self, "Fetched"),
            state(self, "Rendered"),
            if status.display_state.is_empty() {
                "-".into()
            } else {
                status.display_state.clone()
            },
        ]
    }

    fn wide_row(&self) -> Vec<String> {
        let spec = self.spec.clone().unwrap_or_default();
        let last = self
            .status
            .as_ref()
            .and_then(|s| s.last_fetch_time.as_ref())
            .map(flotilla_api::meta::rfc3339)
            .unwrap_or_else(|| "-".into());
        vec![
            if spec.paths.is_empty() {
                "/".into()
            } else {
                spec.paths.join(",")
            },
            spec.targets
                .iter()
                .map(|t| t.placement_ref.as_str())
                .collect::<Vec<_>>()
                .join(","),
            last,
        ]
    }

    fn to_ocm(&self) -> shapes::GitRepo {
        shapes::GitRepo::from(self)
    }

    const ACROSS_NAMESPACES: bool = true;

    /// The GitRepos (of the namespace when given), only the named ones when it names some (an
    /// error when none of them is there).
    async fn fetch(hub: &crate::hub::Hub, query: &super::Query) -> anyhow::Result<Vec<Self>> {
        let r = flotilla_api::v1::ListGitReposRequest {
            namespace: query.namespace.clone().unwrap_or_default(),
        };
        let items = hub
            .idempotent(async || hub.git_repos().list_git_repos(r.clone()).await)
            .await?
            .items;
        super::named(items, &query.names, "GitRepo")
    }
}

fn short(commit: &str) -> &str {
    if commit.is_empty() {
        "-"
    } else {
        commit.get(..7).unwrap_or(commit)
    }
}

/// The rows of `get gitrepos NAME --clusters` (`state`: only those in it; empty: all).
pub async fn cluster_rows(
    hub: &crate::hub::Hub,
    namespace: &str,
    name: &str,
    state: &str,
) -> anyhow::Result<ListGitRepoClustersResponse> {
    let r = ListGitRepoClustersRequest {
        namespace: namespace.to_owned(),
        name: name.to_owned(),
        state: state.to_owned(),
    };
    hub.idempotent(async || hub.git_repos().list_git_repo_clusters(r.clone()).await)
        .await
}

/// `get gitrepos NAME --clusters`: BUNDLE, CLUSTER, STATE, COMMIT, MESSAGE.
pub fn cluster_table(answer: &ListGitRepoClustersResponse) -> String {
    let rows: Vec<Vec<String>> = answer
        .rows
        .iter()
        .map(|r| {
            vec![
                r.bundle.clone(),
                r.cluster.clone(),
                r.state.clone(),
                short(&r.commit).to_owned(),
                if r.message.is_empty() {
                    "-".into()
                } else {
                    r.message.clone()
                },
            ]
        })
        .collect();
    let mut out = crate::output::table(&["BUNDLE", "CLUSTER", "STATE", "COMMIT", "MESSAGE"], &rows);
    if answer.truncated {
        out.push_str("(more rows were left out: narrow them with --state)\n");
    }
    out
}

/// The states counted in `s`, worst first, those at zero left out ("-" when none).
fn states_line(s: &flotilla_api::v1::ClusterStates) -> String {
    let counts = [
        ("ErrApplied", s.err_applied),
        ("WaitApplied", s.wait_applied),
        ("Modified", s.modified),
        ("OutOfSync", s.out_of_sync),
        ("Pending", s.pending),
        ("NotReady", s.not_ready),
        ("Ready", s.ready),
    ];
    let shown: Vec<String> = counts
        .iter()
        .filter(|(_, n)| *n > 0)
        .map(|(name, n)| format!("{name} {n}"))
        .collect();
    if shown.is_empty() {
        "-".into()
    } else {
        shown.join("  ")
    }
}

/// `describe gitrepo`: the repository, the commit delivered and the last fetched, a pin or a
/// pause, each condition with its message (a refused commit says what and where), and every
/// bundle with its clusters' states and (at most 10) the clusters not Ready from `rows`.
pub fn describe(r: &GitRepo, rows: &[GitRepoClusterRow]) -> String {
    let spec = r.spec.clone().unwrap_or_default();
    let status = r.status.clone().unwrap_or_default();
    let m = r.metadata.clone().unwrap_or_default();
    let mut out = format!("Name:       {}\nNamespace:  {}\n", m.name, m.namespace);
    let follows = if spec.branch.is_empty() {
        format!("revision {}", spec.revision)
    } else {
        format!("branch {}", spec.branch)
    };
    out.push_str(&format!("Repo:       {} ({follows})\n", spec.repo));
    let commit = if status.commit.is_empty() {
        "-"
    } else {
        &status.commit
    };
    out.push_str(&format!("Delivered:  {commit}\n"));
    if !status.pinned_commit.is_empty() {
        out.push_str(&format!(
            "Pinned:     {} (undone; `flotilla rollout resume gitrepo {} -n {}` unpins)\n",
            status.pinned_commit, m.name, m.namespace
        ));
    }
    if status.rollout_paused {
        out.push_str("Rollout:    paused (every bundle's replica set)\n");
    }
    if !status.previous_commits.is_empty() {
        let shorts: Vec<&str> = status
            .previous_commits
            .iter()
            .map(|c| c.get(..7).unwrap_or(c))
            .collect();
        out.push_str(&format!("Before:     {}\n", shorts.join(" ")));
    }
    if let Some(h) = &status.head {
        out.push_str(&format!(
            "Head:       {} {:?} ({})\n",
            h.sha, h.subject, h.author
        ));
    }
    out.push_str("Conditions:\n");
    for c in &status.conditions {
        out.push_str(&format!(
            "  {} {} {}: {}\n",
            c.r#type, c.status, c.reason, c.message
        ));
    }
    if !status.display_state.is_empty() {
        out.push_str(&format!("State:      {}\n", status.display_state));
    }
    out.push_str("Bundles:\n");
    for b in &status.bundles {
        let s = b.summary.unwrap_or_default();
        out.push_str(&format!(
            "  {}  {}  replicaset {}  commit {}  {}/{} available\n",
            b.name,
            if b.path.is_empty() { "/" } else { &b.path },
            b.replica_set,
            b.content_commit.get(..7).unwrap_or("-"),
            s.available,
            s.total
        ));
        out.push_str(&format!(
            "    {}\n",
            states_line(&b.states.unwrap_or_default())
        ));
        let not_ready = rows
            .iter()
            .filter(|c| c.bundle == b.name && c.state != "Ready");
        for c in not_ready.take(10) {
            out.push_str(&format!(
                "    {}  {}  {}  {}\n",
                c.cluster,
                c.state,
                short(&c.commit),
                c.message
            ));
        }
    }
    out
}

impl Delete for GitRepo {
    async fn delete(hub: &Hub, target: Target) -> anyhow::Result<Gone> {
        let r = flotilla_api::v1::GetGitRepoRequest {
            namespace: target.namespace,
            name: target.name,
        };
        let d = hub
            .delete(async || hub.git_repos().delete_git_repo(r.clone()).await)
            .await?;
        Ok(Gone::new(
            d,
            format!(
                "gitrepo/{} deleted (namespace {}; its replica sets go)",
                r.name, r.namespace
            ),
        ))
    }
}
