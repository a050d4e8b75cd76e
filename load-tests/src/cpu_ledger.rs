//! The CPU of every process a run starts, read from `/proc` (I/O): the topology registers each
//! process with its [`Role`] as it starts it (hubs, restarted and extra hubs included, the
//! JetStream server, leaf servers, started again after a cut), the fleet its simulator
//! processes, and this process itself; a sampler reads them all every second.
//!
//! A process that exits keeps its last reading ([`crate::cpu`]). Exact where the topology ends
//! the process itself: a hub it kills is read after the kill as a zombie, before it is reaped —
//! the kernel's final user + system time of the whole process. A leaf server is read just
//! before the testkit kills and reaps it (what it runs between the two is missed: microseconds).
//! A process that dies on its own is read as a zombie when the sampler or a reap check sees it
//! before the reap; otherwise up to one second (the sampler's period) of its CPU is missed.
//! `getrusage(RUSAGE_CHILDREN)` would be exact for reaped children but sums all of them (no
//! per-role split) and needs `unsafe` or a new dependency; the zombie reading is exact per process.

use crate::cpu::{Role, Stat, Totals, Tracked, parse_stat};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};
use tracing::Instrument;

/// How often every process is read.
const SAMPLE_EVERY: Duration = Duration::from_secs(1);

/// How long a killed process is waited for to become a zombie before it is read anyway.
const EXIT_WAIT: Duration = Duration::from_secs(2);

/// Every process of a run and its latest reading.
#[derive(Debug, Default)]
pub struct CpuLedger {
    processes: Mutex<Vec<Tracked>>,
}

impl CpuLedger {
    /// An empty ledger, shared with its sampler.
    pub fn new() -> Arc<Self> {
        Arc::default()
    }

    /// Follows process `pid` as `role` from now (ignored when it cannot be read: it is gone).
    pub fn track(&self, role: Role, pid: u32) {
        match read_stat(pid) {
            Some(stat) => self.lock().push(Tracked::new(role, pid, stat)),
            None => tracing::warn!(
                pid,
                ?role,
                "process not readable in /proc; its CPU is not counted"
            ),
        }
    }

    /// Reads every process still running.
    pub fn refresh(&self) {
        for p in self.lock().iter_mut().filter(|p| !p.ended) {
            p.observe(read_stat(p.pid));
        }
    }

    /// The final reading of `pid`, which was just sent SIGKILL and is not reaped yet: waits
    /// (briefly) until it is a zombie, whose times are final, then reads it.
    pub fn read_killed(&self, pid: u32) {
        let deadline = Instant::now() + EXIT_WAIT;
        let mut stat = read_stat(pid);
        while stat.is_some_and(|s| !s.zombie) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
            stat = read_stat(pid);
        }
        for p in self.lock().iter_mut().filter(|p| p.pid == pid) {
            p.observe(stat);
        }
    }

    /// Ticks per role now (every running process read first).
    pub fn totals(&self) -> Totals {
        self.refresh();
        Totals::of(self.lock().iter())
    }

    /// Starts reading every process each [`SAMPLE_EVERY`], so that one which exits on its own
    /// keeps a reading at most that old; stopped by aborting the returned task.
    pub fn spawn_sampler(self: &Arc<Self>) -> tokio::task::JoinHandle<()> {
        let ledger = self.clone();
        tokio::spawn(
            async move {
                let mut tick = tokio::time::interval(SAMPLE_EVERY);
                loop {
                    tick.tick().await;
                    ledger.refresh();
                }
            }
            .instrument(tracing::info_span!("cpu_sampler")),
        )
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Tracked>> {
        self.processes.lock().expect("cpu ledger lock")
    }
}

/// `/proc/<pid>/stat`, parsed; `None` when the process is gone.
pub fn read_stat(pid: u32) -> Option<Stat> {
    parse_stat(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// Clock ticks per second of `/proc` times (`getconf CLK_TCK`, asked once; 100, Linux's
/// USER_HZ on every common architecture, when it cannot be asked).
pub fn ticks_per_second() -> u64 {
    static TICKS: OnceLock<u64> = OnceLock::new();
    *TICKS.get_or_init(|| {
        std::process::Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .and_then(|s| s.trim().parse().ok())
            .filter(|t| *t > 0)
            .unwrap_or(100)
    })
}
