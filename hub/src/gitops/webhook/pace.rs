//! How fast a webhook's body must come (pure: the caller measures the time). GitHub, GitLab and
//! Gitea post a body at once, in a few milliseconds; a sender that trickles one holds a place
//! among the deliveries in flight while it does (session-16 review A2). So past [`GRACE`] the
//! bytes received since the headers must keep up with [`FLOOR`] a second on average, and the
//! whole body must come within [`BODY_TIME`]. A body of up to three times `FLOOR` bytes
//! (150 KiB: a push of many commits) has the grace to arrive whatever its pace — 3 s, so a
//! small body held up by a lost segment or two on a long path still comes (session-17 review
//! L6); a sender that holds places by re-posting is stopped by the pool's penalty, not by a
//! short grace. A 1 MiB body must average 205 KiB a second to arrive within `BODY_TIME` at
//! all, so the floor — a quarter of that — trips no sender at a steady pace that could have
//! made it.

use super::MAX_BODY;
use std::time::Duration;

/// How long a sender has to send its whole body.
pub const BODY_TIME: Duration = Duration::from_secs(5);
/// How long a body may take whatever its pace.
pub const GRACE: Duration = Duration::from_secs(3);
/// Bytes a second a body must average past [`GRACE`]: a quarter of [`MAX_BODY`] within
/// [`BODY_TIME`] (52,428).
pub const FLOOR: u64 = MAX_BODY as u64 / BODY_TIME.as_secs() / 4;

/// How long after its headers a body that has `received` bytes so far may wait for more: until
/// it falls under [`FLOOR`] on average, at least [`GRACE`], at most [`BODY_TIME`].
pub fn deadline(received: u64) -> Duration {
    let kept_up = Duration::from_secs_f64(received as f64 / FLOOR as f64);
    kept_up.clamp(GRACE, BODY_TIME)
}

/// What a sender whose body did not come by its [`deadline`] is told: `received` bytes after
/// `elapsed`.
pub fn too_slow(received: u64, elapsed: Duration) -> String {
    if elapsed >= BODY_TIME {
        format!(
            "the body took longer than {} s ({received} bytes came); a webhook's body is sent at \
             once",
            BODY_TIME.as_secs()
        )
    } else {
        format!(
            "the body came slower than {} KiB a second ({received} bytes in {:.1} s); a \
             webhook's body is sent at once",
            FLOOR / 1024,
            elapsed.as_secs_f64()
        )
    }
}
