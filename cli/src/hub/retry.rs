//! Calls to the hub: made once ([`Hub::call`]), or retried while the hub answers UNAVAILABLE
//! ([`Hub::idempotent`], [`Hub::delete`]) with [`Backoff`]'s waits, the exec plugin's token
//! refreshed once on UNAUTHENTICATED.

use super::Hub;
use anyhow::Result;
use std::error::Error as _;
use std::future::Future;
use std::time::{Duration, Instant};
use tonic::{Code, Response, Status};

/// How long an idempotent call the hub answers UNAVAILABLE is retried, from its first attempt
/// (`--retry-seconds`): longer than a JetStream election on a loaded machine.
pub const DEFAULT_RETRY_SECONDS: u64 = 60;
/// The wait before the first retry; each next wait doubles (0.5, 1, 2, 4 s…).
const FIRST_RETRY: Duration = Duration::from_millis(500);
/// The longest wait between two attempts, however long the budget.
const LONGEST_RETRY: Duration = Duration::from_secs(30);

impl Hub {
    /// Awaits one call to the hub, never repeated — for calls not safe to repeat (minting a join
    /// credential, `rollout undo`): its answer, or the failure as [`Hub::error`] words it.
    pub async fn call<T>(
        &self,
        call: impl Future<Output = Result<Response<T>, Status>>,
    ) -> Result<T> {
        call.await
            .map(Response::into_inner)
            .map_err(|status| self.error(status))
    }

    /// Makes an idempotent call — one whose repetition leaves the hub as one success would: a
    /// read, an apply of desired state, a label edit. When the hub itself answers UNAVAILABLE
    /// (its store did not answer in time), `call` is made again after [`Backoff`]'s waits, each
    /// retry said on stderr, for at most `--retry-seconds`; any other failure (a refusal, or a
    /// hub that cannot be reached) is not retried. The failure is worded as [`Hub::call`] words
    /// it, saying how long the CLI retried when it did.
    ///
    /// `call` makes a fresh call each time:
    ///
    /// ```ignore
    /// let work = hub.idempotent(async || hub.works().get_work(r.clone()).await).await?;
    /// ```
    pub async fn idempotent<T>(
        &self,
        call: impl AsyncFnMut() -> Result<Response<T>, Status>,
    ) -> Result<T> {
        let (answer, backoff) = self.attempts(call).await;
        answer.map_err(|status| self.gave_up(status, &backoff))
    }

    /// Deletes, retrying as [`Hub::idempotent`] does. A retry answered NOT_FOUND after an
    /// attempt answered UNAVAILABLE is [`Deleted::Earlier`]: that attempt may have landed, and
    /// either way the object is gone.
    pub async fn delete<T>(
        &self,
        call: impl AsyncFnMut() -> Result<Response<T>, Status>,
    ) -> Result<Deleted<T>> {
        match self.attempts(call).await {
            (Ok(answer), _) => Ok(Deleted::Now(answer)),
            (Err(status), backoff)
                if backoff.attempt() > 1
                    && status.code() == Code::NotFound
                    && status.source().is_none() =>
            {
                Ok(Deleted::Earlier)
            }
            (Err(status), backoff) => Err(self.gave_up(status, &backoff)),
        }
    }

    /// Makes `call` until it is answered with anything but the hub's UNAVAILABLE, or the budget
    /// is spent; the last answer, and the back-off (how many attempts were made).
    async fn attempts<T>(
        &self,
        mut call: impl AsyncFnMut() -> Result<Response<T>, Status>,
    ) -> (Result<T, Status>, Backoff) {
        let mut backoff = self.backoff();
        let mut refreshed = false;
        loop {
            match call().await {
                Ok(answer) => return (Ok(answer.into_inner()), backoff),
                // The plugin's token may have expired: run it again and retry once (the call
                // was refused before the hub did anything). client-go only refreshes for the
                // next request; a CLI makes one.
                Err(status) if status.code() == Code::Unauthenticated && !refreshed => {
                    refreshed = true;
                    match self.refresh().await {
                        Ok(true) => continue,
                        Ok(false) => return (Err(status), backoff),
                        Err(e) => {
                            return (
                                Err(Status::unauthenticated(format!("{status}; {e}"))),
                                backoff,
                            );
                        }
                    }
                }
                Err(status) => match backoff.after(&status) {
                    Some(wait) => tokio::time::sleep(wait).await,
                    None => return (Err(status), backoff),
                },
            }
        }
    }

    /// The failure of a call retried with `backoff`: as [`Hub::error`] words it, and, when the
    /// hub was still unavailable after retries, for how long the CLI tried.
    fn gave_up(&self, status: Status, backoff: &Backoff) -> anyhow::Error {
        let still_unavailable = Backoff::retries(&status) && backoff.attempt() > 1;
        let e = self.error(status);
        if still_unavailable {
            e.context(backoff.gave_up())
        } else {
            e
        }
    }
}

/// What a retried delete came to.
#[derive(Debug)]
pub enum Deleted<T> {
    /// This attempt deleted it; the hub's answer.
    Now(T),
    /// A retry found it gone after an attempt the hub answered UNAVAILABLE: that attempt had
    /// landed — or the object was already gone (deleted meanwhile, or never there: the hub may
    /// not have looked before it was unavailable).
    Earlier,
}

impl<T> Deleted<T> {
    /// The hub's answer passed through `f`.
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Deleted<U> {
        match self {
            Self::Now(answer) => Deleted::Now(f(answer)),
            Self::Earlier => Deleted::Earlier,
        }
    }
}

/// The waits between attempts of an idempotent call the hub answered UNAVAILABLE: 0.5, 1, 2,
/// 4 s…, each at most [`LONGEST_RETRY`], while a budget from the first attempt lasts (the last
/// wait is cut to what is left of it). Every retry is said on stderr in one line:
/// `hub unavailable (MESSAGE); retrying in 2 s (attempt 4)`.
#[derive(Debug)]
pub struct Backoff {
    budget: Duration,
    started: Instant,
    next: Duration,
    attempt: u32,
}

impl Backoff {
    /// A back-off for at most `budget` from now (zero: never retry), at its first attempt.
    pub fn new(budget: Duration) -> Self {
        Self {
            budget,
            started: Instant::now(),
            next: FIRST_RETRY,
            attempt: 1,
        }
    }

    /// The attempt being made: 1 for the first.
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    /// Whether `status` is the hub's own UNAVAILABLE, the answer to retry. A status with a
    /// source was made on this side from a transport failure — "cannot reach the hub", which
    /// the commands handle themselves (`apply` stops sending) — and is not retried.
    pub fn retries(status: &Status) -> bool {
        status.code() == Code::Unavailable && status.source().is_none()
    }

    /// After an attempt failed with `status`: how long to wait before the next one (the retry
    /// said on stderr), or `None` when `status` is not the hub's UNAVAILABLE or the budget is
    /// spent.
    pub fn after(&mut self, status: &Status) -> Option<Duration> {
        if !Self::retries(status) {
            return None;
        }
        self.unavailable(status.message())
    }

    /// After the hub answered UNAVAILABLE with `message` (also as one answer of a batch): how
    /// long to wait before the next attempt (the retry said on stderr), or `None` when the
    /// budget is spent.
    pub fn unavailable(&mut self, message: &str) -> Option<Duration> {
        let wait = self.wait()?;
        eprintln!("{}", retry_line(message, wait, self.attempt));
        Some(wait)
    }

    /// The next wait, counting the attempt it leads to; `None` when the budget is spent.
    fn wait(&mut self) -> Option<Duration> {
        let left = self.budget.saturating_sub(self.started.elapsed());
        if left.is_zero() {
            return None;
        }
        let wait = self.next.min(left);
        self.next = (self.next * 2).min(LONGEST_RETRY);
        self.attempt += 1;
        Some(wait)
    }

    /// "the hub was still unavailable after N attempts in S s (--retry-seconds)".
    pub fn gave_up(&self) -> String {
        format!(
            "the hub was still unavailable after {} attempts in {} (--retry-seconds {})",
            self.attempt,
            seconds(self.started.elapsed()),
            self.budget.as_secs()
        )
    }
}

/// `hub unavailable (MESSAGE); retrying in 2 s (attempt 4)`.
fn retry_line(message: &str, wait: Duration, attempt: u32) -> String {
    format!(
        "hub unavailable ({message}); retrying in {} (attempt {attempt})",
        seconds(wait)
    )
}

/// A duration in seconds to a tenth: `0.5 s`, `2 s`, `12.3 s`.
fn seconds(d: Duration) -> String {
    let tenths = (d.as_millis() + 50) / 100;
    if tenths.is_multiple_of(10) {
        format!("{} s", tenths / 10)
    } else {
        format!("{}.{} s", tenths / 10, tenths % 10)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_wait_half_a_second_then_double_up_to_thirty() {
        let mut backoff = Backoff::new(Duration::from_secs(3600));
        let waits: Vec<f64> = (0..8)
            .map(|_| backoff.wait().expect("within the budget").as_secs_f64())
            .collect();
        assert_eq!(waits, [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]);
        assert_eq!(backoff.attempt(), 9);
    }

    #[test]
    fn a_spent_budget_or_none_retries_nothing() {
        let mut none = Backoff::new(Duration::ZERO);
        assert_eq!(none.unavailable("electing"), None);
        assert_eq!(none.attempt(), 1);
        let mut spent = Backoff::new(Duration::from_secs(5));
        spent.started -= Duration::from_secs(5);
        assert_eq!(spent.wait(), None);
        // The last wait is cut to what is left of the budget.
        let mut short = Backoff::new(Duration::from_secs(5));
        short.started -= Duration::from_millis(4700);
        let wait = short.wait().expect("0.3 s left");
        assert!(wait <= Duration::from_millis(300), "{wait:?}");
    }

    #[test]
    fn only_the_hubs_own_unavailable_is_retried() {
        assert!(Backoff::retries(&Status::unavailable(
            "storage unavailable — retry"
        )));
        assert!(!Backoff::retries(&Status::not_found("gone")));
        let refused = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
        let mut transport = Status::unavailable("tcp connect error");
        transport.set_source(std::sync::Arc::new(refused));
        assert!(
            !Backoff::retries(&transport),
            "a transport failure is not the hub's answer"
        );
    }

    #[test]
    fn a_retry_is_said_in_one_line_with_its_wait_and_attempt() {
        assert_eq!(
            retry_line(
                "kv works/c1.w: the store did not answer — retry",
                Duration::from_millis(500),
                2
            ),
            "hub unavailable (kv works/c1.w: the store did not answer — retry); retrying in 0.5 s (attempt 2)"
        );
        assert_eq!(seconds(Duration::from_secs(2)), "2 s");
        assert_eq!(seconds(Duration::from_millis(12_340)), "12.3 s");
    }
}
