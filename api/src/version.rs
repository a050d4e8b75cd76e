//! Flotilla's version and which agent versions a hub accepts (pure).
//!
//! The policy (docs/operations.md, "Versions"): a hub X.Y accepts agents of its own minor line
//! and of the one before (X.(Y−1).* and X.Y.*, any patch), never a newer minor — the
//! Kubernetes kubelet rule narrowed to one minor. At X.0 only X.0.*: no implicit
//! compatibility across majors. An operator widens or narrows it with `--agent-versions`
//! (minor lines, inclusive: `0.1-0.3`, or one line `0.2`). Pre-release and build suffixes
//! (`0.2.0-dev`) do not change the line a version is on, so a `-dev` hub accepts its own
//! `-dev` agents.
//!
//! A version is what an agent says it is: the check narrows what a hub accepts, it never
//! authenticates anyone.

use std::fmt;

/// This build's version (the workspace's).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// A version `major.minor.patch`, with an optional `-pre` and `+build` suffix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Version {
    /// Major.
    pub major: u64,
    /// Minor.
    pub minor: u64,
    /// Patch.
    pub patch: u64,
    /// The pre-release and build suffix as written (`-dev`, `+abc`), or empty.
    pub suffix: String,
}

/// Why a version or a range does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VersionError {
    /// Not `major.minor.patch`.
    #[error("{0:?} is not a version (major.minor.patch, such as 0.2.1)")]
    Version(String),
    /// Not `major.minor` or `major.minor-major.minor`.
    #[error("{0:?} is not a range of minor versions (such as 0.1-0.3, or 0.2 for one minor line)")]
    Range(String),
    /// The range's ends are the wrong way round.
    #[error("{0:?}: the oldest minor line comes first")]
    Backwards(String),
}

fn number(part: &str) -> Option<u64> {
    (!part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()))
        .then(|| part.parse().ok())
        .flatten()
}

impl Version {
    /// Parses `major.minor.patch[-pre][+build]` (a leading `v` is allowed).
    pub fn parse(text: &str) -> Result<Self, VersionError> {
        let bad = || VersionError::Version(text.to_string());
        let trimmed = text.trim().trim_start_matches('v');
        let end = trimmed.find(['-', '+']).unwrap_or(trimmed.len());
        let (core, suffix) = trimmed.split_at(end);
        let mut parts = core.split('.');
        let mut next = || parts.next().and_then(number).ok_or_else(bad);
        let (major, minor, patch) = (next()?, next()?, next()?);
        if parts.next().is_some() || suffix == "-" || suffix == "+" {
            return Err(bad());
        }
        Ok(Self {
            major,
            minor,
            patch,
            suffix: suffix.to_string(),
        })
    }

    /// This build's version.
    pub fn current() -> Self {
        Self::parse(VERSION).expect("the workspace version parses")
    }

    /// The minor line (`major`, `minor`).
    pub fn line(&self) -> (u64, u64) {
        (self.major, self.minor)
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}.{}.{}{}",
            self.major, self.minor, self.patch, self.suffix
        )
    }
}

/// The minor lines of agents a hub accepts, inclusive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Accepts {
    /// The oldest line.
    pub oldest: (u64, u64),
    /// The newest line.
    pub newest: (u64, u64),
}

/// Why an agent's version is refused: the text the agent is answered with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// Older than the oldest accepted line.
    #[error(
        "agent version {agent} is older than this hub accepts (hub {hub} accepts agents \
         {accepts}): upgrade the agent (docs/operations.md#versions)"
    )]
    TooOld {
        /// The agent's.
        agent: String,
        /// The hub's.
        hub: String,
        /// What the hub accepts.
        accepts: Accepts,
    },
    /// Newer than the newest accepted line.
    #[error(
        "agent version {agent} is newer than this hub accepts (hub {hub} accepts agents \
         {accepts}): upgrade the hubs first (docs/operations.md#versions)"
    )]
    TooNew {
        /// The agent's.
        agent: String,
        /// The hub's.
        hub: String,
        /// What the hub accepts.
        accepts: Accepts,
    },
    /// Not a version.
    #[error("agent {0}")]
    Unreadable(VersionError),
    /// No version at all: every Flotilla agent states one (`RegistrationRequest.agent_version`,
    /// field 7, in every release's recorded wire).
    #[error(
        "the registration states no agent version: every Flotilla agent sends one; a client \
         built by hand must set agent_version (docs/operations.md#versions)"
    )]
    Unstated,
}

impl Accepts {
    /// The default for a hub of version `hub`: its own minor line and the one before.
    pub fn default_for(hub: &Version) -> Self {
        Self {
            oldest: (hub.major, hub.minor.saturating_sub(1)),
            newest: hub.line(),
        }
    }

    /// Parses `--agent-versions`: `major.minor-major.minor`, or `major.minor` for one line.
    pub fn parse(text: &str) -> Result<Self, VersionError> {
        let line = |part: &str| {
            let (major, minor) = part.trim().split_once('.')?;
            Some((number(major)?, number(minor)?))
        };
        let bad = || VersionError::Range(text.to_string());
        let (oldest, newest) = match text.split_once('-') {
            Some((a, b)) => (line(a).ok_or_else(bad)?, line(b).ok_or_else(bad)?),
            None => {
                let one = line(text).ok_or_else(bad)?;
                (one, one)
            }
        };
        if oldest > newest {
            return Err(VersionError::Backwards(text.to_string()));
        }
        Ok(Self { oldest, newest })
    }

    /// Whether a hub of version `hub` accepts an agent that says it is `agent`. An empty
    /// version is refused: every Flotilla agent sends one (field 7 since the first release, as
    /// the recorded wire of 0.1 shows), so only a broken or hand-made client leaves it out —
    /// and it would otherwise skip the check unseen.
    pub fn judge(&self, hub: &Version, agent: &str) -> Result<(), Refusal> {
        if agent.is_empty() {
            return Err(Refusal::Unstated);
        }
        let version = Version::parse(agent).map_err(Refusal::Unreadable)?;
        let (hub, agent, accepts) = (hub.to_string(), version.to_string(), *self);
        if version.line() < self.oldest {
            Err(Refusal::TooOld {
                agent,
                hub,
                accepts,
            })
        } else if version.line() > self.newest {
            Err(Refusal::TooNew {
                agent,
                hub,
                accepts,
            })
        } else {
            Ok(())
        }
    }
}

impl fmt::Display for Accepts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (a, b) = (self.oldest, self.newest);
        if a == b {
            write!(f, "{}.{}.x", a.0, a.1)
        } else {
            write!(f, "{}.{}.x to {}.{}.x", a.0, a.1, b.0, b.1)
        }
    }
}

/// Whether two versions are more than one minor line apart (or on different majors): what
/// `flotilla version` warns about between the CLI and the hub.
pub fn far_apart(a: &Version, b: &Version) -> bool {
    a.major != b.major || a.minor.abs_diff(b.minor) > 1
}

#[cfg(test)]
mod tests;
