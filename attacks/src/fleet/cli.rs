//! The `flotilla` CLI run the way an operator runs it, against the fleet's hub or another hub
//! of its control plane, and what it prints read back: clusters and works as JSON, tables,
//! join credentials.

use super::objects::{accepted, applied, available, generation, work_yaml};
use super::process::{Output, run};
use super::{Fleet, SOON};
use flotilla_testkit::binary;
use serde_json::Value;
use std::path::PathBuf;

impl Fleet {
    /// Makes every CLI run of the fleet pass `--token TOKEN` (a hub started with
    /// `--api-token-file`; set it before [`Fleet::hub`], which waits for `get clusters`).
    pub fn use_token(&mut self, token: &str) {
        self.cli_token = Some(token.to_string());
    }

    /// Runs `flotilla --hub <hub> ARGS`.
    pub async fn cli(&self, args: &[&str]) -> Output {
        self.cli_with_stdin(args, None).await
    }

    /// Runs `flotilla --hub <hub> ARGS` with `stdin`.
    pub async fn cli_with_stdin(&self, args: &[&str], stdin: Option<&str>) -> Output {
        let mut cmd = tokio::process::Command::new(binary("flotilla"));
        cmd.args(["--hub", &self.hub_url()]);
        if let Some(token) = &self.cli_token {
            cmd.args(["--token", token]);
        }
        cmd.args(args);
        run(cmd, stdin, SOON).await
    }

    /// Runs `flotilla --hub <api> ARGS` against another hub ([`Fleet::other_hub`]).
    pub async fn cli_at(&self, api: &str, args: &[&str]) -> Output {
        let mut cmd = tokio::process::Command::new(binary("flotilla"));
        cmd.args(["--hub", api]);
        if let Some(token) = &self.cli_token {
            cmd.args(["--token", token]);
        }
        cmd.args(args);
        run(cmd, None, SOON).await
    }

    /// Runs the CLI, which must succeed; its stdout.
    pub async fn cli_ok(&self, args: &[&str]) -> String {
        let out = self.cli(args).await;
        if !out.ok() {
            self.fail(&format!(
                "flotilla {} failed (exit {:?}): {}{}",
                args.join(" "),
                out.code,
                out.stderr,
                out.stdout
            ));
        }
        out.stdout
    }

    /// `flotilla apply -f -` with `yaml`, which must succeed.
    pub async fn apply(&self, yaml: &str) {
        let out = self.cli_with_stdin(&["apply", "-f", "-"], Some(yaml)).await;
        if !out.ok() {
            self.fail(&format!(
                "flotilla apply failed: {}{}",
                out.stderr, out.stdout
            ));
        }
    }

    /// `flotilla join-token NAME ARGS`: the per-cluster join credential it prints, written to a
    /// file of the fleet.
    pub async fn join_token(&self, name: &str, args: &[&str]) -> PathBuf {
        let mut all = vec!["join-token", name];
        all.extend_from_slice(args);
        let out = self.cli_ok(&all).await;
        let Some(creds) = creds_block(&out) else {
            self.fail(&format!(
                "`flotilla join-token` printed no credentials file:\n{out}"
            ));
        };
        let file = self.dir.path().join(format!("join-{name}.creds"));
        if let Err(e) = std::fs::write(&file, creds) {
            self.fail(&format!("writing {}: {e}", file.display()));
        }
        file
    }

    /// `get clusters -o json`, or `None` while the hub does not answer.
    pub async fn clusters(&self) -> Option<Vec<Value>> {
        let out = self.cli(&["get", "clusters", "-o", "json"]).await;
        if !out.ok() {
            return None;
        }
        let v: Value = serde_json::from_str(&out.stdout).ok()?;
        v["items"].as_array().cloned()
    }

    /// Cluster `name` as `get clusters -o json` shows it.
    pub async fn cluster(&self, name: &str) -> Option<Value> {
        self.clusters()
            .await?
            .into_iter()
            .find(|c| c["metadata"]["name"] == name)
    }

    /// `get works --cluster CLUSTER -o json`.
    pub async fn works(&self, cluster: &str) -> Option<Vec<Value>> {
        let out = self
            .cli(&["get", "works", "--cluster", cluster, "-o", "json"])
            .await;
        if !out.ok() {
            return None;
        }
        let v: Value = serde_json::from_str(&out.stdout).ok()?;
        v["items"].as_array().cloned()
    }

    /// Work `name` of `cluster`.
    pub async fn work(&self, cluster: &str, name: &str) -> Option<Value> {
        self.works(cluster)
            .await?
            .into_iter()
            .find(|w| w["metadata"]["name"] == name)
    }

    /// Waits until cluster `name` is accepted and Available.
    pub async fn wait_available(&self, name: &str) -> Value {
        wait_for!(
            self,
            format!("{name} accepted and Available"),
            SOON,
            self.cluster(name)
                .await
                .filter(|c| accepted(c) && available(c))
        )
    }

    /// Applies work `name` on `cluster` (a ConfigMap holding `value`) and waits until it is
    /// Applied at its new generation; returns the work.
    pub async fn apply_work(&self, cluster: &str, name: &str, value: &str) -> Value {
        let before = self.work(cluster, name).await.map_or(0, |w| generation(&w));
        self.apply(&work_yaml(cluster, name, value)).await;
        self.wait_work_applied(cluster, name, before + 1).await
    }

    /// Waits until work `name` of `cluster` is at generation `at_least` or later and Applied
    /// at that generation.
    pub async fn wait_work_applied(&self, cluster: &str, name: &str, at_least: i64) -> Value {
        wait_for!(
            self,
            format!("work {cluster}/{name} Applied at generation {at_least} or later"),
            SOON,
            self.work(cluster, name)
                .await
                .filter(|w| generation(w) >= at_least && applied(w))
        )
    }
}

/// The NATS credentials file (user JWT and seed blocks) inside `text`.
pub fn creds_block(text: &str) -> Option<String> {
    let start = text.find("-----BEGIN NATS USER JWT-----")?;
    let seed_end = "------END USER NKEY SEED------";
    let end = text[start..].find(seed_end)? + start + seed_end.len();
    Some(format!("{}\n", &text[start..end]))
}

/// The cell of column `column` in the row whose first cell is `first`, in a table laid out in
/// left-aligned columns (kubectl's layout: headers separated by at least two spaces).
pub fn table_cell(table: &str, first: &str, column: &str) -> Option<String> {
    let mut lines = table.lines();
    let header = lines.next()?;
    // Column starts: offsets where a header name begins after two or more spaces.
    let mut starts = vec![0usize];
    let bytes = header.as_bytes();
    for i in 2..bytes.len() {
        if bytes[i] != b' ' && bytes[i - 1] == b' ' && bytes[i - 2] == b' ' {
            starts.push(i);
        }
    }
    let index = starts
        .iter()
        .position(|&s| header[s..].split("  ").next().map(str::trim) == Some(column))?;
    let row = lines.find(|l| l.split_whitespace().next() == Some(first))?;
    let start = starts[index];
    let end = starts
        .get(index + 1)
        .copied()
        .unwrap_or(row.len())
        .min(row.len());
    (start <= end).then(|| row[start..end].trim().to_string())
}
