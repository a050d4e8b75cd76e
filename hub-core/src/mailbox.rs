//! A bounded mailbox (many senders, one receiver) that holds no buffer while it is empty.
//!
//! Every cluster has an actor and every actor a mailbox; at 100,000 clusters almost all of them
//! are empty almost all the time. tokio's `mpsc::channel` allocates its first block of 32 slots
//! when it is made (32 × the message size, about 3 KB per cluster here, 12 % of the hub's heap
//! in a fanout by `heaptrack`). This one keeps its messages in a `VecDeque` that is allocated on
//! the first send and freed again once a burst has drained, so an idle actor's mailbox is the
//! shared header alone (about 150 bytes).
//!
//! The semantics are tokio's: `send` waits for room and fails once the receiver is gone (the
//! message comes back); `try_send` fails at once with `Full` or `Closed`; `recv` answers `None`
//! once every sender is gone and the mailbox is empty, and is cancel-safe (a dropped `recv`
//! takes nothing). When the receiver goes, what was queued is dropped, so a caller waiting on an
//! answer carried in a queued message sees its reply channel close.
//!
//! A receiver with nothing to do can park in its mailbox instead of waiting in a task
//! ([`Parker::park`]): the owner of the receiver is kept in the mailbox, and the next message
//! takes it out and wakes it ([`Parked::wake`]). The check that nothing is queued and the
//! parking happen under the queue's lock, as does every push, so no message arrives unseen in
//! between. A parked owner whose last sender leaves is dropped: nothing can reach it any more.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::mpsc::error::{SendError, TrySendError};
use tokio::sync::{Notify, Semaphore, TryAcquireError};

/// Queued messages beyond which a drained mailbox frees its buffer; below, it keeps it for the
/// next message (an actor asked one thing at a time allocates once).
const KEEP_CAPACITY: usize = 4;

/// A bounded mailbox of `capacity` messages (at least one).
pub fn channel<T>(capacity: usize) -> (Sender<T>, Receiver<T>) {
    let shared = Arc::new(Shared {
        queue: Mutex::new(Queue {
            items: VecDeque::new(),
            closed: false,
            parked: None,
        }),
        room: Semaphore::new(capacity.max(1)),
        ready: Notify::new(),
        senders: AtomicUsize::new(1),
    });
    (
        Sender {
            shared: shared.clone(),
        },
        Receiver { shared },
    )
}

struct Shared<T> {
    queue: Mutex<Queue<T>>,
    /// One permit per free slot.
    room: Semaphore,
    /// Told of every message and of the last sender leaving.
    ready: Notify,
    senders: AtomicUsize,
}

struct Queue<T> {
    items: VecDeque<T>,
    /// The receiver is gone.
    closed: bool,
    /// The receiver's owner, parked until the next message.
    parked: Option<Box<dyn Parked>>,
}

/// What parks in a mailbox: the owner of its receiver, with nothing to do until a message.
pub trait Parked: Send + 'static {
    /// Called once, by the sender whose message found it parked, outside the mailbox's lock
    /// and inside the sender's tokio runtime: the owner goes back to work (spawns its task).
    fn wake(self: Box<Self>);
}

impl<T> Shared<T> {
    fn lock(&self) -> std::sync::MutexGuard<'_, Queue<T>> {
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues `msg` for which a slot was taken; gives it back when the receiver is gone.
    fn push(&self, msg: T) -> Result<(), T> {
        let mut q = self.lock();
        if q.closed {
            return Err(msg);
        }
        q.items.push_back(msg);
        let parked = q.parked.take();
        drop(q);
        self.ready.notify_one();
        if let Some(owner) = parked {
            owner.wake();
        }
        Ok(())
    }
}

/// The sending side; cheap to clone.
pub struct Sender<T> {
    shared: Arc<Shared<T>>,
}

impl<T> Clone for Sender<T> {
    fn clone(&self) -> Self {
        self.shared.senders.fetch_add(1, Ordering::Relaxed);
        Self {
            shared: self.shared.clone(),
        }
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        if self.shared.senders.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.shared.ready.notify_one();
            // Nothing can wake a parked owner now; it holds the receiver, which holds this
            // mailbox: dropped here (outside the lock), or the two would keep each other.
            let parked = self.shared.lock().parked.take();
            drop(parked);
        }
    }
}

impl<T> std::fmt::Debug for Sender<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("mailbox::Sender")
            .field("queued", &self.shared.lock().items.len())
            .finish()
    }
}

impl<T> Sender<T> {
    /// Queues `msg`, waiting for room; the message comes back when the receiver is gone.
    pub async fn send(&self, msg: T) -> Result<(), SendError<T>> {
        match self.shared.room.acquire().await {
            Ok(permit) => permit.forget(),
            Err(_) => return Err(SendError(msg)),
        }
        self.shared.push(msg).map_err(SendError)
    }

    /// Queues `msg` if there is room now.
    pub fn try_send(&self, msg: T) -> Result<(), TrySendError<T>> {
        match self.shared.room.try_acquire() {
            Ok(permit) => permit.forget(),
            Err(TryAcquireError::NoPermits) => return Err(TrySendError::Full(msg)),
            Err(TryAcquireError::Closed) => return Err(TrySendError::Closed(msg)),
        }
        self.shared.push(msg).map_err(TrySendError::Closed)
    }

    /// Whether the receiver is gone.
    pub fn is_closed(&self) -> bool {
        self.shared.room.is_closed()
    }
}

/// The receiving side.
pub struct Receiver<T> {
    shared: Arc<Shared<T>>,
}

impl<T> Receiver<T> {
    /// The next message; `None` once every sender is gone and nothing is queued. Cancel-safe.
    pub async fn recv(&mut self) -> Option<T> {
        loop {
            {
                let mut q = self.shared.lock();
                if let Some(msg) = q.items.pop_front() {
                    if q.items.is_empty() && q.items.capacity() > KEEP_CAPACITY {
                        q.items = VecDeque::new();
                    }
                    drop(q);
                    self.shared.room.add_permits(1);
                    return Some(msg);
                }
            }
            if self.shared.senders.load(Ordering::Acquire) == 0 {
                // A message queued by the last sender before it left is still taken.
                return self.shared.lock().items.pop_front();
            }
            // A message or a departure between the check and here left a stored wake-up.
            self.shared.ready.notified().await;
        }
    }

    /// Where the receiver's owner parks (it moves the receiver along with itself).
    pub fn parker(&self) -> Parker<T> {
        Parker {
            shared: self.shared.clone(),
        }
    }

    /// Messages queued now.
    pub fn len(&self) -> usize {
        self.shared.lock().items.len()
    }

    /// Whether nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Parks the owner of a mailbox's receiver ([`Receiver::parker`]).
pub struct Parker<T> {
    shared: Arc<Shared<T>>,
}

impl<T> Parker<T> {
    /// Parks `owner` (which holds the receiver) until the next message, if nothing is queued
    /// and a sender is left; otherwise gives it back to go on.
    pub fn park<P: Parked>(self, owner: Box<P>) -> Result<(), Box<P>> {
        let mut q = self.shared.lock();
        if !q.items.is_empty() || q.closed || self.shared.senders.load(Ordering::Acquire) == 0 {
            return Err(owner);
        }
        q.parked = Some(owner);
        Ok(())
    }
}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        self.shared.room.close();
        let queued = {
            let mut q = self.shared.lock();
            q.closed = true;
            std::mem::take(&mut q.items)
        };
        // Dropped outside the lock: a message's own drop may reach for this mailbox.
        drop(queued);
    }
}

#[cfg(test)]
mod tests;
