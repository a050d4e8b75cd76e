//! Exec credential plugins, as kubectl runs them (`client.authentication.k8s.io/v1`
//! `ExecCredential`): the CLI runs a command — `kubectl oidc-login get-token …`, a company's
//! own — that prints a credential whose `status.token` is the bearer sent to the hub (an ID
//! token of the hub's OIDC issuer). The plugin gets `KUBERNETES_EXEC_INFO` (the request, with
//! `spec.interactive`), the terminal's stdin only when interactive, and the terminal's stderr
//! (its prompts and errors reach the user); its stdout is read, at most 1 MiB, within 5 minutes
//! (a plugin may wait for a browser sign-in). Errors use client-go's words.

use serde_json::Value;
use std::io::IsTerminal;
use std::process::Stdio;
use std::time::Duration;
use tokio::io::AsyncReadExt;

/// The apiVersion of the request and of the answer.
pub const API_VERSION: &str = "client.authentication.k8s.io/v1";
/// Longest a plugin may run.
pub const TIMEOUT: Duration = Duration::from_secs(300);
/// Largest answer read.
pub const MAX_OUTPUT: u64 = 1024 * 1024;

/// Whether the plugin may talk to the user (kubeconfig's `interactiveMode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Interactive {
    /// Never: stdin is closed.
    Never,
    /// When stdin is a terminal.
    #[default]
    IfAvailable,
    /// Always: refused when stdin is not a terminal.
    Always,
}

/// A configured plugin (`--exec-command`, `--exec-arg`, `--exec-env`, `--exec-interactive`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecPlugin {
    /// The command.
    pub command: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Extra environment, `NAME=VALUE`.
    pub env: Vec<(String, String)>,
    /// Whether it may use the terminal.
    pub interactive: Interactive,
}

/// Why the plugin gave no token.
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    /// The command is not there.
    #[error("exec: executable {0} not found")]
    NotFound(String),
    /// It could not be started.
    #[error("exec: executable {command} could not be started: {source}")]
    Spawn {
        /// The command.
        command: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// It failed (its stderr has been shown).
    #[error("exec: executable {command} failed with exit code {code}")]
    Exit {
        /// The command.
        command: String,
        /// Its exit code (-1: killed by a signal).
        code: i32,
    },
    /// It ran past [`TIMEOUT`].
    #[error("exec: executable {command} did not finish within {secs}s")]
    Timeout {
        /// The command.
        command: String,
        /// [`TIMEOUT`] in seconds.
        secs: u64,
    },
    /// Interactive mode `Always` without a terminal.
    #[error("exec: executable {0} needs an interactive terminal (--exec-interactive always)")]
    NoTerminal(String),
    /// Its answer is not a usable ExecCredential.
    #[error("exec: executable {command} returned {why}")]
    Output {
        /// The command.
        command: String,
        /// What is wrong.
        why: String,
    },
}

/// `NAME=VALUE` of `--exec-env`.
pub fn parse_env(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((name, value)) if !name.is_empty() => Ok((name.into(), value.into())),
        _ => Err(format!("{s:?} is not NAME=VALUE")),
    }
}

impl ExecPlugin {
    /// Runs the plugin; the token it returns.
    pub async fn token(&self) -> Result<String, ExecError> {
        let interactive = match self.interactive {
            Interactive::Never => false,
            Interactive::IfAvailable => std::io::stdin().is_terminal(),
            Interactive::Always if std::io::stdin().is_terminal() => true,
            Interactive::Always => return Err(ExecError::NoTerminal(self.command.clone())),
        };
        let info = serde_json::json!({
            "apiVersion": API_VERSION,
            "kind": "ExecCredential",
            "spec": { "interactive": interactive },
        });
        let mut child = tokio::process::Command::new(&self.command)
            .args(&self.args)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .env("KUBERNETES_EXEC_INFO", info.to_string())
            .stdin(if interactive {
                Stdio::inherit()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .map_err(|source| match source.kind() {
                std::io::ErrorKind::NotFound => ExecError::NotFound(self.command.clone()),
                _ => ExecError::Spawn {
                    command: self.command.clone(),
                    source,
                },
            })?;
        let mut stdout = child.stdout.take().expect("stdout is piped");
        let run = async {
            let mut out = Vec::new();
            let read = (&mut stdout)
                .take(MAX_OUTPUT + 1)
                .read_to_end(&mut out)
                .await;
            // The pipe closed before waiting: a plugin writing past the cap gets EPIPE and
            // ends (review r3 §7: it blocked on a full pipe until the timeout).
            drop(stdout);
            if out.len() as u64 > MAX_OUTPUT {
                let _ = child.start_kill();
            }
            let status = child.wait().await;
            (read.map(|_| out), status)
        };
        let (out, status) =
            tokio::time::timeout(TIMEOUT, run)
                .await
                .map_err(|_| ExecError::Timeout {
                    command: self.command.clone(),
                    secs: TIMEOUT.as_secs(),
                })?;
        let status = status.map_err(|source| ExecError::Spawn {
            command: self.command.clone(),
            source,
        })?;
        let out = out.map_err(|e| self.output(format!("output that could not be read: {e}")))?;
        if out.len() as u64 > MAX_OUTPUT {
            return Err(self.output(format!("more than {MAX_OUTPUT} bytes")));
        }
        if !status.success() {
            return Err(ExecError::Exit {
                command: self.command.clone(),
                code: status.code().unwrap_or(-1),
            });
        }
        self.credential(&out, now())
    }

    fn output(&self, why: String) -> ExecError {
        ExecError::Output {
            command: self.command.clone(),
            why,
        }
    }

    /// The token of a plugin's answer, checked at `now` (seconds since the Unix epoch).
    pub fn credential(&self, out: &[u8], now: i64) -> Result<String, ExecError> {
        let answer: Value = serde_json::from_slice(out)
            .map_err(|e| self.output(format!("output that is not JSON: {e}")))?;
        let version = answer["apiVersion"].as_str().unwrap_or("");
        if version != API_VERSION {
            return Err(self.output(format!(
                "apiVersion {version:?}; exec plugin is configured to use API version \
                 {API_VERSION}"
            )));
        }
        if answer["kind"].as_str() != Some("ExecCredential") {
            return Err(self.output("a document whose kind is not ExecCredential".into()));
        }
        let status = &answer["status"];
        if status.get("clientCertificateData").is_some() {
            return Err(
                self.output("a client certificate; flotilla needs a token (status.token)".into())
            );
        }
        let token = match status["token"].as_str() {
            Some(t) if !t.is_empty() => t,
            _ => return Err(self.output("no status.token".into())),
        };
        if let Some(at) = status["expirationTimestamp"].as_str() {
            let expires =
                time::OffsetDateTime::parse(at, &time::format_description::well_known::Rfc3339)
                    .map_err(|_| {
                        self.output(format!("status.expirationTimestamp {at:?}, not RFC 3339"))
                    })?;
            if expires.unix_timestamp() <= now {
                return Err(self.output(format!("a credential that expired at {at}")));
            }
        }
        Ok(token.to_string())
    }
}

fn now() -> i64 {
    time::OffsetDateTime::now_utc().unix_timestamp()
}

#[cfg(test)]
mod tests;
