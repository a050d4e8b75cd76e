//! `flotilla-hub init`: writes a secure directory.

use std::path::PathBuf;
use std::process::ExitCode;

/// Writes a secure directory: NATS operator, account and system keys, the hub's and the
/// bootstrap credentials, an operator-mode nats-server.conf and optionally TLS certificates.
#[derive(clap::Args, Debug)]
pub struct Init {
    /// The directory to write (created 0700).
    #[arg(long)]
    dir: PathBuf,
    /// Where the NATS server will listen.
    #[arg(long, default_value = "127.0.0.1:4222")]
    nats_listen: String,
    /// Also write a CA, server and client certificates and make the server use TLS.
    #[arg(long)]
    tls: bool,
    /// More names or addresses for the server certificate (repeatable).
    #[arg(long = "tls-host")]
    tls_hosts: Vec<String>,
    /// Make the server start TLS before its first line (`handshake_first`; nats-server
    /// 2.10.4 or later — 2.9 refuses the setting): nothing crosses the link in plaintext.
    /// Agents then need `--nats-tls-first` (`flotilla join --nats-tls-first`); the hub
    /// reads it from this directory. Needs `--tls`.
    #[arg(long = "tls-first", requires = "tls")]
    tls_first: bool,
    /// Replace the keys of an existing secure directory (every issued credential stops
    /// working).
    #[arg(long)]
    force: bool,
    /// JetStream file storage the hub's account may use, in bytes (-1: unlimited).
    #[arg(long, default_value_t = flotilla_auth::setup::DEFAULT_JETSTREAM_MAX_BYTES, allow_hyphen_values = true)]
    jetstream_max_bytes: i64,
    /// JetStream memory storage the hub's account may use, in bytes (-1: unlimited).
    #[arg(long, default_value_t = flotilla_auth::setup::DEFAULT_JETSTREAM_MAX_MEMORY, allow_hyphen_values = true)]
    jetstream_max_memory: i64,
    /// Connections the agents' account may hold at once (-1: unlimited).
    #[arg(long, default_value_t = -1, allow_hyphen_values = true)]
    agents_max_connections: i64,
}

impl Init {
    pub fn run(self) -> ExitCode {
        let options = flotilla_auth::InitOptions {
            nats_listen: self.nats_listen,
            tls: self.tls,
            tls_hosts: self.tls_hosts,
            tls_first: self.tls_first,
            force: self.force,
            jetstream_max_bytes: self.jetstream_max_bytes,
            jetstream_max_memory: self.jetstream_max_memory,
            agents_max_connections: self.agents_max_connections,
        };
        let dir = &self.dir;
        match flotilla_auth::SecureDir::init(dir, &options) {
            Ok(secure) => {
                println!("Wrote the secure directory {}.", dir.display());
                println!(
                    "  NATS server:      nats-server -c {}",
                    secure.server_conf.display()
                );
                println!(
                    "  hub:              flotilla-hub --secure-dir {} --nats-url {}://{}",
                    dir.display(),
                    if options.tls { "tls" } else { "nats" },
                    options.nats_listen
                );
                println!(
                    "  agents:           flotilla-agent --bootstrap-creds {} …  (give each spoke a copy)",
                    secure.bootstrap_creds.display()
                );
                if let Some(tls) = &secure.tls {
                    println!("  CA for clients:   {}", tls.ca.display());
                }
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("flotilla-hub init: {e}");
                ExitCode::FAILURE
            }
        }
    }
}
