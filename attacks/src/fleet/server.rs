//! The nats-server binaries the suite runs against: Debian's 2.9 and the current release.

use std::path::PathBuf;

/// A nats-server binary the suite runs against.
#[derive(Debug, Clone)]
pub struct Server {
    /// `debian` or `current` ([`flotilla_testkit::nats_server_binaries`]).
    pub label: &'static str,
    /// The binary.
    pub binary: PathBuf,
    /// What it says its version is.
    pub version: String,
}

impl Server {
    /// The server labelled `label` in [`flotilla_testkit::nats_server_binaries`] (panics with
    /// the install hint when it is missing: an attack never skips a server).
    pub fn get(label: &str) -> Self {
        let (label, binary) = match label {
            "debian" => ("debian", flotilla_testkit::nats_server_debian_binary()),
            "current" => ("current", flotilla_testkit::nats_server_current_binary()),
            other => panic!("no nats-server labelled {other:?}"),
        };
        let version = flotilla_testkit::nats_server_version(&binary);
        Self {
            label,
            binary,
            version,
        }
    }

    /// Every server of [`flotilla_testkit::nats_server_binaries`].
    pub fn all() -> Vec<Self> {
        flotilla_testkit::nats_server_binaries()
            .into_iter()
            .map(|(label, _)| Self::get(label))
            .collect()
    }
}
