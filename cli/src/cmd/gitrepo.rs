//! `flotilla gitrepo sync NAME`: fetch a GitRepo now, whatever its polling interval or back-off
//! say (the hub's `SyncGitRepo`), and with `--wait` wait until that fetch has ended and say what
//! it found: the commit fetched, whether it was delivered, or why not (exit 1).

use crate::hub::Hub;
use anyhow::{Result, anyhow, bail};
use flotilla_api::meta::{find_condition, rfc3339};
use flotilla_api::v1::{GetGitRepoRequest, GitRepo};
use std::time::Duration;

/// What `gitrepo` does.
#[derive(clap::Subcommand, Debug, Clone)]
pub enum GitrepoWhat {
    /// Fetch a GitRepo now (its polling interval and back-off notwithstanding); with --wait,
    /// wait for that fetch to end and print the commit it found and whether it was delivered
    /// (exit 1 when the fetch failed or the commit was refused).
    Sync {
        /// Name.
        name: String,
        /// Namespace.
        #[arg(short = 'n', long, default_value = "default")]
        namespace: String,
        /// Wait until the fetch has ended (the next fetch to end: one already running ends
        /// first, and the hub fetches again after it).
        #[arg(long)]
        wait: bool,
        /// How long --wait waits (30s, 2m, 1h).
        #[arg(long, default_value = "2m", value_parser = crate::cmd::join::parse_ttl, requires = "wait")]
        timeout: Duration,
    },
}

/// How often `--wait` reads the GitRepo.
const POLL: Duration = Duration::from_millis(250);

/// Runs `gitrepo`.
pub async fn run(hub: &Hub, what: GitrepoWhat) -> Result<()> {
    let GitrepoWhat::Sync {
        name,
        namespace,
        wait,
        timeout,
    } = what;
    let request = GetGitRepoRequest {
        namespace: namespace.clone(),
        name: name.clone(),
    };
    let shown = format!("gitrepo {namespace}/{name}");
    let before = last_fetch(
        &hub.idempotent(async || hub.git_repos().get_git_repo(request.clone()).await)
            .await?,
    );
    hub.call(hub.git_repos().sync_git_repo(request.clone()))
        .await?;
    if !wait {
        println!("{shown}: fetch requested");
        return Ok(());
    }
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let repo = hub
            .idempotent(async || hub.git_repos().get_git_repo(request.clone()).await)
            .await?;
        if last_fetch(&repo) > before {
            let (ok, line) = outcome(&shown, &repo);
            if ok {
                println!("{line}");
                return Ok(());
            }
            bail!("{line}");
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(anyhow!(
                "{shown}: no fetch ended within {} s (the hub fetches at most --gitops-fetches \
                 repositories at once and one per host; `flotilla describe gitrepo {name} -n \
                 {namespace}` shows its state)",
                timeout.as_secs()
            ));
        }
        tokio::time::sleep(POLL).await;
    }
}

/// When the GitRepo's last fetch ended, comparable (seconds, nanoseconds).
fn last_fetch(repo: &GitRepo) -> Option<(i64, i32)> {
    let t = repo.status.as_ref()?.last_fetch_time.as_ref()?;
    Some((t.seconds, t.nanos))
}

/// Whether the last fetch went well, and the line that says what it found. Pure.
pub fn outcome(shown: &str, repo: &GitRepo) -> (bool, String) {
    let status = repo.status.clone().unwrap_or_default();
    let condition = |t: &str| find_condition(&status.conditions, t);
    if let Some(c) = condition("Fetched").filter(|c| c.status != "True") {
        return (false, format!("{shown}: the fetch failed: {}", c.message));
    }
    let head = status.head.clone().unwrap_or_default();
    let short = |s: &str| s.chars().take(7).collect::<String>();
    let found = if head.sha.is_empty() {
        String::new()
    } else {
        format!(" {} {:?}", short(&head.sha), head.subject)
    };
    match condition("Rendered") {
        Some(c) if c.status != "True" => (false, format!("{shown}: {}", c.message)),
        Some(c) if c.reason == "Paused" => {
            (true, format!("{shown}: fetched{found}; {}", c.message))
        }
        _ => {
            let fetched = condition("Fetched").map_or(String::new(), |c| c.message.clone());
            let at = status
                .last_fetch_time
                .as_ref()
                .map_or(String::new(), |t| format!(" at {}", rfc3339(t)));
            let delivered = if status.commit.is_empty() {
                "nothing delivered yet".to_owned()
            } else {
                format!("delivering {}", short(&status.commit))
            };
            (
                true,
                format!("{shown}: fetched{at} ({fetched}){found}; {delivered}"),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flotilla_api::v1::{Condition, GitCommit, GitRepoStatus};

    fn repo(conditions: &[(&str, &str, &str, &str)], commit: &str) -> GitRepo {
        GitRepo {
            status: Some(GitRepoStatus {
                commit: commit.into(),
                head: Some(GitCommit {
                    sha: "0123456789abcdef0123456789abcdef01234567".into(),
                    subject: "web: 2".into(),
                    ..Default::default()
                }),
                conditions: conditions
                    .iter()
                    .map(|(t, s, r, m)| Condition {
                        r#type: t.to_string(),
                        status: s.to_string(),
                        reason: r.to_string(),
                        message: m.to_string(),
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn a_sync_s_outcome_says_what_was_fetched_and_delivered_or_why_not() {
        let (ok, line) = outcome(
            "gitrepo default/shop",
            &repo(
                &[
                    ("Fetched", "True", "Fetched", "commit 0123456"),
                    ("Rendered", "True", "Rendered", "2 bundles at 0123456"),
                ],
                "0123456789abcdef0123456789abcdef01234567",
            ),
        );
        assert!(ok);
        assert!(
            line.contains("0123456 \"web: 2\"; delivering 0123456"),
            "{line}"
        );

        let (ok, line) = outcome(
            "gitrepo default/shop",
            &repo(
                &[(
                    "Fetched",
                    "False",
                    "FetchFailed",
                    "https://h/x.git: authentication failed",
                )],
                "",
            ),
        );
        assert!(!ok);
        assert_eq!(
            line,
            "gitrepo default/shop: the fetch failed: https://h/x.git: authentication failed"
        );

        let (ok, line) = outcome(
            "gitrepo default/shop",
            &repo(
                &[
                    ("Fetched", "True", "Fetched", "commit 0123456"),
                    (
                        "Rendered",
                        "False",
                        "RenderFailed",
                        "commit 0123456: a.yaml: bad",
                    ),
                ],
                "",
            ),
        );
        assert!(!ok);
        assert_eq!(line, "gitrepo default/shop: commit 0123456: a.yaml: bad");
    }
}
