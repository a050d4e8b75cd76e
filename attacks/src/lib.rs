//! Flotilla's attack suite (issue 23): a hostile spoke and a leaked bootstrap credential
//! against the real binaries and a real nats-server, black-box. The attacker is an independent
//! async-nats client holding exactly what the attacker holds — the fleet's `bootstrap.creds`,
//! a join credential, or one accepted cluster's `STATE_DIR/cluster.creds` — never `hub.creds`.
//! The hub's state is checked the way an operator would (`flotilla get … -o json`) and, raw,
//! with stream-info and last-message reads through `hub.creds`.
//!
//! - [`fleet`]: the fixture — `flotilla-hub init`, `nats-server -c`, the hub, agents on the
//!   simulated backend, the CLI, `/metrics` — every process killed and every file removed on
//!   drop.
//! - [`attacker`]: the attacker's client.
//! - [`wire`]: events and subjects as the attacker writes them.
//! - [`onpath`]: a man in the middle of the NATS link — a relay that rewrites the server's
//!   plaintext `INFO` line — and the TLS material an attacker holds.
//! - [`store`]: the read-only view of the hub's JetStream state.
//!
//! Every attack runs against each server of [`flotilla_testkit::nats_server_binaries`]
//! (Debian's 2.9 and the current release): [`on_every_server!`] makes one test per server,
//! named after it, and a failure message names the server's version.
//!
//! The binaries must be built first: `cargo build -p flotilla-hub -p flotilla-agent -p
//! flotilla-cli --bins` (`./scripts/test.sh` builds every binary).

#![deny(missing_docs)]

pub mod attacker;
pub mod fleet;
pub mod onpath;
pub mod store;
pub mod wire;

pub use attacker::{Attacker, Outcome};
pub use fleet::{AgentOptions, Fleet, HubOptions, Server};
pub use wire::Registration;

/// One `#[tokio::test]` per nats-server for the attack `async fn NAME(server: Server)`:
///
/// ```no_run
/// use flotilla_attacks::{Fleet, Server, on_every_server};
///
/// on_every_server!(the_behaviour_it_protects);
///
/// /// What the attack must not achieve.
/// async fn the_behaviour_it_protects(server: Server) {
///     let fleet = Fleet::secure(server).await;
///     # drop(fleet);
/// }
/// ```
///
/// makes `the_behaviour_it_protects::on_debian_nats_server` and
/// `the_behaviour_it_protects::on_current_nats_server`.
#[macro_export]
macro_rules! on_every_server {
    ($name:ident) => {
        mod $name {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn on_debian_nats_server() {
                super::$name($crate::Server::get("debian")).await
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn on_current_nats_server() {
                super::$name($crate::Server::get("current")).await
            }
        }
    };
}
