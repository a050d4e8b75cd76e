//! `flotilla-hub backup`.

use flotilla_bus::connect::NatsArgs;
use std::path::PathBuf;
use std::process::ExitCode;

/// Backs up every Flotilla stream and bucket through JetStream's own snapshot API, while
/// the hubs run: one directory per stream (the `nats` CLI's layout) and a manifest.json
/// with each file's SHA-256, written last (docs/operations.md, "Backup and restore").
#[derive(clap::Args, Debug)]
pub struct Backup {
    /// A new (or empty) directory to write the backup to (created 0700).
    #[arg(long)]
    out: PathBuf,
    /// Also the status stream (agents republish every status when they reconnect).
    #[arg(long)]
    with_status: bool,
    /// Have the server verify every message's checksum before its snapshot.
    #[arg(long)]
    check: bool,
    /// The secure directory (connect as the hub, with its TLS).
    #[arg(long, env = "FLOTILLA_SECURE_DIR")]
    pub(super) secure_dir: Option<PathBuf>,
}

impl Backup {
    pub async fn run(self, nats: &NatsArgs) -> ExitCode {
        let options = flotilla_hub::backup::Options {
            out: self.out,
            with_status: self.with_status,
            check: self.check,
        };
        let result: anyhow::Result<_> = async {
            let client =
                super::hub_client(nats, self.secure_dir.as_deref(), "flotilla-hub-backup").await?;
            Ok(flotilla_hub::backup::backup(&client, &options).await?)
        }
        .await;
        match result {
            Ok(manifest) => {
                println!("{}", flotilla_hub::backup::summary(&options.out, &manifest));
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("flotilla-hub backup: {e}");
                ExitCode::FAILURE
            }
        }
    }
}
