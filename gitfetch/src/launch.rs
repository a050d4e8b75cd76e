//! Running one fetch in a `flotilla-git-fetch` child process: its bounds on the command line,
//! a cleared environment, the request on stdin, the answer read from stdout up to a bound, its
//! stderr kept (bounded) for the log, and a SIGKILL at the wall-clock deadline. The answer is
//! checked again ([`crate::check`]) before it is returned.

use std::{
    os::unix::process::ExitStatusExt,
    path::{Path, PathBuf},
    process::{ExitStatus, Stdio},
    time::Duration,
};

use prost::Message;
use thiserror::Error;
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    process::{Child, Command},
};

use crate::{
    check,
    limits::{ANSWER_OVERHEAD_BYTES, human_bytes},
    protocol::{FetchRequest, FetchResult},
};

/// Bytes of a worker's stderr kept.
pub const MAX_LOG_BYTES: u64 = 64 * 1024;

/// How to run workers (the hub's `--gitops-*` settings).
#[derive(Debug, Clone)]
pub struct Worker {
    /// The `flotilla-git-fetch` binary.
    pub binary: PathBuf,
    /// Address space of one worker, bytes.
    pub memory_bytes: u64,
    /// CPU seconds of one worker.
    pub cpu_seconds: u64,
    /// Wall-clock time of one fetch; the worker is killed past it.
    pub timeout: Duration,
}

impl Worker {
    /// Workers of `binary` with the default bounds: 1 GiB, 120 s CPU, 120 s wall clock.
    pub fn new(binary: impl Into<PathBuf>) -> Self {
        Worker {
            binary: binary.into(),
            memory_bytes: 1024 * 1024 * 1024,
            cpu_seconds: 120,
            timeout: Duration::from_secs(120),
        }
    }
}

/// A finished fetch: the answer (which may carry an error) and the worker's stderr.
#[derive(Debug, Clone)]
pub struct Finished {
    /// The worker's answer, checked.
    pub result: FetchResult,
    /// What the worker wrote on stderr (bounded).
    pub log: String,
}

/// Why a fetch produced no answer.
#[derive(Debug, Error)]
pub enum LaunchError {
    /// The binary could not be started.
    #[error("could not start the fetch worker {binary}: {source}")]
    Spawn {
        /// The binary.
        binary: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// Talking to the worker over its pipes failed.
    #[error("the fetch worker's pipes failed: {0}")]
    Pipe(#[source] std::io::Error),
    /// The worker ran past its deadline and was killed.
    #[error("fetch took longer than {} s; the worker was killed", .0.as_secs())]
    Timeout(Duration),
    /// The worker ended without an answer (a signal, or a crash).
    #[error("the fetch worker died ({status}){hint}: {log}")]
    Died {
        /// How it ended.
        status: String,
        /// Which bound it probably hit.
        hint: String,
        /// The end of its stderr.
        log: String,
    },
    /// The worker wrote more than an answer may hold.
    #[error("the fetch worker's answer exceeded {}", human_bytes(*.0))]
    TooLarge(u64),
    /// The answer did not decode.
    #[error("the fetch worker's answer does not decode: {0}")]
    Malformed(#[source] prost::DecodeError),
    /// The answer broke a limit.
    #[error(transparent)]
    Unacceptable(#[from] check::Unacceptable),
}

impl Worker {
    /// Runs one fetch into the cache repository `cache`.
    pub async fn fetch(
        &self,
        cache: &Path,
        request: &FetchRequest,
    ) -> Result<Finished, LaunchError> {
        let limits = request.limits.unwrap_or_default().effective();
        let mut child = self.spawn(cache, &limits)?;
        let (Some(mut stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(LaunchError::Pipe(std::io::Error::other(
                "a pipe is missing",
            )));
        };
        let bound = limits.max_content_bytes + ANSWER_OVERHEAD_BYTES;
        let input = request.encode_to_vec();
        let talk = async {
            let write = async move {
                stdin.write_all(&input).await?;
                // Dropping the pipe is the end of the request (shutdown alone leaves it open).
                drop(stdin);
                Ok::<_, std::io::Error>(())
            };
            let mut out = Vec::new();
            let mut err = Vec::new();
            // Past its bound a stream is drained, not left full: a worker blocked on a full pipe
            // would only end at the deadline.
            let read_out = bounded(stdout, bound + 1, &mut out);
            let read_err = bounded(stderr, MAX_LOG_BYTES, &mut err);
            let (w, o, e) = tokio::join!(write, read_out, read_err);
            // A worker that fails before reading its request closes stdin: its answer says why.
            if let Err(w) = w
                && w.kind() != std::io::ErrorKind::BrokenPipe
            {
                return Err(w);
            }
            o?;
            e?;
            let status = child.wait().await?;
            Ok::<_, std::io::Error>((status, out, err))
        };
        let (status, out, err) = match tokio::time::timeout(self.timeout, talk).await {
            Ok(done) => done.map_err(LaunchError::Pipe)?,
            Err(_) => {
                // kill_on_drop would do it too; kill and reap now so no zombie outlives the call.
                let _ = child.start_kill();
                let _ = child.wait().await;
                return Err(LaunchError::Timeout(self.timeout));
            }
        };
        let log = String::from_utf8_lossy(&err).into_owned();
        if out.len() as u64 > bound {
            return Err(LaunchError::TooLarge(bound));
        }
        if !answered(status) || out.is_empty() {
            return Err(LaunchError::Died {
                status: describe(status),
                hint: self.hint(status),
                log: tail(&log),
            });
        }
        let result = FetchResult::decode(out.as_slice()).map_err(LaunchError::Malformed)?;
        check::result(&result, &limits)?;
        Ok(Finished { result, log })
    }

    /// Starts a worker with its bounds on the command line and nothing of the hub's
    /// environment.
    fn spawn(&self, cache: &Path, limits: &crate::protocol::Limits) -> Result<Child, LaunchError> {
        Command::new(&self.binary)
            .arg("--cache")
            .arg(cache)
            .arg("--memory-bytes")
            .arg(self.memory_bytes.to_string())
            .arg("--cpu-seconds")
            .arg(self.cpu_seconds.to_string())
            .arg("--file-bytes")
            .arg((2 * limits.max_fetch_bytes).to_string())
            .env_clear()
            .env("HOME", cache.parent().unwrap_or(cache))
            .env("MALLOC_ARENA_MAX", "2")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|source| LaunchError::Spawn {
                binary: self.binary.clone(),
                source,
            })
    }

    fn hint(&self, status: ExitStatus) -> String {
        match status.signal() {
            Some(6) => format!(" (memory limit {}?)", human_bytes(self.memory_bytes)),
            Some(9) => format!(
                " (memory limit {}, or killed)",
                human_bytes(self.memory_bytes)
            ),
            Some(24) => format!(" (CPU limit {} s)", self.cpu_seconds),
            Some(25) => " (file size limit)".to_owned(),
            _ => String::new(),
        }
    }
}

/// Reads up to `bound` bytes of `stream` into `into`, then discards the rest until it ends.
async fn bounded(
    stream: impl tokio::io::AsyncRead + Unpin,
    bound: u64,
    into: &mut Vec<u8>,
) -> std::io::Result<()> {
    let mut taken = stream.take(bound);
    taken.read_to_end(into).await?;
    tokio::io::copy(&mut taken.into_inner(), &mut tokio::io::sink()).await?;
    Ok(())
}

/// Exit codes with an answer on stdout: 0, and 2..=5 (see `ErrorKind::exit_code`).
fn answered(status: ExitStatus) -> bool {
    matches!(status.code(), Some(0 | 2..=5))
}

fn describe(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (_, Some(sig)) => format!("signal {sig}"),
        (Some(code), _) => format!("exit code {code}"),
        _ => status.to_string(),
    }
}

fn tail(log: &str) -> String {
    let lines: Vec<&str> = log.lines().rev().take(5).collect();
    lines.into_iter().rev().collect::<Vec<_>>().join(" | ")
}
