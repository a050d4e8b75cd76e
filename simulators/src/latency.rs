//! Link latency: a TCP relay between simulated agents and their NATS server that holds every
//! chunk of bytes for half the round-trip time in each direction, as a WAN link does. Agents
//! really wait for their registration replies, acknowledgements and resyncs; bandwidth is not
//! limited and byte order is kept.
//!
//! One relay per latency class of the profile (`connectivity.latency`), listening on loopback;
//! the class's agents are given the relay's URL instead of the server's. TLS passes through the
//! relay untouched, so with TLS the server's certificate must name `127.0.0.1` too.

use anyhow::Context;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio::time::Instant;

/// Chunks in flight per direction before the reader waits (back-pressure).
const CHUNKS_IN_FLIGHT: usize = 256;

/// A bound relay: its URL for agents, and the future serving it.
pub(crate) struct Relay<F> {
    /// `scheme://127.0.0.1:port`.
    pub(crate) url: String,
    /// Accepts and relays until dropped (dropping it ends every relayed connection).
    pub(crate) serve: F,
}

/// Splits `nats://host:port` (the first URL of a comma list) into scheme and address.
fn target(url: &str) -> anyhow::Result<(String, String)> {
    let first = url.split(',').next().unwrap_or(url).trim();
    let (scheme, rest) = first.split_once("://").unwrap_or(("nats", first));
    let host_port = rest.rsplit_once('@').map_or(rest, |(_, h)| h);
    let host_port = host_port.trim_end_matches('/');
    anyhow::ensure!(
        host_port.contains(':'),
        "link latency needs the NATS URL with its port (got {first:?})"
    );
    Ok((scheme.to_owned(), host_port.to_owned()))
}

/// Binds a relay to the server of `nats_url` adding `rtt` per round trip; run `serve`.
pub(crate) async fn start(
    nats_url: &str,
    rtt: Duration,
) -> anyhow::Result<Relay<impl Future<Output = ()> + Send + 'static>> {
    let (scheme, addr) = target(nats_url)?;
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .context("binding the link-latency relay")?;
    let port = listener.local_addr()?.port();
    let one_way = rtt / 2;
    let serve = async move {
        let mut links = JoinSet::new();
        loop {
            tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok((inbound, _)) => {
                        links.spawn(relay(inbound, addr.clone(), one_way));
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "link-latency relay: accept failed");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                },
                Some(_) = links.join_next(), if !links.is_empty() => {}
            }
        }
    };
    Ok(Relay {
        url: format!("{scheme}://127.0.0.1:{port}"),
        serve,
    })
}

async fn relay(inbound: TcpStream, addr: String, one_way: Duration) {
    let outbound = match TcpStream::connect(&addr).await {
        Ok(s) => s,
        // The agent sees its connection closed, as when the server is down.
        Err(_) => return,
    };
    let _ = inbound.set_nodelay(true);
    let _ = outbound.set_nodelay(true);
    let (ri, wi) = inbound.into_split();
    let (ro, wo) = outbound.into_split();
    tokio::join!(pipe(ri, wo, one_way), pipe(ro, wi, one_way));
}

/// Copies `from` to `to`, each chunk written `delay` after it was read.
async fn pipe(mut from: OwnedReadHalf, mut to: OwnedWriteHalf, delay: Duration) {
    let (tx, mut rx) = mpsc::channel::<(Instant, Vec<u8>)>(CHUNKS_IN_FLIGHT);
    let read = async move {
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            match from.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if tx
                        .send((Instant::now() + delay, buf[..n].to_vec()))
                        .await
                        .is_err()
                    {
                        break;
                    }
                }
            }
        }
    };
    let write = async move {
        while let Some((due, chunk)) = rx.recv().await {
            tokio::time::sleep_until(due).await;
            if to.write_all(&chunk).await.is_err() {
                return;
            }
        }
        let _ = to.shutdown().await;
    };
    tokio::join!(read, write);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_come_from_the_first_url_with_scheme_and_port() {
        let t = |u: &str| target(u).unwrap();
        assert_eq!(
            t("nats://127.0.0.1:4222"),
            ("nats".into(), "127.0.0.1:4222".into())
        );
        assert_eq!(
            t("tls://user:pw@hub.example:4443,nats://b:1"),
            ("tls".into(), "hub.example:4443".into())
        );
        assert_eq!(
            t("localhost:4222"),
            ("nats".into(), "localhost:4222".into())
        );
        assert!(target("nats://hub").is_err());
    }

    #[tokio::test]
    async fn each_round_trip_takes_the_configured_time_and_bytes_arrive_in_order() {
        // An echo server stands in for the NATS server.
        let echo = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = echo.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut s, _) = echo.accept().await.unwrap();
            let mut buf = [0u8; 1024];
            loop {
                let n = s.read(&mut buf).await.unwrap();
                if n == 0 {
                    break;
                }
                s.write_all(&buf[..n]).await.unwrap();
            }
        });
        let rtt = Duration::from_millis(200);
        let relay = start(&format!("nats://{addr}"), rtt).await.unwrap();
        let port = relay.url.rsplit(':').next().unwrap().to_owned();
        let serving = tokio::spawn(relay.serve);
        let mut c = TcpStream::connect(format!("127.0.0.1:{port}"))
            .await
            .unwrap();
        for round in 0..3u8 {
            let msg = [round; 64];
            let started = std::time::Instant::now();
            c.write_all(&msg).await.unwrap();
            let mut back = [0u8; 64];
            c.read_exact(&mut back).await.unwrap();
            let took = started.elapsed();
            assert_eq!(back, msg, "bytes come back unchanged");
            assert!(took >= rtt, "round trip {took:?} shorter than {rtt:?}");
        }
        serving.abort();
    }
}
