//! `flotilla-hub restore`.

use flotilla_bus::connect::NatsArgs;
use std::path::PathBuf;
use std::process::ExitCode;

/// Restores a backup into a server whose account has none of Flotilla's streams (stop the
/// hubs first), after checking every file against the manifest; then start the hubs.
#[derive(clap::Args, Debug)]
pub struct Restore {
    /// The backup's directory.
    #[arg(long)]
    from: PathBuf,
    /// Replicas of every restored stream (the backup's when not given).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=5))]
    replicas: Option<u64>,
    /// Check the backup and the server, print what would be restored, restore nothing.
    #[arg(long)]
    dry_run: bool,
    /// The secure directory (connect as the hub, with its TLS).
    #[arg(long, env = "FLOTILLA_SECURE_DIR")]
    pub(super) secure_dir: Option<PathBuf>,
    /// A hub's `revocations.json` (each hub keeps one in its secure directory): its
    /// revocations are merged into the restored ones before any hub starts, so credentials
    /// revoked after the backup stay revoked. Repeat it for every hub's file.
    #[arg(long = "revocations", value_name = "FILE")]
    revocations: Vec<PathBuf>,
}

impl Restore {
    /// The backup is checked before the server is reached.
    pub async fn run(self, nats: &NatsArgs) -> ExitCode {
        use flotilla_hub::restore as r;
        let result: anyhow::Result<_> = async {
            let checked = r::check(&self.from).await?;
            let revocations = r::read_revocations(&self.revocations)?;
            let client =
                super::hub_client(nats, self.secure_dir.as_deref(), "flotilla-hub-restore").await?;
            if self.dry_run {
                r::check_server(&client, &checked).await?;
                return Ok(r::dry_run(&checked));
            }
            let replicas = self.replicas.map(|n| n as usize);
            let restored = r::restore(&client, &checked, replicas).await?;
            let mut text = r::summary(&checked, &restored);
            let joins = r::spend_joins(&client, &checked, replicas).await?;
            if joins > 0 {
                text.push_str(&format!(
                    "\n{joins} join credential(s) unspent in the backup are revoked: one spent \
                     since must not bind its cluster again (mint new ones with flotilla join for \
                     sites that had not joined)."
                ));
            }
            if !self.revocations.is_empty() {
                let written = r::put_revocations(&client, &checked, replicas, &revocations).await?;
                text.push_str(&format!(
                    "\n{} revocation(s) read from {} file(s) given with --revocations; {written} \
                     of them were not in the backup and are written back.",
                    revocations.len(),
                    self.revocations.len()
                ));
            }
            Ok(text)
        }
        .await;
        match result {
            Ok(text) => {
                println!("{text}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("flotilla-hub restore: {e}");
                ExitCode::FAILURE
            }
        }
    }
}
