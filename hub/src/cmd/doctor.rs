//! `flotilla-hub doctor`: lists (and removes) stored records that do not decode.

use flotilla_bus::connect::NatsArgs;
use std::path::PathBuf;
use std::process::ExitCode;

/// Lists every stored record that does not decode as its bucket holds (a downgrade, a bug
/// or a restored backup left it; running hubs skip it), and removes one on request. Exits
/// 0 when there is none, 1 when there are.
#[derive(clap::Args, Debug)]
pub struct Doctor {
    /// Removes this record (`BUCKET/KEY@REVISION`, as listed; repeatable): only while that
    /// revision is the key's latest and still does not decode.
    #[arg(long = "remove", value_name = "BUCKET/KEY@REVISION")]
    remove: Vec<flotilla_hub::doctor::Removal>,
    /// The secure directory (connect as the hub, with its TLS).
    #[arg(long, env = "FLOTILLA_SECURE_DIR")]
    pub(super) secure_dir: Option<PathBuf>,
    /// `json` for one JSON document.
    #[arg(short = 'o', long = "output")]
    output: Option<Output>,
}

/// What `doctor -o` prints.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum Output {
    /// One JSON document: `{"records": [...]}`.
    Json,
}

impl Doctor {
    pub async fn run(self, nats: &NatsArgs) -> ExitCode {
        let result: anyhow::Result<_> = async {
            let client =
                super::hub_client(nats, self.secure_dir.as_deref(), "flotilla-hub-doctor").await?;
            let jetstream = async_nats::jetstream::new(client);
            for removal in &self.remove {
                flotilla_hub::doctor::remove(&jetstream, removal).await?;
                eprintln!(
                    "removed {}/{}@{}",
                    removal.bucket, removal.key, removal.revision
                );
            }
            Ok(flotilla_hub::doctor::examine(&jetstream).await?)
        }
        .await;
        let records = match result {
            Ok(records) => records,
            Err(e) => {
                eprintln!("flotilla-hub doctor: {e}");
                return ExitCode::from(2);
            }
        };
        match self.output {
            Some(Output::Json) => println!("{}", serde_json::json!({ "records": records })),
            None if records.is_empty() => println!("Every stored record decodes."),
            None => {
                println!("BUCKET\tKEY\tREVISION\tBYTES\tERROR");
                for r in &records {
                    println!(
                        "{}\t{}\t{}\t{}\t{}",
                        r.bucket, r.key, r.revision, r.bytes, r.error
                    );
                }
                eprintln!(
                    "{} record(s) do not decode; hubs skip them. Remove one with \
                     `flotilla-hub doctor --remove BUCKET/KEY@REVISION`, or write a good \
                     value over it.",
                    records.len()
                );
            }
        }
        if records.is_empty() {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(1)
        }
    }
}
