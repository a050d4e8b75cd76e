//! The `flotilla` CLI's logic, kept out of `main.rs` so it can be tested:
//!
//! - [`edits`]: parsing `key=value` / `key-` label edits and `key=value:Effect` / `key:Effect-`
//!   taint edits.
//! - [`output`]: tables in clusteradm's columns and OCM-shaped JSON/YAML (`kind: List` for lists).

#![deny(missing_docs)]

pub mod edits;
pub mod output;
