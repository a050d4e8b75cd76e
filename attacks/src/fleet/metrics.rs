//! The hub's `/metrics` over plain HTTP, and samples read out of a Prometheus text.

use super::Fleet;
use super::process::tail;
use std::time::Duration;

impl Fleet {
    /// The hub's `/metrics` text.
    pub async fn metrics(&self) -> String {
        match http_get(self.metrics_port, "/metrics").await {
            Ok(body) => body,
            Err(e) => self.fail(&format!("reading the hub's /metrics: {e}")),
        }
    }
}

/// Why a plain GET on the hub's HTTP listener gave no body.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    /// The listener refused the connection.
    #[error("connect: {0}")]
    Connect(#[source] std::io::Error),
    /// The request could not be written.
    #[error("write: {0}")]
    Write(#[source] std::io::Error),
    /// The answer could not be read.
    #[error("read: {0}")]
    Read(#[source] std::io::Error),
    /// The answer is not `200` over HTTP/1 (its last lines).
    #[error("unexpected answer: {0}")]
    Unexpected(String),
    /// No whole answer within [`HTTP_TIMEOUT`].
    #[error("timed out")]
    TimedOut,
}

/// Bound of one [`http_get`].
pub const HTTP_TIMEOUT: Duration = Duration::from_secs(10);

/// A plain HTTP/1.0 GET on 127.0.0.1:`port` (the hub's metrics listener); the body.
pub async fn http_get(port: u16, path: &str) -> Result<String, HttpError> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let exchange = async {
        let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .map_err(HttpError::Connect)?;
        s.write_all(format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").as_bytes())
            .await
            .map_err(HttpError::Write)?;
        let mut buf = Vec::new();
        s.read_to_end(&mut buf).await.map_err(HttpError::Read)?;
        let text = String::from_utf8_lossy(&buf).into_owned();
        match text.split_once("\r\n\r\n") {
            Some((head, body)) if head.starts_with("HTTP/1.") && head.contains(" 200 ") => {
                Ok(body.to_string())
            }
            _ => Err(HttpError::Unexpected(tail(&text, 5))),
        }
    };
    tokio::time::timeout(HTTP_TIMEOUT, exchange)
        .await
        .map_err(|_| HttpError::TimedOut)?
}

/// The sum of every sample of metric `name` (all label sets) in a Prometheus text.
pub fn metric_sum(text: &str, name: &str) -> f64 {
    samples(text, name).iter().map(|(_, v)| v).sum()
}

/// The sample lines of metric `name`, for messages.
pub fn metric_samples_text(text: &str, name: &str) -> String {
    samples(text, name)
        .iter()
        .map(|(labels, v)| format!("{name}{{{labels}}} {v}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every sample of metric `name`: (labels, value).
pub fn samples(text: &str, name: &str) -> Vec<(String, f64)> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let rest = l.strip_prefix(name)?;
            let (labels, value) = if let Some(r) = rest.strip_prefix('{') {
                let (labels, value) = r.split_once('}')?;
                (labels.to_string(), value)
            } else if rest.starts_with(' ') {
                (String::new(), rest)
            } else {
                return None;
            };
            let value: f64 = value.split_whitespace().next()?.parse().ok()?;
            Some((labels, value))
        })
        .collect()
}
