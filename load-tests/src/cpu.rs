//! CPU accounting of a run's processes (pure): what a `/proc/<pid>/stat` line says of a
//! process's CPU, who each process is in the topology (hub, the hub's JetStream server, a leaf
//! server, a simulator, this driver), and the arithmetic from clock ticks to the summary's
//! `cpu_*` figures of a measured phase. Reading `/proc` lives in [`crate::cpu_ledger`].
//!
//! A phase's CPU per role is the change, between its start and its end, of the role's ticks
//! summed over every process the role ever had: a process started during the phase counts
//! from zero, one that ended before it cancels out, one that ended during it counts up to its
//! last reading (its final one when it was read as a zombie, before it was reaped).

use serde::Serialize;

#[cfg(test)]
mod tests;

/// Who a process is in the topology.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// A `flotilla-hub` process (every hub of an `ha` run, every restart).
    Hub,
    /// The hub's JetStream nats-server.
    JetStream,
    /// A leaf nats-server: an edge site's server, not the control plane's.
    Leaf,
    /// A `flotilla-sim` process.
    Simulator,
    /// This `flotilla-load` process: watches, applies and any in-process simulated agents.
    Driver,
}

impl Role {
    /// Its slot in [`Totals`].
    fn index(self) -> usize {
        self as usize
    }
}

/// What `/proc/<pid>/stat` says of a process's CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    /// User plus system time, in clock ticks (`utime` + `stime`, whole thread group).
    pub ticks: u64,
    /// When the process started, in ticks since boot: tells a reused pid from the process.
    pub start_time: u64,
    /// The process has exited and not been reaped yet: `ticks` is final.
    pub zombie: bool,
}

/// Parses a `/proc/<pid>/stat` line (`None` when it is not one). The command name may hold
/// spaces and parentheses, so fields are counted after its last `)`.
pub fn parse_stat(line: &str) -> Option<Stat> {
    let after = line.rsplit_once(')')?.1;
    let fields: Vec<&str> = after.split_whitespace().collect();
    // After the name: state is field 3 of proc(5), utime 14, stime 15, starttime 22.
    let field = |n: usize| fields.get(n - 3).copied();
    let number = |n: usize| field(n)?.parse::<u64>().ok();
    Some(Stat {
        ticks: number(14)? + number(15)?,
        start_time: number(22)?,
        zombie: field(3)? == "Z",
    })
}

/// One process followed by a run, and its latest CPU reading.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tracked {
    /// Who it is.
    pub role: Role,
    /// Its process id.
    pub pid: u32,
    /// Its start time, to tell it from a later process given the same pid.
    pub start_time: u64,
    /// CPU ticks at the latest reading.
    pub ticks: u64,
    /// No further reading will come: it exited (its last reading stands).
    pub ended: bool,
}

impl Tracked {
    /// A process first read as `stat`.
    pub fn new(role: Role, pid: u32, stat: Stat) -> Self {
        Self {
            role,
            pid,
            start_time: stat.start_time,
            ticks: stat.ticks,
            ended: stat.zombie,
        }
    }

    /// Takes a new reading (`None`: the pid is gone). A zombie's reading is its last; a reading
    /// of another process under the same pid, or none, ends the process at its last reading.
    pub fn observe(&mut self, stat: Option<Stat>) {
        if self.ended {
            return;
        }
        match stat {
            Some(s) if s.start_time == self.start_time => {
                self.ticks = self.ticks.max(s.ticks);
                self.ended = s.zombie;
            }
            _ => self.ended = true,
        }
    }
}

/// CPU ticks per role, summed over every process a run followed (ended ones included).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    ticks: [u64; 5],
    /// Whether the run followed any process of the role (else its figure is unknown).
    known: [bool; 5],
}

impl Totals {
    /// The totals of `processes`.
    pub fn of<'a>(processes: impl IntoIterator<Item = &'a Tracked>) -> Self {
        let mut t = Self::default();
        for p in processes {
            t.ticks[p.role.index()] += p.ticks;
            t.known[p.role.index()] = true;
        }
        t
    }
}

/// The CPU of a measured phase, per role, as the summary reports it (seconds of CPU: user plus
/// system; `null` for a role the run does not know, e.g. the JetStream server of an attached
/// hub, or leaf servers when there are none).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct CpuUsage {
    /// Every hub process, restarted and extra hubs included.
    pub cpu_hub_s: Option<f64>,
    /// The hub's JetStream nats-server.
    pub cpu_jetstream_s: Option<f64>,
    /// The leaf servers (edge sites), apart from the control plane.
    pub cpu_leaves_s: Option<f64>,
    /// Hub plus its JetStream server.
    pub cpu_control_plane_s: Option<f64>,
    /// The control plane's CPU of the phase in milliseconds over the clusters converged in it.
    pub cpu_control_plane_ms_per_cluster: Option<f64>,
    /// The `flotilla-sim` processes (`null` for a fleet in this process: see `cpu_driver_s`).
    pub cpu_simulators_s: Option<f64>,
    /// This process: the scenario's watches and API calls, and an in-process fleet.
    pub cpu_driver_s: Option<f64>,
}

/// The CPU of a phase from the totals at its start and end; `clusters`: the clusters that
/// converged in it, over which the control plane's cost is divided.
pub fn usage(begin: &Totals, end: &Totals, ticks_per_second: u64, clusters: usize) -> CpuUsage {
    let ticks = |role: Role| {
        let i = role.index();
        end.known[i].then(|| end.ticks[i].saturating_sub(begin.ticks[i]))
    };
    let per_second = ticks_per_second.max(1) as f64;
    let seconds = |ticks: Option<u64>| ticks.map(|t| round(t as f64 / per_second, 100.0));
    let control_plane = ticks(Role::Hub)
        .zip(ticks(Role::JetStream))
        .map(|(h, j)| h + j);
    CpuUsage {
        cpu_hub_s: seconds(ticks(Role::Hub)),
        cpu_jetstream_s: seconds(ticks(Role::JetStream)),
        cpu_leaves_s: seconds(ticks(Role::Leaf)),
        cpu_control_plane_s: seconds(control_plane),
        cpu_control_plane_ms_per_cluster: control_plane
            .and_then(|t| ms_per_cluster(t as f64 / per_second, clusters)),
        cpu_simulators_s: seconds(ticks(Role::Simulator)),
        cpu_driver_s: seconds(ticks(Role::Driver)),
    }
}

/// CPU seconds in milliseconds per cluster (to the microsecond); `None` over no cluster.
pub fn ms_per_cluster(seconds: f64, clusters: usize) -> Option<f64> {
    (clusters > 0).then(|| round(seconds * 1000.0 / clusters as f64, 1000.0))
}

fn round(v: f64, per: f64) -> f64 {
    (v * per).round() / per
}
