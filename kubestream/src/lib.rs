//! The Kubernetes streaming protocols the cluster proxy terminates: the WebSocket channel
//! protocols of exec and attach, SPDY/3.1 for port-forward, port-forward stream pairing —
//! pure codecs and thin I/O adapters (docs/notes/issue-46-design.md §1, §6).
//!
//! - [`channel`]: `v4`/`v5.channel.k8s.io` messages — stdin, CLOSE, resize from the client;
//!   stdout, stderr and the exit status from the server; size bounds (pure).
//! - [`negotiate`]: the upgrade handshakes — WebSocket and SPDY checks, the subprotocol
//!   choice and its refusal, the accept key, the `101` head (pure).
//! - [`status`]: how a session ends — `SessionStatus` ⇄ the kubelet's `Status` JSON, and the
//!   validation of an exit an agent sends (pure).

#![deny(missing_docs)]

pub mod channel;
pub mod negotiate;
pub mod status;
