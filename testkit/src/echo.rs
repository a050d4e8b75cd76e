//! A TCP echo server for port-forward tests and the load tool: every connection gets its bytes
//! back as they come, and its own end once the client half-closed and the rest was echoed.

use std::net::SocketAddr;
use tokio::task::{JoinHandle, JoinSet};

/// A running echo server on 127.0.0.1; stopped (with its connections) when dropped.
pub struct EchoServer {
    addr: SocketAddr,
    task: JoinHandle<()>,
}

impl EchoServer {
    /// Starts one on a free port.
    pub async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the echo server");
        let addr = listener.local_addr().expect("local address");
        let task = tokio::spawn(async move {
            let mut connections = JoinSet::new();
            while let Ok((stream, _)) = listener.accept().await {
                while connections.try_join_next().is_some() {}
                connections.spawn(async move {
                    let (mut r, mut w) = stream.into_split();
                    let _ = tokio::io::copy(&mut r, &mut w).await;
                    let _ = tokio::io::AsyncWriteExt::shutdown(&mut w).await;
                });
            }
        });
        Self { addr, task }
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for EchoServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}
