//! Resource limits the worker sets on itself before reading its request: address space, CPU
//! time, open files, no core dumps, and the largest file it may write (a pack cannot fill the
//! disk). A hostile repository that explodes a delta chain costs this process, not the hub.

use rustix::process::{Resource, Rlimit, setrlimit};

/// The limits, from the worker's flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    /// Address space in bytes (`RLIMIT_AS`).
    pub memory_bytes: u64,
    /// CPU seconds (`RLIMIT_CPU`; SIGXCPU then SIGKILL).
    pub cpu_seconds: u64,
    /// The largest file written, bytes (`RLIMIT_FSIZE`).
    pub file_bytes: u64,
    /// Open file descriptors (`RLIMIT_NOFILE`).
    pub open_files: u64,
}

impl Default for Bounds {
    fn default() -> Self {
        Bounds {
            memory_bytes: 1024 * 1024 * 1024,
            cpu_seconds: 120,
            file_bytes: 2 * crate::limits::MAX_FETCH_BYTES,
            open_files: 256,
        }
    }
}

/// Sets every bound on this process (soft and hard: the worker cannot raise them again).
pub fn apply(bounds: &Bounds) -> std::io::Result<()> {
    let set = |resource, n: u64| {
        setrlimit(
            resource,
            Rlimit {
                current: Some(n),
                maximum: Some(n),
            },
        )
    };
    set(Resource::As, bounds.memory_bytes)?;
    set(Resource::Cpu, bounds.cpu_seconds)?;
    set(Resource::Fsize, bounds.file_bytes)?;
    set(Resource::Nofile, bounds.open_files)?;
    set(Resource::Core, 0)?;
    Ok(())
}
