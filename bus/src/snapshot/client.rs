//! The snapshot client (I/O): one stream's snapshot taken through the server's API and
//! written out as it arrives, and one stream restored from such a snapshot.
//!
//! Snapshot: subscribe a fresh inbox, ask `$JS.API.STREAM.SNAPSHOT.<stream>` to deliver there
//! (consumers left out), then write each chunk and acknowledge it on its reply subject — the
//! acknowledgements open the server's window (a current server gives up after 5 s without
//! one) — until the end ([`super::frames`]). The answer's `config` and `state` are kept as
//! JSON values, not async-nats' types: a restore must send back exactly what the server gave,
//! fields this client does not model included, and async-nats' types carry 2.10 fields that
//! 2.9 refuses.
//!
//! Restore: `$JS.API.STREAM.RESTORE.<stream>` with the request the snapshot answered, then
//! every chunk as a request (the server refuses a chunk without a reply subject, and its
//! empty answer paces the transfer), then an empty request, answered with the created stream.

use super::frames::{self, Answer, Frame};
use super::manifest::hex;
use super::{Result, SnapshotError};
use async_nats::{Client, Request};
use bytes::Bytes;
use futures::StreamExt;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// The JetStream API's prefix (Flotilla's account uses no domain).
const API: &str = "$JS.API.STREAM";
/// The chunk size asked of the server (its default; 2.9 may send shorter chunks).
pub const SNAPSHOT_CHUNK: usize = 128 * 1024;
/// The chunk size a restore sends.
pub const RESTORE_CHUNK: usize = 128 * 1024;
/// How long a snapshot waits for its next chunk, or a restore for a chunk's answer.
pub const CHUNK_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the snapshot and restore requests wait for their answer (the server may check
/// every message's checksum first).
pub const ANSWER_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a restore waits for the server to unpack the stream after the last chunk.
pub const FINISH_TIMEOUT: Duration = Duration::from_secs(600);

/// How to take a snapshot.
#[derive(Debug, Clone, Copy, Default)]
pub struct SnapshotOptions {
    /// Have the server check every message's checksum first (`jsck`).
    pub check: bool,
}

/// A snapshot taken.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// `{config, state}` as the server answered: the restore request (`backup.json`).
    pub request: Value,
    /// Bytes written.
    pub bytes: u64,
    /// SHA-256 of the bytes written, lowercase hex.
    pub sha256: String,
    /// Chunks received.
    pub chunks: u64,
}

impl Snapshot {
    /// A number of the snapshot's `state` (`messages`, `first_seq`, `last_seq`), 0 when absent.
    pub fn state(&self, field: &str) -> u64 {
        self.request["state"][field].as_u64().unwrap_or(0)
    }
}

/// A stream restored.
#[derive(Debug, Clone)]
pub struct Restored {
    /// Bytes sent.
    pub bytes: u64,
    /// The created stream's messages, as the server reports them.
    pub messages: u64,
    /// The created stream's last sequence.
    pub last_seq: u64,
}

/// Takes a snapshot of `stream` and writes its data to `out` (flushed; syncing a file is the
/// caller's).
pub async fn snapshot<W>(
    client: &Client,
    stream: &str,
    out: &mut W,
    options: SnapshotOptions,
) -> Result<Snapshot>
where
    W: AsyncWrite + Unpin,
{
    let inbox = client.new_inbox();
    let mut chunks =
        client
            .subscribe(inbox.clone())
            .await
            .map_err(|source| SnapshotError::Subscribe {
                stream: stream.into(),
                source,
            })?;
    let body = json!({
        "deliver_subject": inbox,
        "no_consumers": true,
        "chunk_size": SNAPSHOT_CHUNK,
        "jsck": options.check,
    });
    let answer = api(client, stream, "SNAPSHOT", &body).await?;
    if !answer["config"].is_object() || !answer["state"].is_object() {
        return Err(SnapshotError::Answer {
            stream: stream.into(),
            what: "the snapshot request (no config and state)".into(),
            answer: answer.to_string(),
        });
    }
    let request = json!({ "config": answer["config"], "state": answer["state"] });
    let (mut digest, mut bytes, mut count) = (Sha256::new(), 0u64, 0u64);
    loop {
        let next = tokio::time::timeout(CHUNK_TIMEOUT, chunks.next())
            .await
            .map_err(|_| SnapshotError::Flow {
                stream: stream.into(),
                description: format!(
                    "no chunk for {}s after {count} chunks ({bytes} bytes): the server stopped \
                     sending (the link or the stream's leader changed); run the backup again",
                    CHUNK_TIMEOUT.as_secs()
                ),
            })?;
        let Some(message) = next else {
            return Err(SnapshotError::Flow {
                stream: stream.into(),
                description: "the connection closed the snapshot's subscription".into(),
            });
        };
        let status = message.status.map(|s| s.as_u16());
        match frames::classify(
            status,
            message.description.as_deref(),
            message.payload.len(),
        ) {
            Frame::Chunk => {
                let reply = message.reply.as_ref().map(|r| r.as_str());
                if let Some((size, index)) = reply.and_then(frames::chunk_reply)
                    && (index != count + 1 || size != message.payload.len())
                {
                    return Err(SnapshotError::Flow {
                        stream: stream.into(),
                        description: format!(
                            "chunk {index} ({size} bytes) arrived after {count} chunks, with \
                             {} bytes: chunks were lost on the way; run the backup again",
                            message.payload.len()
                        ),
                    });
                }
                out.write_all(&message.payload)
                    .await
                    .map_err(|source| io(stream, "writing the snapshot", source))?;
                digest.update(&message.payload);
                bytes += message.payload.len() as u64;
                count += 1;
                if let Some(reply) = message.reply {
                    client
                        .publish(reply, Bytes::new())
                        .await
                        .map_err(|source| SnapshotError::Publish {
                            stream: stream.into(),
                            source,
                        })?;
                }
            }
            Frame::End => break,
            Frame::Failed { code, description } => {
                return Err(SnapshotError::Flow {
                    stream: stream.into(),
                    description: format!(
                        "the server ended the snapshot after {count} chunks with {code} \
                         {description:?}"
                    ),
                });
            }
        }
    }
    out.flush()
        .await
        .map_err(|source| io(stream, "writing the snapshot", source))?;
    Ok(Snapshot {
        request,
        bytes,
        sha256: hex(&digest.finalize()),
        chunks: count,
    })
}

/// Restores `stream` from `request` (a snapshot's `{config, state}`, replicas already as
/// wanted) and the snapshot's data. The server refuses a stream that exists.
pub async fn restore<R>(
    client: &Client,
    stream: &str,
    request: &Value,
    data: &mut R,
) -> Result<Restored>
where
    R: AsyncRead + Unpin,
{
    let answer = api(client, stream, "RESTORE", request).await?;
    let Some(deliver) = answer["deliver_subject"].as_str().map(str::to_string) else {
        return Err(SnapshotError::Answer {
            stream: stream.into(),
            what: "the restore request".into(),
            answer: answer.to_string(),
        });
    };
    let mut buf = vec![0u8; RESTORE_CHUNK];
    let (mut sent, mut index) = (0u64, 0u64);
    loop {
        let n = fill(data, &mut buf)
            .await
            .map_err(|source| io(stream, "reading the snapshot", source))?;
        if n == 0 {
            break;
        }
        index += 1;
        let what = format!("chunk {index} ({sent} bytes sent)");
        let chunk = Bytes::copy_from_slice(&buf[..n]);
        match send(client, stream, &deliver, chunk, CHUNK_TIMEOUT, &what).await? {
            Answer::Empty => {}
            other => return Err(refused(stream, &what, other)),
        }
        sent += n as u64;
        if n < buf.len() {
            break;
        }
    }
    let what = "the end of the restore";
    match send(client, stream, &deliver, Bytes::new(), FINISH_TIMEOUT, what).await? {
        Answer::Ok(info) => Ok(Restored {
            bytes: sent,
            messages: info["state"]["messages"].as_u64().unwrap_or(0),
            last_seq: info["state"]["last_seq"].as_u64().unwrap_or(0),
        }),
        other => Err(refused(stream, what, other)),
    }
}

/// Asks the stream API `op` (`SNAPSHOT`, `RESTORE`) about `stream`; its answer, or its error.
async fn api(client: &Client, stream: &str, op: &str, body: &Value) -> Result<Value> {
    let what = format!("the {} request", op.to_lowercase());
    let subject = format!("{API}.{op}.{stream}");
    match send(
        client,
        stream,
        &subject,
        Bytes::from(body.to_string()),
        ANSWER_TIMEOUT,
        &what,
    )
    .await?
    {
        Answer::Ok(value) => Ok(value),
        other => Err(refused(stream, &what, other)),
    }
}

/// Sends one request and parses its answer.
async fn send(
    client: &Client,
    stream: &str,
    subject: &str,
    payload: Bytes,
    timeout: Duration,
    what: &str,
) -> Result<Answer> {
    let request = Request::new().payload(payload).timeout(Some(timeout));
    let message = client
        .send_request(subject.to_string(), request)
        .await
        .map_err(|source| SnapshotError::Request {
            stream: stream.into(),
            what: what.into(),
            source,
        })?;
    Ok(frames::parse_answer(&message.payload))
}

/// The error an answer other than the expected one is.
fn refused(stream: &str, what: &str, answer: Answer) -> SnapshotError {
    match answer {
        Answer::Error(error) => SnapshotError::Api {
            stream: stream.into(),
            error,
        },
        Answer::Empty => SnapshotError::Answer {
            stream: stream.into(),
            what: what.into(),
            answer: String::new(),
        },
        Answer::Ok(value) => SnapshotError::Answer {
            stream: stream.into(),
            what: what.into(),
            answer: value.to_string(),
        },
        Answer::Text(text) => SnapshotError::Answer {
            stream: stream.into(),
            what: what.into(),
            answer: text,
        },
    }
}

fn io(stream: &str, what: &'static str, source: std::io::Error) -> SnapshotError {
    SnapshotError::Io {
        stream: stream.into(),
        what,
        source,
    }
}

/// Reads into `buf` until it is full or the data ends; how many bytes were read.
async fn fill<R: AsyncRead + Unpin>(data: &mut R, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        let n = data.read(&mut buf[filled..]).await?;
        if n == 0 {
            break;
        }
        filled += n;
    }
    Ok(filled)
}
