//! An exec, attach or port-forward session as the cluster proxy hands it to a backend
//! ([`super::Backend::open_session`]) — pure types, no I/O.
//!
//! The hub parsed the client's query ([`flotilla_bus::tunnel::session::Spec`]); the agent
//! passes the backend what it needs and trusts the structure, never a query. A backend answers
//! with a [`Session`]: a bounded [`Input`] sender (a send that returns is a chunk the backend
//! took: the agent grants the hub more stdin only then) and a stream of [`Output`]s that the
//! agent polls only while it holds the hub's credit — so a slow client stalls the process,
//! not the agent's memory. Or it refuses with an ordinary [`ApiResponse`] (a `Status`), which
//! reaches the client as the HTTP answer to its upgrade.

use super::api::{ApiResponse, Bearer, Impersonation};
use bytes::Bytes;
use futures::Stream;
use std::pin::Pin;
use tokio::sync::mpsc;

pub use flotilla_bus::tunnel::session::{Kind, Streams};
pub use flotilla_kubestream::status::SessionStatus;

/// What the session runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionKind {
    /// A command in the container.
    Exec {
        /// The command and its arguments (at least the command).
        command: Vec<String>,
    },
    /// The container's main process.
    Attach,
    /// One TCP connection to a port of the pod.
    PortForward {
        /// The pod's port (1–65535).
        port: u16,
    },
}

impl SessionKind {
    /// The kind without its details (for logs and metrics).
    pub fn kind(&self) -> Kind {
        match self {
            SessionKind::Exec { .. } => Kind::Exec,
            SessionKind::Attach => Kind::Attach,
            SessionKind::PortForward { .. } => Kind::PortForward,
        }
    }
}

/// One session the hub asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionRequest {
    /// What it runs.
    pub kind: SessionKind,
    /// The pod's namespace.
    pub namespace: String,
    /// The pod.
    pub pod: String,
    /// exec/attach: the container (`None`: the pod's default one, as the API server picks).
    pub container: Option<String>,
    /// exec/attach: the streams the client opened (all off for a port-forward).
    pub streams: Streams,
    /// Act as this user (`None`: as the agent, or as `bearer`).
    pub impersonate: Option<Impersonation>,
    /// A ManagedServiceAccount token the caller presented: the session authenticates with it.
    pub bearer: Option<Bearer>,
}

/// What the client sends the process (or the pod's port).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    /// Bytes of stdin (a port-forward's bytes to the pod).
    Data(Bytes),
    /// The client's stdin ended (a port-forward's client half-closed).
    End,
    /// The client's terminal changed size (tty sessions).
    Resize {
        /// Columns.
        width: u16,
        /// Rows.
        height: u16,
    },
}

/// An output channel of a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Channel {
    /// exec/attach stdout.
    Stdout,
    /// exec/attach stderr.
    Stderr,
    /// A port-forward's bytes from the pod.
    Data,
}

impl Channel {
    /// Its number on the tunnel (Kubernetes' channel numbers).
    pub fn number(self) -> u32 {
        use flotilla_bus::tunnel::session::{DATA, STDERR, STDOUT};
        match self {
            Channel::Stdout => STDOUT,
            Channel::Stderr => STDERR,
            Channel::Data => DATA,
        }
    }
}

/// What the process (or the pod's port) sends the client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output {
    /// Bytes on a channel.
    Data(Channel, Bytes),
    /// The channel ended (the process closed it; a port-forward's pod side closed).
    End(Channel),
    /// How the session ended (exec/attach, or a port-forward that failed): the last output.
    Exit(SessionStatus),
}

/// The outputs of a session, as they come; the stream ending is the session's end.
pub type OutputStream = Pin<Box<dyn Stream<Item = Output> + Send>>;

/// Capacity of a session's input: one chunk may wait for the backend, so a send that returns
/// means the chunk before it was taken.
pub const INPUT_CAPACITY: usize = 1;

/// An open session: dropping it (both halves) ends it at the backend.
pub struct Session {
    /// Where the client's input goes (capacity [`INPUT_CAPACITY`]); the backend dropping its
    /// receiver means it reads no more (what still comes is dropped, the hub credited).
    pub input: mpsc::Sender<Input>,
    /// The outputs, polled only within the hub's credit.
    pub output: OutputStream,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session").finish_non_exhaustive()
    }
}

/// The input half of a session: the sender for [`Session::input`] and the receiver the backend
/// reads (capacity [`INPUT_CAPACITY`]).
pub fn input_channel() -> (mpsc::Sender<Input>, mpsc::Receiver<Input>) {
    mpsc::channel(INPUT_CAPACITY)
}

/// A backend's refusal of a session kind it does not serve (501).
pub fn not_served() -> ApiResponse {
    ApiResponse::status(
        http::StatusCode::NOT_IMPLEMENTED,
        "NotImplemented",
        "this cluster's backend does not serve exec, attach or port-forward",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn channels_carry_kubernetes_numbers_and_kinds_their_names() {
        assert_eq!(Channel::Stdout.number(), 1);
        assert_eq!(Channel::Stderr.number(), 2);
        assert_eq!(Channel::Data.number(), 0);
        assert_eq!(
            SessionKind::Exec {
                command: vec!["ls".into()]
            }
            .kind()
            .name(),
            "exec"
        );
        assert_eq!(
            SessionKind::PortForward { port: 80 }.kind().name(),
            "portforward"
        );
        assert_eq!(not_served().status, http::StatusCode::NOT_IMPLEMENTED);
    }

    #[tokio::test]
    async fn a_session_takes_one_input_ahead_of_its_backend() {
        let (input, mut rx) = input_channel();
        input.send(Input::End).await.unwrap();
        assert!(
            input.try_send(Input::End).is_err(),
            "one waits for the backend"
        );
        assert_eq!(rx.recv().await, Some(Input::End));
        drop(rx);
        assert!(input.send(Input::End).await.is_err(), "the backend is gone");
    }
}
