//! GitRepos: NAME, REPO, BRANCH, COMMIT, BUNDLES (ready/total), FETCHED, RENDERED; `-o wide`
//! adds PATHS, TARGETS, LAST FETCH.

use super::{Delete, Gone, Kind, Target};
use crate::hub::Hub;
use flotilla_api::meta::find_condition;
use flotilla_api::ocm::gitrepo as shapes;
use flotilla_api::v1::{GitRepo, ObjectMeta};

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
        "NAME", "REPO", "BRANCH", "COMMIT", "BUNDLES", "FETCHED", "RENDERED",
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

/// `describe gitrepo`: the repository, the commit delivered and the last fetched, each
/// condition with its message (a refused commit says what and where), and every bundle.
pub fn describe(r: &GitRepo) -> String {
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
