//! Git sources for Flotilla: the fetch worker and what the hub needs to run it.
//!
//! - [`protocol`]: the request the hub writes to a worker's stdin and the answer it reads back.
//! - [`limits`]: the defaults of every bound of a fetch.
//! - [`known_hosts`]: which host keys an `ssh://` server may present (pure).
//! - [`paths`], [`address`]: pure checks of names, `paths` globs, symlinks and addresses, shared
//!   by the worker and the hub's second look at an answer ([`check`]).
//! - [`launch`]: starting a worker process with its bounds, feeding it, reading it, killing it
//!   at its deadline (tokio; no gix); [`pool`]: the one task that runs them, a bounded number
//!   at once and one per host.
//! - `worker` (feature `worker`, the default): the `flotilla-git-fetch` side, gix inside. The hub
//!   depends on this crate with `default-features = false` and never links gix.
#![deny(missing_docs)]

pub mod address;
pub mod check;
pub mod known_hosts;
pub mod launch;
pub mod limits;
pub mod paths;
pub mod pool;
pub mod protocol;
#[cfg(feature = "worker")]
pub mod worker;
