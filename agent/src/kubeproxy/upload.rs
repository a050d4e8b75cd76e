//! A request body on its way from the hub to the backend (pure: channels, no I/O). The call
//! [`Feed::push`]es each chunk as the hub sends it; the backend takes them from the
//! [`RequestBody`] stream as fast as its API server reads; each chunk taken gives its bytes
//! back to the agent's budget and tells the call ([`Feed::taken`]) so it may grant the hub
//! more credit. What waits between the two is at most the call's window of chunks.
//!
//! The stream ends cleanly only on the hub's `End`: a call that stops before (cancelled, the
//! hub gone, a refusal) breaks the body off with an error, so an API server never takes a
//! truncated body for a whole one.

use super::Held;
use crate::backend::api::{BodyStream, RequestBody};
use bytes::Bytes;
use tokio::sync::mpsc;

/// What the call passes to the backend.
enum Piece {
    /// A chunk, with the budget it holds until the backend takes it (and the signal then).
    Chunk(Bytes, Option<Held>, Taken),
    /// The body is complete.
    End,
}

/// Tells the call when the backend took a chunk (unless disarmed: a chunk that never got
/// on its way is counted by the call itself).
struct Taken(Option<mpsc::UnboundedSender<()>>);

impl Drop for Taken {
    fn drop(&mut self) {
        if let Some(tx) = self.0.take() {
            let _ = tx.send(());
        }
    }
}

/// The call's end of a body on its way.
pub(super) struct Feed {
    tx: Option<mpsc::Sender<Piece>>,
    taken_tx: mpsc::UnboundedSender<()>,
    /// One `()` for each chunk the backend took (or that was dropped unread).
    pub taken: mpsc::UnboundedReceiver<()>,
}

/// What became of a chunk pushed.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Pushed {
    /// On its way to the backend.
    Queued,
    /// The backend reads no more of the body (it answered, or broke off): dropped.
    Unread,
    /// More chunks wait than the window allows: the hub ignored its credit.
    OverWindow,
}

/// A body of at most `window` chunks waiting at once: the call's end and the backend's.
pub(super) fn open(window: usize) -> (Feed, RequestBody) {
    // One place beyond the window, for the `End`.
    let (tx, rx) = mpsc::channel::<Piece>(window.max(1) + 1);
    let (taken_tx, taken) = mpsc::unbounded_channel();
    let chunks: BodyStream = Box::pin(futures::stream::unfold(Some(rx), |rx| async move {
        let mut rx = rx?;
        match rx.recv().await {
            // The held budget and the taken signal go as the chunk is handed on.
            Some(Piece::Chunk(bytes, _held, _taken)) => Some((Ok(bytes), Some(rx))),
            Some(Piece::End) => None,
            None => Some((
                Err(std::io::Error::other(
                    "the request body broke off: the call ended before its end",
                )),
                None,
            )),
        }
    }));
    (
        Feed {
            tx: Some(tx),
            taken_tx,
            taken,
        },
        RequestBody::streamed(chunks),
    )
}

impl Feed {
    /// Passes `chunk` on to the backend, holding `held` until it is taken.
    pub fn push(&mut self, chunk: Bytes, held: Option<Held>) -> Pushed {
        let Some(tx) = &self.tx else {
            return Pushed::Unread;
        };
        let piece = Piece::Chunk(chunk, held, Taken(Some(self.taken_tx.clone())));
        match tx.try_send(piece) {
            Ok(()) => Pushed::Queued,
            Err(mpsc::error::TrySendError::Closed(piece)) => {
                disarm(piece);
                self.tx = None;
                Pushed::Unread
            }
            Err(mpsc::error::TrySendError::Full(piece)) => {
                disarm(piece);
                Pushed::OverWindow
            }
        }
    }

    /// The body is complete: the backend's stream ends after what it has not yet taken.
    pub fn end(&mut self) {
        if let Some(tx) = self.tx.take() {
            // The window keeps one place for the end.
            let _ = tx.try_send(Piece::End);
        }
    }
}

/// A piece that never got on its way tells no one.
fn disarm(piece: Piece) {
    if let Piece::Chunk(_, _, mut taken) = piece {
        taken.0 = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;

    #[tokio::test]
    async fn chunks_reach_the_backend_in_order_and_each_one_taken_is_told() {
        let (mut feed, body) = open(2);
        assert_eq!(feed.push(Bytes::from_static(b"ab"), None), Pushed::Queued);
        assert_eq!(feed.push(Bytes::from_static(b"cd"), None), Pushed::Queued);
        // The window is two chunks, and one place more for the end: past that the hub ignored
        // its credit (the call's own count catches it first).
        assert_eq!(feed.push(Bytes::from_static(b"ef"), None), Pushed::Queued);
        assert_eq!(
            feed.push(Bytes::from_static(b"gh"), None),
            Pushed::OverWindow
        );
        let mut chunks = body.into_stream();
        assert_eq!(&chunks.next().await.unwrap().unwrap()[..], b"ab");
        assert!(
            feed.taken.try_recv().is_ok(),
            "the first chunk taken is told"
        );
        assert!(feed.taken.try_recv().is_err(), "only the one taken");
        assert_eq!(&chunks.next().await.unwrap().unwrap()[..], b"cd");
        assert_eq!(&chunks.next().await.unwrap().unwrap()[..], b"ef");
        feed.end();
        assert!(chunks.next().await.is_none(), "a clean end after the End");
    }

    #[tokio::test]
    async fn a_call_that_stops_before_the_end_breaks_the_body_off() {
        let (mut feed, body) = open(4);
        feed.push(Bytes::from_static(b"ab"), None);
        drop(feed);
        let mut chunks = body.into_stream();
        assert_eq!(&chunks.next().await.unwrap().unwrap()[..], b"ab");
        let err = chunks.next().await.unwrap().unwrap_err();
        assert!(err.to_string().contains("broke off"), "{err}");
        assert!(chunks.next().await.is_none());
    }

    #[tokio::test]
    async fn chunks_for_a_backend_that_stopped_reading_are_dropped() {
        let (mut feed, body) = open(4);
        drop(body);
        assert_eq!(feed.push(Bytes::from_static(b"ab"), None), Pushed::Unread);
        assert_eq!(feed.push(Bytes::from_static(b"cd"), None), Pushed::Unread);
        assert!(
            feed.taken.try_recv().is_err(),
            "the call counts an unread chunk itself"
        );
    }
}
