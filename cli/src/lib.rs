//! The `flotilla` CLI's logic, kept out of `main.rs` so it can be tested; `main.rs` holds the
//! top-level flags and dispatches to [`cmd`].
//!
//! - [`cmd`]: one module per verb (`get`, `describe`, `apply`, `delete`, `watch`, `proxy`,
//!   `rollout`, `addon`, `policy`, `kubeconfig`, `join`, and the cluster edits
//!   `accept`/`deny`/`label`/`taint`): its subcommand table and its `run`.
//! - [`kind`]: per resource kind, its table columns, rows and OCM shape (and `describe` texts),
//!   and how `get` fetches it; a new kind is one module there plus its rows in the verbs'
//!   tables.
//! - [`hub`]: the gRPC connection, the refusal to send a token in the clear off loopback, the
//!   wording of failed calls (one line each), and the retry of calls safe to repeat while the hub
//!   answers UNAVAILABLE (`--retry-seconds`).
//! - [`exec_credential`]: kubectl's exec credential plugins (`--exec-command`): the bearer
//!   token from a command's `ExecCredential`, e.g. an OIDC ID token.
//! - [`pager`]: the one loop over paged lists.
//! - [`output`]: table layout and OCM-shaped JSON/YAML (`kind: List` for lists).
//! - [`edits`]: parsing `key=value` / `key-` label edits and `key=value:Effect` / `key:Effect-`
//!   taint edits.
//!
//! Errors are `anyhow`: the commands are the body of a binary and their errors are printed.

#![deny(missing_docs)]

pub mod cmd;
pub mod edits;
pub mod exec_credential;
pub mod hub;
pub mod kind;
pub mod output;
pub mod pager;
