//! Connections the worker opens: every resolved address checked ([`crate::address`]) before
//! connecting, time bounds on connect and on each read and write, and a reader that counts
//! every byte received and fails once the transfer cap is passed.

use std::{
    io::{self, Read},
    net::{SocketAddr, TcpStream, ToSocketAddrs},
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use super::Failure;
use crate::limits::human_bytes;

/// How long a TCP connect may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long one read or write may wait (a server that stops talking).
pub const IO_TIMEOUT: Duration = Duration::from_secs(30);

/// Bytes received so far, shared between the reader and whoever reports on it.
#[derive(Debug, Clone, Default)]
pub struct Received(Arc<AtomicU64>);

impl Received {
    /// Bytes received so far.
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }

    /// Counts `n` more bytes; returns the new total.
    pub fn add(&self, n: u64) -> u64 {
        self.0.fetch_add(n, Ordering::Relaxed) + n
    }
}

/// A reader that counts what it reads and fails with [`TransferCapExceeded`] past `cap`.
#[derive(Debug)]
pub struct Counted<R> {
    inner: R,
    received: Received,
    cap: u64,
}

/// The error a [`Counted`] reader fails with past its cap (inside an `io::Error`).
#[derive(Debug, thiserror::Error)]
#[error("repository transfer exceeded {} (--gitops-max-fetch-bytes)", human_bytes(*.0))]
pub struct TransferCapExceeded(pub u64);

impl<R> Counted<R> {
    /// Wraps `inner`, counting into `received`.
    pub fn new(inner: R, received: Received, cap: u64) -> Self {
        Counted {
            inner,
            received,
            cap,
        }
    }
}

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.received.get() > self.cap {
            return Err(io::Error::other(TransferCapExceeded(self.cap)));
        }
        let n = self.inner.read(buf)?;
        let total = self.received.add(n as u64);
        if total > self.cap {
            return Err(io::Error::other(TransferCapExceeded(self.cap)));
        }
        Ok(n)
    }
}

/// Resolves `host:port`, refuses the lot if any address is refused, and connects to the first.
pub fn connect(host: &str, port: u16, allow_loopback: bool) -> Result<TcpStream, Failure> {
    let addrs: Vec<SocketAddr> = (host, port)
        .to_socket_addrs()
        .map_err(|e| Failure::transport(format!("{host}: the name does not resolve: {e}")))?
        .collect();
    if addrs.is_empty() {
        return Err(Failure::transport(format!(
            "{host}: the name resolves to no address"
        )));
    }
    for addr in &addrs {
        if let Some(why) = crate::address::refusal(addr.ip(), allow_loopback) {
            return Err(Failure::request(format!(
                "{host}:{port} resolves to {}, {why}; refused",
                addr.ip()
            )));
        }
    }
    let mut last = None;
    for addr in &addrs {
        match TcpStream::connect_timeout(addr, CONNECT_TIMEOUT) {
            Ok(stream) => {
                let timeouts = stream
                    .set_read_timeout(Some(IO_TIMEOUT))
                    .and_then(|()| stream.set_write_timeout(Some(IO_TIMEOUT)));
                timeouts.map_err(|e| Failure::transport(format!("{host}:{port}: {e}")))?;
                return Ok(stream);
            }
            Err(e) => last = Some(e),
        }
    }
    let e = last.map(|e| e.to_string()).unwrap_or_default();
    Err(Failure::transport(format!(
        "{host}:{port}: could not connect: {e}"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_counted_reader_counts_and_fails_past_its_cap() {
        let data = vec![7u8; 1000];
        let received = Received::default();
        let mut r = Counted::new(&data[..], received.clone(), 600);
        let mut buf = [0u8; 500];
        assert_eq!(r.read(&mut buf).unwrap(), 500);
        let err = r.read(&mut buf).unwrap_err();
        assert_eq!(
            err.to_string(),
            "repository transfer exceeded 600 bytes (--gitops-max-fetch-bytes)"
        );
        assert_eq!(received.get(), 1000);
    }

    #[test]
    fn a_host_resolving_to_a_refused_address_is_not_connected_to() {
        let err = connect("169.254.169.254", 80, true).unwrap_err();
        assert_eq!(err.kind, crate::protocol::ErrorKind::Request);
        assert!(err.message.contains("link-local"), "{}", err.message);
        let err = connect("localhost", 9, false).unwrap_err();
        assert!(err.message.contains("loopback"), "{}", err.message);
    }
}
