//! What one resolution may spend, so that a hostile template fails with an error instead of
//! aborting, exhausting or holding the process that resolves it (the agent, and the hub for
//! every cluster). Go's `text/template` bounds none of these; each is Flotilla's, documented
//! in docs/policies.md:
//!
//! - output: [`Output`] refuses to grow past [`MAX_OUTPUT`] while it is written;
//! - values: no function (but `lookup`, whose result is the cluster's own data) returns a
//!   value heavier than [`MAX_VALUE`] ([`weigh`] stops counting there), and the values one
//!   execution's functions return weigh at most [`MAX_PRODUCED`] together;
//! - time: every function call checks the resolution's [`Deadline`]: [`MAX_TIME`] of the
//!   resolving thread's CPU time (what the template computed, not how long a loaded process
//!   left it waiting: 5,000 simulated agents in one process waited past a wall-clock bound and
//!   reported a false template error);
//! - steps: `{{define}}`, `{{template}}` and `{{block}}` are refused (recursion without any
//!   call), and the `{{range}}` budget shrinks as the largest loop body grows
//!   ([`range_budget`]), so that the nodes a loop walks stay under [`MAX_STEPS`].

use gotmpl::Value;
use std::time::Duration;

/// The largest output an execution may write (bytes).
pub const MAX_OUTPUT: usize = 1 << 20;
/// The heaviest value a function may return (bytes, as [`weigh`] counts them).
pub const MAX_VALUE: usize = MAX_OUTPUT;
/// How much the values returned by one execution's functions may weigh together.
pub const MAX_PRODUCED: usize = 64 << 20;
/// How much CPU time one resolution (every template of a policy, every round) may take.
pub const MAX_TIME: Duration = Duration::from_secs(5);
/// How many `{{range}}` iterations one execution may make when its loop bodies are small.
pub const MAX_RANGE_ITERS: u64 = 100_000;
/// How many tree nodes `{{range}}` loops may walk in one execution (iterations × the largest
/// loop body's nodes).
pub const MAX_STEPS: u64 = 10_000_000;
/// What a list's or map's element weighs besides its own text.
const SLOT: usize = 8;

/// What a value weighs: the bytes of its strings and a slot per element, counted until
/// `limit` is passed (so a value shared many times over in a list of lists is never walked
/// whole).
pub fn weigh(v: &Value, limit: usize) -> usize {
    let mut total = 0usize;
    let mut stack: Vec<&Value> = vec![v];
    while let Some(v) = stack.pop() {
        total = total.saturating_add(match v {
            Value::String(s) => s.len(),
            Value::List(l) => {
                stack.extend(l.iter());
                SLOT.saturating_mul(l.len())
            }
            Value::Map(m) => {
                for (k, v) in m.iter() {
                    total = total.saturating_add(k.len());
                    stack.push(v);
                }
                SLOT.saturating_mul(m.len())
            }
            _ => 0,
        });
        if total > limit {
            return total;
        }
    }
    total
}

/// The CPU time the calling thread has used so far.
pub fn thread_cpu() -> Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    Duration::new(
        u64::try_from(t.tv_sec).unwrap_or(0),
        u32::try_from(t.tv_nsec).unwrap_or(0),
    )
}

/// When a resolution must stop, in the CPU time of the thread that runs it: made on that
/// thread ([`Deadline::after`]) and checked on it (a resolution is synchronous).
#[derive(Debug, Clone, Copy)]
pub struct Deadline(Duration);

impl Deadline {
    /// `budget` more of this thread's CPU time.
    pub fn after(budget: Duration) -> Self {
        Deadline(thread_cpu() + budget)
    }

    /// Whether this thread has used its budget.
    pub fn passed(&self) -> bool {
        thread_cpu() >= self.0
    }
}

/// What the functions of one resolution have spent.
#[derive(Debug, Clone)]
pub struct Spent {
    /// When the resolution must stop.
    pub deadline: Deadline,
    /// The weight of the values returned so far.
    pub produced: usize,
}

/// Why a function call went over a bound (the function's error text).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Over {
    /// The deadline passed.
    #[error("the template ran longer than {}s (Flotilla's bound)", MAX_TIME.as_secs())]
    Time,
    /// One value too heavy.
    #[error("the result is larger than {MAX_VALUE} bytes (Flotilla's bound)")]
    Value,
    /// The arguments together too heavy for a function that joins them.
    #[error("the arguments are larger than {MAX_VALUE} bytes together (Flotilla's bound)")]
    Arguments,
    /// All values together too heavy.
    #[error("the template's functions produced more than {} MiB (Flotilla's bound)", MAX_PRODUCED >> 20)]
    Produced,
}

impl Spent {
    /// A budget whose deadline is `deadline`.
    pub fn until(deadline: Deadline) -> Self {
        Spent {
            deadline,
            produced: 0,
        }
    }

    /// Checked before every call.
    pub fn before(&self) -> Result<(), Over> {
        if self.deadline.passed() {
            return Err(Over::Time);
        }
        Ok(())
    }

    /// Charges a returned value.
    pub fn charge(&mut self, v: &Value) -> Result<(), Over> {
        let w = weigh(v, MAX_VALUE);
        if w > MAX_VALUE {
            return Err(Over::Value);
        }
        self.produced = self.produced.saturating_add(w);
        if self.produced > MAX_PRODUCED {
            return Err(Over::Produced);
        }
        Ok(())
    }
}

/// Refuses arguments that together weigh more than [`MAX_VALUE`], for the functions whose
/// result holds all of them (`cat`, `list`, `printf`, …).
pub fn joined(args: &[Value]) -> Result<(), Over> {
    let mut total = 0usize;
    for a in args {
        total = total.saturating_add(weigh(a, MAX_VALUE));
        if total > MAX_VALUE {
            return Err(Over::Arguments);
        }
    }
    Ok(())
}

/// Refuses a result of `len` bytes before it is built.
pub fn room(len: usize) -> Result<(), Over> {
    if len > MAX_VALUE {
        Err(Over::Value)
    } else {
        Ok(())
    }
}

/// The `{{range}}` iterations an execution may make when its largest loop body has `nodes`
/// nodes.
pub fn range_budget(nodes: u64) -> u64 {
    (MAX_STEPS / nodes.max(1)).clamp(1, MAX_RANGE_ITERS)
}

/// The output of one execution, refusing to grow past [`MAX_OUTPUT`].
#[derive(Debug, Default)]
pub struct Output {
    /// What was written.
    pub text: String,
    /// Whether a write was refused.
    pub overflowed: bool,
}

impl std::fmt::Write for Output {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        if self.text.len().saturating_add(s.len()) > MAX_OUTPUT {
            self.overflowed = true;
            return Err(std::fmt::Error);
        }
        self.text.push_str(s);
        Ok(())
    }
}
