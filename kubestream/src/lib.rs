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
//! - [`spdy`]: SPDY/3.1 — `frame` (codec, incremental decoder, bounds), `headers` (header
//!   blocks, one zlib context per direction with the SPDY dictionary) (pure); `conn`, a
//!   server connection over `AsyncRead + AsyncWrite` (I/O).
//! - [`wsio`]: `AsyncRead + AsyncWrite` over a WebSocket of binary messages, for SPDY
//!   tunnelled in a WebSocket (I/O).
//! - [`remotecommand`]: exec and attach over SPDY — the streams by role, gathered as the
//!   kubelet gathers them, the resize stream's JSON (pure).
//! - [`portforward`]: port-forward's streams — header validation, pairing `error` and `data`
//!   by `requestid`, the pair timeout as a rule over a given clock (pure).

#![deny(missing_docs)]

pub mod channel;
pub mod negotiate;
pub mod portforward;
pub mod remotecommand;
pub mod spdy;
pub mod status;
pub mod wsio;
