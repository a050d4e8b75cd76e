//! The functions templates call: OCM's ([`ocm`]) and the sprig subset ([`sprig`]), with the
//! per-execution state they share and Go's argument checks.
//!
//! `gotmpl` binds functions when a template is parsed and wants them `'static`, so every
//! function captures one [`Shared`] cell that holds what changes per execution — the
//! [`Source`], the reads and pending queries, and the first failure with the name of the
//! function that failed (Go's error names the call; `gotmpl`'s does not).

pub mod builtin;
pub mod ocm;
pub mod sprig;

use super::budget::{self, Over, Spent};
use super::source::{Answer, Query, Source};
use gotmpl::{FuncMap, TemplateError as GoError, Value};
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, MutexGuard};

/// Which side resolves: hub templates (`{{hub … hub}}`) or managed-cluster templates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mode {
    /// The hub: lookups restricted to the policy's namespace.
    Hub {
        /// The root policy's namespace.
        namespace: String,
    },
    /// The managed cluster.
    Spoke,
}

/// Seals a value for the one cluster a hub template is resolved for (`protect`, and every
/// value a hub template reads from a Secret). The hub's seals to the cluster's agent key.
pub trait Protect: Send + Sync {
    /// `$ocm_encrypted:…` standing for `plain`, or why it cannot be sealed.
    fn protect(&self, plain: &str) -> Result<String, String>;
}

/// Why a function call failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// The function.
    pub function: String,
    /// Its error (or Go's argument error).
    pub message: String,
    /// The function's own error (Go: `error calling <f>: …`), not an argument mismatch.
    pub calling: bool,
}

/// The state of one execution.
pub struct Cell {
    source: Arc<dyn Source>,
    mode: Mode,
    protect: Option<Arc<dyn Protect>>,
    /// Queries asked but not answered yet.
    pub pending: BTreeSet<Query>,
    /// Queries answered (what the resolution read).
    pub reads: BTreeSet<Query>,
    /// The first failure.
    pub failure: Option<Failure>,
    /// Whether a Secret was read.
    pub sensitive: bool,
    /// What the execution's functions have spent.
    pub spent: Spent,
}

/// The cell every function of one template captures.
#[derive(Clone)]
pub struct Shared(Arc<Mutex<Cell>>);

impl Shared {
    /// A cell reading from `source`, sealing with `protect` (hub only), its functions failing
    /// once `deadline` has passed.
    pub fn new(
        source: Arc<dyn Source>,
        mode: Mode,
        protect: Option<Arc<dyn Protect>>,
        deadline: crate::policy::template::budget::Deadline,
    ) -> Self {
        Shared(Arc::new(Mutex::new(Cell {
            source,
            mode,
            protect,
            pending: BTreeSet::new(),
            reads: BTreeSet::new(),
            failure: None,
            sensitive: false,
            spent: Spent::until(deadline),
        })))
    }

    /// The cell (a poisoned lock is taken over: the cell holds plain data).
    pub fn lock(&self) -> MutexGuard<'_, Cell> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// What a function sees besides its arguments.
pub struct Call<'a> {
    cell: &'a Shared,
}

impl Call<'_> {
    /// The answer to `query`; `None` (and the query pending) when it has not been fetched.
    pub fn fetch(&self, query: Query) -> Option<Answer> {
        let mut cell = self.cell.lock();
        match cell.source.answer(&query) {
            Some(a) => {
                cell.reads.insert(query);
                Some(a)
            }
            None => {
                cell.pending.insert(query);
                None
            }
        }
    }

    /// The side resolving.
    pub fn mode(&self) -> Mode {
        self.cell.lock().mode.clone()
    }

    /// `plain` sealed for the cluster (`""` stays `""`, as go-template-utils has it).
    pub fn protect(&self, plain: &str) -> Result<String, Fail> {
        if plain.is_empty() {
            return Ok(String::new());
        }
        let (mode, protect) = {
            let cell = self.cell.lock();
            (cell.mode.clone(), cell.protect.clone())
        };
        match (mode, protect) {
            (Mode::Spoke, _) => Err(Fail::Calling(
                "the protect template function is not enabled in this mode".into(),
            )),
            (Mode::Hub { .. }, Some(p)) => p.protect(plain).map_err(Fail::Calling),
            (Mode::Hub { .. }, None) => Err(Fail::Calling(
                "the protect template function has no cluster to seal for here".into(),
            )),
        }
    }

    /// Marks the result as read from a Secret.
    pub fn sensitive(&self) {
        self.cell.lock().sensitive = true;
    }
}

/// A function's failure before it is given Go's shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fail {
    /// The function returned an error (`error calling f: …`).
    Calling(String),
    /// The arguments do not fit its signature (Go's reflection errors).
    Args(String),
}

impl From<Over> for Fail {
    fn from(o: Over) -> Self {
        Fail::Calling(o.to_string())
    }
}

/// The functions whose result holds all their arguments: refused before they run when the
/// arguments together are too heavy.
const JOINING: &[&str] = &[
    "cat", "quote", "squote", "list", "append", "prepend", "concat", "dict",
];
/// The functions whose result is the cluster's (or the hub's) own data, not built by the
/// template: not weighed.
const READING: &[&str] = &["lookup"];

/// A function as written here.
pub type Func = fn(&Call<'_>, &[Value]) -> Result<Value, Fail>;

/// Every function name Flotilla's templates know besides Go's built-ins, for the docs and the
/// undefined-function check.
pub fn names() -> Vec<&'static str> {
    let mut out: Vec<&'static str> = ocm::FUNCS
        .iter()
        .chain(sprig::FUNCS)
        .map(|(n, _)| *n)
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// The function map of one template, every function reporting into `cell`.
pub fn func_map(cell: &Shared) -> FuncMap {
    let mut map = FuncMap::new();
    // OCM's definitions win over sprig's of the same name (`indent`, `b64enc`, …).
    for (name, f) in sprig::FUNCS.iter().chain(ocm::FUNCS).chain(builtin::FUNCS) {
        let cell = cell.clone();
        let name: &'static str = name;
        let f: Func = *f;
        map.insert(
            name.to_string(),
            Arc::new(move |args: &[Value]| {
                let call = Call { cell: &cell };
                bounded(&call, name, f, args).map_err(|fail| {
                    let (message, calling) = match fail {
                        Fail::Calling(m) => (m, true),
                        Fail::Args(m) => (m, false),
                    };
                    let mut c = cell.lock();
                    if c.failure.is_none() {
                        c.failure = Some(Failure {
                            function: name.to_string(),
                            message: message.clone(),
                            calling,
                        });
                    }
                    GoError::Exec(message)
                })
            }),
        );
    }
    map
}

/// One call within the execution's budget: the deadline checked first, joining functions'
/// arguments weighed before they run, every result (but what `lookup` read) weighed after.
fn bounded(call: &Call<'_>, name: &str, f: Func, args: &[Value]) -> Result<Value, Fail> {
    call.cell.lock().spent.before()?;
    if JOINING.contains(&name) {
        budget::joined(args)?;
    }
    let out = f(call, args)?;
    if !READING.contains(&name) {
        call.cell.lock().spent.charge(&out)?;
    }
    Ok(out)
}

/// Go's name of a value's dynamic type, as its reflection errors print it.
pub fn go_type(v: &Value) -> &'static str {
    match v {
        Value::Nil => "<nil>",
        Value::Bool(_) => "bool",
        Value::Int(_) => "int",
        Value::Uint(_) => "uint64",
        Value::Float(_) => "float64",
        Value::String(_) => "string",
        Value::List(_) => "[]interface {}",
        Value::Map(_) => "map[string]interface {}",
        Value::Function(_) => "func",
    }
}

/// Go's check of a fixed argument count.
pub fn arity(name: &str, args: &[Value], want: usize) -> Result<(), Fail> {
    if args.len() == want {
        Ok(())
    } else {
        Err(Fail::Args(format!(
            "wrong number of args for {name}: want {want} got {}",
            args.len()
        )))
    }
}

/// Go's check of a variadic function's fixed arguments.
pub fn at_least(name: &str, args: &[Value], want: usize) -> Result<(), Fail> {
    if args.len() >= want {
        Ok(())
    } else {
        Err(Fail::Args(format!(
            "wrong number of args for {name}: want at least {want} got {}",
            args.len()
        )))
    }
}

/// A `string` parameter.
pub fn str_arg(args: &[Value], i: usize) -> Result<String, Fail> {
    match args.get(i) {
        Some(Value::String(s)) => Ok(s.to_string()),
        Some(Value::Nil) | None => Err(Fail::Args("invalid value; expected string".into())),
        Some(other) => Err(Fail::Args(format!(
            "wrong type for value; expected string; got {}",
            go_type(other)
        ))),
    }
}

/// An `int` parameter.
pub fn int_arg(args: &[Value], i: usize) -> Result<i64, Fail> {
    match args.get(i) {
        Some(Value::Int(n)) => Ok(*n),
        Some(Value::Uint(n)) => {
            i64::try_from(*n).map_err(|_| Fail::Args(format!("{n} overflows int")))
        }
        Some(Value::Nil) | None => Err(Fail::Args("invalid value; expected int".into())),
        Some(other) => Err(Fail::Args(format!(
            "wrong type for value; expected int; got {}",
            go_type(other)
        ))),
    }
}

/// sprig's `strval`: strings as they are, anything else as Go's `%v` prints it.
pub fn strval(v: &Value) -> String {
    match v {
        Value::String(s) => s.to_string(),
        Value::Nil => "<nil>".into(),
        other => other.to_string(),
    }
}
