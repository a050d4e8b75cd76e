//! Running a command to completion the way an operator does, and reading what a process left:
//! its exit, its output, its first error, its memory.

use std::time::Duration;

/// What one run of the CLI (or of a binary) did.
#[derive(Debug, Clone)]
pub struct Output {
    /// Exit code (`None`: killed or timed out).
    pub code: Option<i32>,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

impl Output {
    /// Exit code 0.
    pub fn ok(&self) -> bool {
        self.code == Some(0)
    }

    /// A run that did not finish: no exit code, `why` on standard error.
    fn unfinished(why: String) -> Self {
        Self {
            code: None,
            stdout: String::new(),
            stderr: why,
        }
    }
}

/// Runs `cmd` to completion within `timeout`, feeding `stdin`.
pub async fn run(
    mut cmd: tokio::process::Command,
    stdin: Option<&str>,
    timeout: Duration,
) -> Output {
    use tokio::io::AsyncWriteExt;
    cmd.stdin(if stdin.is_some() {
        std::process::Stdio::piped()
    } else {
        std::process::Stdio::null()
    })
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::piped())
    .kill_on_drop(true);
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => return Output::unfinished(format!("spawning {cmd:?}: {e}")),
    };
    if let (Some(input), Some(mut pipe)) = (stdin, child.stdin.take()) {
        let _ = pipe.write_all(input.as_bytes()).await;
    }
    match tokio::time::timeout(timeout, child.wait_with_output()).await {
        Ok(Ok(out)) => Output {
            code: out.status.code(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        },
        Ok(Err(e)) => Output::unfinished(format!("waiting for {cmd:?}: {e}")),
        Err(_) => Output::unfinished(format!("still running after {timeout:?} (killed)")),
    }
}

/// The first line of `log` that reports an error (clap's usage errors, `flotilla-hub: …`), or
/// its last line.
pub(super) fn first_error(log: &str) -> String {
    log.lines()
        .find(|l| l.contains("error") || l.contains("ERROR") || l.starts_with("flotilla-hub:"))
        .or_else(|| log.lines().last())
        .unwrap_or_default()
        .trim()
        .to_string()
}

/// The last `n` lines of `text`.
pub(super) fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// Memory of process `pid` from `/proc/<pid>/status`, in KiB: `(VmRSS, VmHWM)` — resident now
/// and its peak so far.
pub fn memory_kib(pid: u32) -> Option<(u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
    };
    Some((field("VmRSS:")?, field("VmHWM:")?))
}
