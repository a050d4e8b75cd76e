//! What the server's snapshot and restore messages mean (pure): a chunk of a snapshot, its end
//! or its failure ([`classify`]), and a JetStream API answer — a JSON document, a JSON error,
//! the bare text an old server sends, or the empty acknowledgement of a restore chunk
//! ([`parse_answer`]).
//!
//! The end of a snapshot has two shapes: nats-server 2.9 sends an empty message with no
//! headers; current servers send an empty message with the status `204`, or with no header at
//! all when the whole snapshot fit in one chunk, and end a failed snapshot with `408 No
//! Interest`, `408 No Flow Response` or `500 <error>` (nats-server `streamSnapshot`).

use serde_json::Value;

/// What one message on a snapshot's deliver subject is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// Data: write it, then acknowledge it on its reply subject when it has one (the last
    /// short chunk has none).
    Chunk,
    /// The snapshot is complete.
    End,
    /// The server stopped the snapshot.
    Failed {
        /// The status code (`408`, `500`, …).
        code: u16,
        /// The status line's text (`No Flow Response`, the server's error).
        description: String,
    },
}

/// Classifies a message from its status code (`msg.status`), its status text
/// (`msg.description`) and its payload's length.
pub fn classify(status: Option<u16>, description: Option<&str>, payload_len: usize) -> Frame {
    let failed = |code: u16| Frame::Failed {
        code,
        description: description.unwrap_or_default().to_string(),
    };
    match (payload_len, status) {
        (0, None | Some(204)) => Frame::End,
        (0, Some(code)) => failed(code),
        (_, None) => Frame::Chunk,
        // No server sends data with a status: a message that does is not part of a snapshot.
        (_, Some(code)) => failed(code),
    }
}

/// The size and index a chunk's reply subject carries
/// (`$JS.SNAPSHOT.ACK.<stream>.<id>.<size>.<index>`, on 2.9 and current servers alike): a
/// client checks that indices follow each other, so a chunk lost on the way (a slow consumer)
/// fails the snapshot instead of leaving a hole in the archive.
pub fn chunk_reply(reply: &str) -> Option<(usize, u64)> {
    let mut tokens = reply.rsplit('.');
    let index = tokens.next()?.parse().ok()?;
    let size = tokens.next()?.parse().ok()?;
    Some((size, index))
}

/// A JetStream API answer, or the answer to a restore chunk.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// An empty message: a restore chunk was taken.
    Empty,
    /// A JSON document without an `error`.
    Ok(Value),
    /// The API's error (`{"error": {"code", "err_code", "description"}}`).
    Error(ApiError),
    /// Anything else, as text (nats-server 2.9 answers a chunk it could not store with
    /// `-ERR 'storage failure during restore'`).
    Text(String),
}

/// The error of a JetStream API answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// The HTTP-like status (`400`, `404`, `500`, `503`).
    pub code: u16,
    /// JetStream's own code (`10059` stream not found, `10130` name in use, …); 0 when absent.
    pub err_code: u64,
    /// The server's text.
    pub description: String,
}

/// Parses an answer's payload.
pub fn parse_answer(payload: &[u8]) -> Answer {
    if payload.is_empty() {
        return Answer::Empty;
    }
    let Ok(value) = serde_json::from_slice::<Value>(payload) else {
        return Answer::Text(String::from_utf8_lossy(payload).trim().to_string());
    };
    match value.get("error") {
        Some(error) if !error.is_null() => Answer::Error(ApiError {
            code: error
                .get("code")
                .and_then(Value::as_u64)
                .and_then(|c| u16::try_from(c).ok())
                .unwrap_or(0),
            err_code: error.get("err_code").and_then(Value::as_u64).unwrap_or(0),
            description: error
                .get("description")
                .and_then(Value::as_str)
                .unwrap_or("no description")
                .to_string(),
        }),
        _ if value.is_object() => Answer::Ok(value),
        _ => Answer::Text(String::from_utf8_lossy(payload).trim().to_string()),
    }
}

/// What an operator can do about an API error, when JetStream's code says: the codes are
/// nats-server's `errors.json`.
pub fn hint(err_code: u64) -> Option<&'static str> {
    match err_code {
        // Insufficient resources; account, storage or memory limits exceeded.
        10023 | 10002 | 10047 | 10028 => Some(
            "JetStream is short of storage: a restore needs room for the snapshot twice while \
             the server unpacks it (nats-server#6368)",
        ),
        // Snapshot failed.
        10064 => Some("is JetStream short of disk?"),
        // Stream name already in use, cannot restore.
        10130 => Some(
            "restore needs an empty JetStream account (delete the streams first, or use a new \
             server)",
        ),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_2_9_end_without_headers_and_the_current_204_end_are_both_the_end() {
        assert_eq!(classify(None, None, 0), Frame::End);
        assert_eq!(classify(Some(204), None, 0), Frame::End);
    }

    #[test]
    fn data_without_a_status_is_a_chunk() {
        assert_eq!(classify(None, None, 131_072), Frame::Chunk);
        assert_eq!(classify(None, None, 1), Frame::Chunk);
    }

    #[test]
    fn a_408_or_500_ends_the_snapshot_with_the_servers_words() {
        assert_eq!(
            classify(Some(408), Some("No Flow Response"), 0),
            Frame::Failed {
                code: 408,
                description: "No Flow Response".into()
            }
        );
        assert_eq!(
            classify(Some(408), Some("No Interest"), 0),
            Frame::Failed {
                code: 408,
                description: "No Interest".into()
            }
        );
        assert_eq!(
            classify(Some(500), Some("snapshot failed: disk full"), 0),
            Frame::Failed {
                code: 500,
                description: "snapshot failed: disk full".into()
            }
        );
    }

    #[test]
    fn data_with_a_status_is_not_taken_as_a_chunk() {
        assert_eq!(
            classify(Some(503), None, 10),
            Frame::Failed {
                code: 503,
                description: String::new()
            }
        );
    }

    #[test]
    fn a_chunks_reply_subject_gives_its_size_and_index() {
        assert_eq!(
            chunk_reply("$JS.SNAPSHOT.ACK.KV_works.Xy12.131072.7"),
            Some((131_072, 7))
        );
        assert_eq!(chunk_reply("_INBOX.abc"), None);
        assert_eq!(chunk_reply("7"), None);
    }

    #[test]
    fn answers_are_told_apart() {
        assert_eq!(parse_answer(b""), Answer::Empty);
        assert_eq!(
            parse_answer(br#"{"type":"x","deliver_subject":"$JS.SNAPSHOT.RESTORE.S.1"}"#),
            Answer::Ok(serde_json::json!({
                "type": "x",
                "deliver_subject": "$JS.SNAPSHOT.RESTORE.S.1"
            }))
        );
        assert_eq!(
            parse_answer(
                br#"{"type":"x","error":{"code":400,"err_code":10130,"description":"stream name already in use, cannot restore"}}"#
            ),
            Answer::Error(ApiError {
                code: 400,
                err_code: 10130,
                description: "stream name already in use, cannot restore".into()
            })
        );
        assert_eq!(
            parse_answer(b"-ERR 'storage failure during restore'"),
            Answer::Text("-ERR 'storage failure during restore'".into())
        );
        assert_eq!(parse_answer(b"[1]"), Answer::Text("[1]".into()));
    }

    #[test]
    fn a_null_error_is_no_error() {
        assert!(matches!(
            parse_answer(br#"{"error":null,"config":{}}"#),
            Answer::Ok(_)
        ));
    }

    #[test]
    fn storage_errors_point_at_the_double_room_a_restore_needs() {
        assert!(hint(10047).unwrap().contains("nats-server#6368"));
        assert!(hint(10130).unwrap().contains("empty JetStream account"));
        assert_eq!(hint(10059), None);
    }
}
