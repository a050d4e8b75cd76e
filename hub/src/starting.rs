//! What a hub still starting answers on its metrics address (I/O: an HTTP server of its own).
//! A start can wait minutes for its store (a NATS node lost, JetStream electing leaders, a
//! quorum not yet back); meanwhile `/healthz` answers 200 `starting: waiting for the store
//! (<what>)` — alive, so a liveness probe does not restart a hub that is only waiting — and
//! `/readyz` and everything else 503 `starting`. The hub's own metrics server takes the address
//! over once the hub serves.

use std::os::fd::AsFd;
use tokio::net::TcpListener;
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;
use tracing::Instrument;

/// The starting server; [`Starting::stop`] ends it.
pub struct Starting {
    stop: oneshot::Sender<()>,
    task: JoinHandle<()>,
}

/// What `/healthz` says while the start waits for `waiting` (`None`: for nothing in particular).
pub fn health(waiting: Option<&str>) -> String {
    match waiting {
        Some(what) => format!("starting: waiting for the store ({what})"),
        None => "starting".to_string(),
    }
}

impl Starting {
    /// Answers on (a copy of) `listener` until stopped, telling what `waiting` says.
    pub fn serve(
        listener: &TcpListener,
        waiting: watch::Receiver<Option<String>>,
    ) -> std::io::Result<Self> {
        let copy = std::net::TcpListener::from(listener.as_fd().try_clone_to_owned()?);
        copy.set_nonblocking(true)?;
        let copy = TcpListener::from_std(copy)?;
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(
            async move {
                let shutdown = async {
                    let _ = stopped.await;
                };
                let said = move || health(waiting.borrow().as_deref());
                if let Err(e) = flotilla_bus::process::serve_starting(copy, said, shutdown).await {
                    tracing::warn!(error = %e, "the starting health server failed");
                }
            }
            .instrument(tracing::info_span!("starting_health")),
        );
        Ok(Self { stop, task })
    }

    /// Stops answering (the hub's metrics server answers on the same address).
    pub async fn stop(self) {
        let _ = self.stop.send(());
        let _ = tokio::time::timeout(std::time::Duration::from_secs(5), self.task).await;
    }
}
