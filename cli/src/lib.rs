//! The `flotilla` CLI's logic, kept out of `main.rs` so it can be tested:
//!
//! - [`edits`]: parsing `key=value` / `key-` label edits and `key=value:Effect` / `key:Effect-`
//!   taint edits.
//! - [`output`]: tables in clusteradm's columns and OCM-shaped JSON/YAML (`kind: List` for lists).
//! - [`placement`]: placement, decision and score tables and `describe placement` (the
//!   scheduler's per-cluster filter verdicts and scores).

#![deny(missing_docs)]

pub mod edits;
pub mod output;
pub mod placement;
