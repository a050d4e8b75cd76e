//! `flotilla-hub`'s subcommands, one file each (mini-redis `cmd/`): each holds its flags (a
//! `clap::Args` struct whose doc comment is the help text) and its `run`. `main.rs` keeps the
//! hub's own flags and the serve path.

mod backup;
mod doctor;
mod init;
mod manifests;
mod restore;
mod rotate;

use flotilla_bus::connect::NatsArgs;
use std::process::ExitCode;

/// What `flotilla-hub` does instead of running the hub.
#[derive(clap::Subcommand, Debug)]
pub enum Command {
    Init(init::Init),
    Rotate(rotate::Rotate),
    Doctor(doctor::Doctor),
    Backup(backup::Backup),
    Restore(restore::Restore),
    Manifests(manifests::Manifests),
}

impl Command {
    /// Runs the subcommand; the NATS flags are the top-level ones (given before it). A
    /// top-level `--secure-dir` (the hub's own flag) serves `doctor`, `backup` and `restore`
    /// when they are not given theirs: they connect as the hub either way, rather than
    /// without credentials and an "authorization violation".
    pub fn run(
        self,
        nats: &NatsArgs,
        secure_dir: Option<&std::path::Path>,
        runtime: &tokio::runtime::Runtime,
    ) -> ExitCode {
        let or_top = |own: Option<std::path::PathBuf>| own.or(secure_dir.map(Into::into));
        match self {
            Command::Init(c) => c.run(),
            Command::Rotate(c) => runtime.block_on(c.run(nats)),
            Command::Doctor(mut c) => {
                c.secure_dir = or_top(c.secure_dir);
                runtime.block_on(c.run(nats))
            }
            Command::Backup(mut c) => {
                c.secure_dir = or_top(c.secure_dir);
                runtime.block_on(c.run(nats))
            }
            Command::Restore(mut c) => {
                c.secure_dir = or_top(c.secure_dir);
                runtime.block_on(c.run(nats))
            }
            Command::Manifests(c) => c.run(),
        }
    }
}

/// A connection as the hub for a one-off command (`doctor`, `backup`, `restore`): with the
/// secure directory's hub.creds and TLS when one is given; fails when the server does not
/// answer within 10 s.
async fn hub_client(
    nats: &NatsArgs,
    dir: Option<&std::path::Path>,
    name: &str,
) -> anyhow::Result<async_nats::Client> {
    let mut config = nats.config(name);
    if let Some(dir) = dir {
        let secure = flotilla_auth::SecureDir::load(dir)?;
        config.credentials_file = Some(secure.hub_creds.clone());
        if let (None, Some(tls)) = (&config.tls_ca_file, &secure.tls) {
            config.tls_ca_file = Some(tls.ca.clone());
        }
        if secure.tls.as_ref().is_some_and(|t| t.handshake_first) {
            config.tls_first = true;
        }
        config.require_tls =
            flotilla_bus::connect::tls_required(config.tls_ca_file.is_some(), &config.url);
    }
    let client = flotilla_bus::connect::connect(&config, None).await?;
    tokio::time::timeout(std::time::Duration::from_secs(10), client.flush())
        .await
        .map_err(|_| anyhow::anyhow!("NATS at {} did not answer within 10 s", config.url))??;
    Ok(client)
}
