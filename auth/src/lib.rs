//! NATS decentralized authentication for Flotilla (DESIGN.md §5).
//!
//! The hub is the authority of one NATS account: it keeps the account's signing key and signs a
//! user JWT for each accepted cluster's own public NKey (the CSR analogue: the seed never leaves
//! the spoke), scoped to that cluster's subjects and with an expiry. Denying or deleting a
//! cluster revokes its key in the account JWT, which the hub pushes to the server.
//!
//! - [`secret`]: seeds and other secrets (never printed) and files written with mode 0600.
//! - [`jwt`]: NATS v2 JWTs — operator, account and user claims, signing and verification.
//! - [`creds`]: the standard `.creds` file (user JWT + NKey seed).
//! - [`permissions`]: what the bootstrap user, a cluster's user and the hub's user may do.
//! - [`setup`]: `flotilla-hub init`: the keys, JWTs, credentials, TLS certificates and the
//!   operator-mode `nats-server.conf` of a secure directory, and reading them back.
//! - [`issuer`]: the hub's issuer — cluster credentials, revocations, account pushes.
//! - [`sealing`]: the hub's sealing key (`keys/sealing.xk` or `--sealing-key-file`), which
//!   ManagedServiceAccount tokens are sealed to and calls between hubs are sealed with.

#![deny(missing_docs)]

pub mod creds;
pub mod issuer;
pub mod jwt;
pub mod permissions;
pub mod sealing;
pub mod secret;
pub mod setup;

pub use creds::Creds;
pub use issuer::{Issued, Issuer, Subject, Which};
pub use secret::Secret;
pub use setup::{InitOptions, SecureDir};
