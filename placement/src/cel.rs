//! CEL cluster selectors: `spec.predicates[].requiredClusterSelector.celSelector.celExpressions`.
//!
//! As OCM: a predicate matches a cluster when its label selector, its claim selector and *every*
//! CEL expression hold; an expression that fails at run time (a missing key, a missing
//! AddOnPlacementScore, a wrong type) or yields anything but `true` rejects the cluster; an
//! expression that does not compile makes the placement misconfigured, with the compile error.
//!
//! What an expression sees:
//!
//! - `managedCluster`: `{metadata: {name, labels}, status: {version: {kubernetes},
//!   clusterClaims: [{name, value}]}}`, the parts of the ManagedCluster the scheduler keeps
//!   (OCM passes the whole object; allocatable, conditions and taints are not here).
//! - `managedCluster.scores("<AddOnPlacementScore name>")`: the object's `status.scores` as a
//!   list of `{name, value}`, as OCM's extension (every entry, `validUntil` not looked at; an
//!   error, so a rejected cluster, when the cluster has no such object).
//! - CEL's standard library (`matches` with the `regex` crate's syntax, macros `all`, `exists`,
//!   `exists_one`, `map`, `filter`). OCM's Kubernetes extensions (`semver`, `quantity`, the
//!   `lists` and `strings` libraries) are not available: an expression using them compiles but
//!   never matches.
//!
//! Compiling happens once per placement spec: [`CelExpressions`] keeps the compiled programs
//! with the spec, and clones share them. Besides syntax, compiling refuses an identifier other
//! than `managedCluster` and a comprehension variable (OCM's type checker does the same), an
//! expression longer than [`MAX_EXPRESSION_LEN`], and one whose estimated cost exceeds
//! [`MAX_COST`]: every node costs 1 and each comprehension runs its body
//! [`ASSUMED_ITERATIONS`] times, so one loop over a list is fine and loops nested three deep are
//! refused. Evaluation never loops otherwise (CEL has no recursion), so the estimate bounds the
//! work per cluster.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::sync::{Arc, OnceLock};

use cel::common::ast::{EntryExpr, Expr, IdedEntryExpr, IdedExpr, LiteralValue};
use cel::extractors::This;
use cel::{Context, Env, ExecutionError, Program};

/// A CEL value (the `cel` crate's), as [`cluster_value`] and [`scores_value`] build them.
pub use cel::Value;
use serde::{Deserialize, Serialize};

use crate::cluster::Cluster;
use crate::score::AddOnPlacementScore;

/// Longest expression accepted, in bytes.
pub const MAX_EXPRESSION_LEN: usize = 10 * 1024;
/// How many times the cost estimate runs a comprehension's body (a cluster has at most 24
/// claims, and labels and score entries are usually fewer than this).
pub const ASSUMED_ITERATIONS: u64 = 100;
/// Highest estimated cost of one expression (the number Kubernetes uses as its per-call CEL
/// cost limit).
pub const MAX_COST: u64 = 1_000_000;
/// The variable holding the cluster.
pub const CLUSTER_VARIABLE: &str = "managedCluster";
/// OCM's extension function returning a cluster's AddOnPlacementScore entries.
pub const SCORES_FUNCTION: &str = "scores";

/// The environment every expression is compiled and run with: CEL's standard library.
/// The CEL environment (the standard library) every Flotilla expression runs in: execute a
/// program from [`compile_checked`] in `Context::with_env(env().clone())`.
pub fn env() -> &'static Arc<Env> {
    static ENV: OnceLock<Arc<Env>> = OnceLock::new();
    ENV.get_or_init(|| Arc::new(Env::stdlib()))
}

/// Why one expression was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CelError {
    /// Index in `celExpressions`.
    pub index: usize,
    /// What is wrong.
    pub message: String,
}

/// Which AddOnPlacementScores the expressions read through `scores(..)`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum ScoreUse {
    /// None.
    #[default]
    Nothing,
    /// These, named by string literals.
    Named(BTreeSet<String>),
    /// A name computed at run time: any of them.
    Any,
}

impl ScoreUse {
    /// Adds what `other` reads.
    pub fn add(&mut self, other: ScoreUse) {
        *self = match (std::mem::take(self), other) {
            (ScoreUse::Any, _) | (_, ScoreUse::Any) => ScoreUse::Any,
            (ScoreUse::Nothing, x) | (x, ScoreUse::Nothing) => x,
            (ScoreUse::Named(mut a), ScoreUse::Named(b)) => {
                a.extend(b);
                ScoreUse::Named(a)
            }
        }
    }

    /// Whether a change to the AddOnPlacementScore `resource_name` can matter.
    pub fn reads(&self, resource_name: &str) -> bool {
        match self {
            ScoreUse::Nothing => false,
            ScoreUse::Named(names) => names.contains(resource_name),
            ScoreUse::Any => true,
        }
    }
}

/// Compiled expressions, ready to run against clusters.
#[derive(Debug)]
pub struct CompiledCel {
    programs: Vec<Program>,
    scores: ScoreUse,
}

impl CompiledCel {
    /// The AddOnPlacementScores the expressions read.
    pub fn score_use(&self) -> &ScoreUse {
        &self.scores
    }
}

type Compiled = Result<Arc<CompiledCel>, Vec<CelError>>;

/// `celSelector.celExpressions`: the source text, and the programs compiled from it on first
/// use, shared by every clone (so a placement spec compiles once however often it is scheduled).
#[derive(Clone, Default)]
pub struct CelExpressions {
    expressions: Vec<String>,
    compiled: Arc<OnceLock<Compiled>>,
}

impl CelExpressions {
    /// Expressions, not compiled yet.
    pub fn new(expressions: Vec<String>) -> Self {
        CelExpressions {
            expressions,
            compiled: Arc::default(),
        }
    }

    /// The source text.
    pub fn expressions(&self) -> &[String] {
        &self.expressions
    }

    /// True when there are none (the selector then matches every cluster).
    pub fn is_empty(&self) -> bool {
        self.expressions.is_empty()
    }

    /// The compiled programs, or every refused expression.
    pub fn compiled(&self) -> Result<&Arc<CompiledCel>, &[CelError]> {
        self.compiled
            .get_or_init(|| compile(&self.expressions))
            .as_ref()
            .map_err(Vec::as_slice)
    }
}

impl fmt::Debug for CelExpressions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.expressions.fmt(f)
    }
}

impl PartialEq for CelExpressions {
    fn eq(&self, other: &Self) -> bool {
        self.expressions == other.expressions
    }
}

impl Eq for CelExpressions {}

impl Serialize for CelExpressions {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.expressions.serialize(s)
    }
}

impl<'de> Deserialize<'de> for CelExpressions {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Vec::<String>::deserialize(d).map(CelExpressions::new)
    }
}

fn compile(expressions: &[String]) -> Compiled {
    let mut programs = Vec::with_capacity(expressions.len());
    let mut scores = ScoreUse::Nothing;
    let mut errors = Vec::new();
    for (index, source) in expressions.iter().enumerate() {
        match compile_one(source) {
            Ok((program, used)) => {
                scores.add(used);
                programs.push(program);
            }
            Err(message) => errors.push(CelError { index, message }),
        }
    }
    if errors.is_empty() {
        Ok(Arc::new(CompiledCel { programs, scores }))
    } else {
        Err(errors)
    }
}

fn compile_one(source: &str) -> Result<(Program, ScoreUse), String> {
    let program = compile_checked(source, &[CLUSTER_VARIABLE])?;
    let mut used = ScoreUse::Nothing;
    score_use(program.expression(), &mut used);
    Ok((program, used))
}

/// Compiles one CEL expression with the checks every Flotilla CEL goes through: at most
/// [`MAX_EXPRESSION_LEN`] bytes, a parser failure is an error (never a panic), no identifier
/// but `variables` and comprehension variables, and an estimated cost within [`MAX_COST`].
/// Placement predicates use it with `managedCluster`; the agent's ManifestWork condition
/// rules with `object` (and `result` for their messages).
pub fn compile_checked(source: &str, variables: &[&str]) -> Result<Program, String> {
    if source.len() > MAX_EXPRESSION_LEN {
        return Err(format!(
            "expression is {} bytes, over the {MAX_EXPRESSION_LEN}-byte limit",
            source.len()
        ));
    }
    // Compiling runs in API handlers: a parser bug must become an error, not a dead task.
    let compiled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| env().compile(source)))
        .map_err(|_| "compilation failed: the CEL parser failed on this expression".to_owned())?;
    let program = compiled.map_err(|e| format!("compilation failed: {e}"))?;
    let root = program.expression();
    let mut bound: Vec<String> = variables.iter().map(|v| (*v).to_owned()).collect();
    if let Some(name) = free_identifier(root, &mut bound) {
        return Err(format!(
            "compilation failed: undeclared reference to {name:?} (known: {})",
            variables.join(", ")
        ));
    }
    let cost = cost(root);
    if cost > MAX_COST {
        return Err(format!(
            "estimated cost {cost} exceeds the limit {MAX_COST} (each comprehension counts \
             {ASSUMED_ITERATIONS} iterations; nest fewer of them)"
        ));
    }
    Ok(program)
}

/// Children of a node, in evaluation-independent order.
fn children(e: &IdedExpr) -> Vec<&IdedExpr> {
    match &e.expr {
        Expr::Unspecified | Expr::Ident(_) | Expr::Literal(_) => Vec::new(),
        Expr::Call(c) => c.target.as_deref().into_iter().chain(&c.args).collect(),
        Expr::Comprehension(c) => vec![
            &c.iter_range,
            &c.accu_init,
            &c.loop_cond,
            &c.loop_step,
            &c.result,
        ],
        Expr::List(l) => l.elements.iter().collect(),
        Expr::Map(m) => entry_children(&m.entries),
        Expr::Struct(s) => entry_children(&s.entries),
        Expr::Select(s) => vec![&s.operand],
    }
}

/// The keys and values of map or struct entries.
fn entry_children(entries: &[IdedEntryExpr]) -> Vec<&IdedExpr> {
    entries
        .iter()
        .flat_map(|entry| match &entry.expr {
            EntryExpr::MapEntry(m) => vec![&m.key, &m.value],
            EntryExpr::StructField(f) => vec![&f.value],
        })
        .collect()
}

/// The first identifier that is neither the cluster nor bound by an enclosing comprehension.
fn free_identifier(e: &IdedExpr, bound: &mut Vec<String>) -> Option<String> {
    match &e.expr {
        Expr::Ident(name) => {
            let known = bound.iter().any(|b| b == name);
            (!known).then(|| name.clone())
        }
        Expr::Comprehension(c) => {
            // The range and the initial value are outside the loop's scope.
            if let Some(n) = free_identifier(&c.iter_range, bound) {
                return Some(n);
            }
            if let Some(n) = free_identifier(&c.accu_init, bound) {
                return Some(n);
            }
            let before = bound.len();
            bound.push(c.iter_var.clone());
            bound.extend(c.iter_var2.iter().cloned());
            bound.push(c.accu_var.clone());
            let found = [&c.loop_cond, &c.loop_step, &c.result]
                .into_iter()
                .find_map(|x| free_identifier(x, bound));
            bound.truncate(before);
            found
        }
        _ => children(e)
            .into_iter()
            .find_map(|x| free_identifier(x, bound)),
    }
}

/// The static cost estimate: 1 per node, a comprehension's condition and step
/// [`ASSUMED_ITERATIONS`] times.
fn cost(e: &IdedExpr) -> u64 {
    match &e.expr {
        Expr::Comprehension(c) => {
            let once = cost(&c.iter_range)
                .saturating_add(cost(&c.accu_init))
                .saturating_add(cost(&c.result));
            let body = cost(&c.loop_cond).saturating_add(cost(&c.loop_step));
            once.saturating_add(body.saturating_mul(ASSUMED_ITERATIONS))
                .saturating_add(1)
        }
        _ => children(e)
            .into_iter()
            .fold(1u64, |acc, c| acc.saturating_add(cost(c))),
    }
}

/// Which scores `scores(..)` calls name.
fn score_use(e: &IdedExpr, used: &mut ScoreUse) {
    if let Expr::Call(c) = &e.expr
        && c.func_name == SCORES_FUNCTION
    {
        match c.args.last().map(|a| &a.expr) {
            Some(Expr::Literal(LiteralValue::String(name))) => {
                used.add(ScoreUse::Named(BTreeSet::from([name.to_string()])))
            }
            _ => used.add(ScoreUse::Any),
        }
    }
    for c in children(e) {
        score_use(c, used);
    }
}

/// The `managedCluster` value of a cluster.
pub fn cluster_value(cluster: &Cluster) -> Value {
    let text = |s: &str| Value::String(Arc::new(s.to_owned()));
    let map = |entries: Vec<(&str, Value)>| {
        Value::from(
            entries
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v))
                .collect::<HashMap<String, Value>>(),
        )
    };
    let labels: HashMap<String, Value> = cluster
        .labels
        .iter()
        .map(|(k, v)| (k.to_owned(), text(v)))
        .collect();
    let claims: Vec<Value> = cluster
        .claims
        .iter()
        .map(|(name, value)| map(vec![("name", text(name)), ("value", text(value))]))
        .collect();
    let version = match &cluster.kubernetes_version {
        Some(v) => map(vec![("kubernetes", text(v))]),
        None => map(vec![]),
    };
    map(vec![
        (
            "metadata",
            map(vec![
                ("name", text(&cluster.name)),
                ("labels", Value::from(labels)),
            ]),
        ),
        (
            "status",
            map(vec![
                ("version", version),
                ("clusterClaims", Value::List(Arc::new(claims))),
            ]),
        ),
    ])
}

/// A cluster's AddOnPlacementScores as `scores(..)` returns them: resource name → list of
/// `{name, value}`.
pub fn scores_value<'a>(
    scores: impl IntoIterator<Item = &'a AddOnPlacementScore>,
) -> BTreeMap<String, Value> {
    scores
        .into_iter()
        .map(|s| {
            let entries: Vec<Value> = s
                .scores
                .iter()
                .map(|(name, value)| {
                    Value::from(HashMap::from([
                        ("name".to_owned(), Value::String(Arc::new(name.clone()))),
                        ("value".to_owned(), Value::Int(i64::from(*value))),
                    ]))
                })
                .collect();
            (s.resource_name.clone(), Value::List(Arc::new(entries)))
        })
        .collect()
}

impl CompiledCel {
    /// Whether every expression yields `true` for the cluster `value` (from [`cluster_value`])
    /// whose AddOnPlacementScores are `scores` (from [`scores_value`], holding at least the
    /// ones [`CompiledCel::score_use`] names).
    pub fn matches(&self, value: &Value, scores: &Arc<BTreeMap<String, Value>>) -> bool {
        let mut context = Context::with_env(env().clone());
        if self.scores != ScoreUse::Nothing {
            let table = scores.clone();
            let lookup = move |This(_cluster): This<Value>,
                               name: Arc<String>|
                  -> Result<Value, ExecutionError> {
                table.get(name.as_str()).cloned().ok_or_else(|| {
                    ExecutionError::function_error(
                        SCORES_FUNCTION,
                        format!("the cluster has no AddOnPlacementScore {name:?}"),
                    )
                })
            };
            if context.add_function(SCORES_FUNCTION, lookup).is_err() {
                return false;
            }
        }
        context.add_variable_from_value(CLUSTER_VARIABLE, value.clone());
        self.programs
            .iter()
            .all(|p| matches!(p.execute(&context), Ok(Value::Bool(true))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(source: &str) -> Result<Arc<CompiledCel>, Vec<CelError>> {
        CelExpressions::new(vec![source.to_owned()])
            .compiled()
            .cloned()
            .map_err(<[CelError]>::to_vec)
    }

    fn eval(source: &str, cluster: &Cluster, scores: &[AddOnPlacementScore]) -> bool {
        let compiled = one(source).unwrap_or_else(|e| panic!("{source}: {e:?}"));
        compiled.matches(&cluster_value(cluster), &Arc::new(scores_value(scores)))
    }

    fn cluster() -> Cluster {
        Cluster::new("c1")
            .label("version", "1.14.3")
            .label("env", "prod")
            .claim("platform.open-cluster-management.io", "AWS")
            .kubernetes_version("v1.30.2")
    }

    #[test]
    fn labels_version_and_claims_are_visible() {
        let c = cluster();
        assert!(eval(
            r#"managedCluster.metadata.labels["env"] == "prod""#,
            &c,
            &[]
        ));
        assert!(eval(
            r#"managedCluster.metadata.labels["version"].matches('^1\\.(14|15)\\.\\d+$')"#,
            &c,
            &[]
        ));
        assert!(eval(
            r#"managedCluster.status.version.kubernetes == "v1.30.2""#,
            &c,
            &[]
        ));
        assert!(eval(
            r#"managedCluster.status.clusterClaims.exists(c, c.name == "platform.open-cluster-management.io" && c.value == "AWS")"#,
            &c,
            &[]
        ));
        assert!(eval(r#"managedCluster.metadata.name == "c1""#, &c, &[]));
        assert!(!eval(
            r#"managedCluster.metadata.labels["env"] == "dev""#,
            &c,
            &[]
        ));
    }

    #[test]
    fn run_time_errors_and_non_booleans_reject_the_cluster() {
        let c = cluster();
        assert!(!eval(
            r#"managedCluster.metadata.labels["missing"] == "x""#,
            &c,
            &[]
        ));
        assert!(!eval(r#"managedCluster.metadata.name"#, &c, &[]));
        assert!(!eval(
            r#"managedCluster.metadata.labels["env"] > 3"#,
            &c,
            &[]
        ));
    }

    #[test]
    fn scores_returns_the_named_objects_entries() {
        let c = cluster();
        let scores = [AddOnPlacementScore::new("c1", "cpu-memory")
            .score("cpu", 3)
            .score("memory", 40)];
        let source = r#"managedCluster.scores("cpu-memory").filter(s, s.name == "memory").all(e, e.value > 30)"#;
        assert!(eval(source, &c, &scores));
        assert!(!eval(
            r#"managedCluster.scores("cpu-memory").exists(s, s.name == "cpu" && s.value > 30)"#,
            &c,
            &scores
        ));
        assert!(
            !eval(r#"managedCluster.scores("gpu").size() == 0"#, &c, &scores),
            "a missing AddOnPlacementScore is an error, as in OCM"
        );
        assert_eq!(
            one(source).unwrap().score_use(),
            &ScoreUse::Named(BTreeSet::from(["cpu-memory".to_owned()]))
        );
        assert_eq!(
            one(r#"managedCluster.scores(managedCluster.metadata.name).size() > 0"#)
                .unwrap()
                .score_use(),
            &ScoreUse::Any
        );
    }

    #[test]
    fn bad_expressions_are_refused_with_their_index() {
        let exprs = CelExpressions::new(vec![
            r#"managedCluster.metadata.name == "c1""#.to_owned(),
            "managedCluster.metadata.labels[".to_owned(),
            r#"cluster.metadata.name == "c1""#.to_owned(),
        ]);
        let errors = exprs.compiled().unwrap_err();
        assert_eq!(errors.len(), 2);
        assert_eq!(errors[0].index, 1);
        assert!(
            errors[0].message.starts_with("compilation failed: "),
            "{errors:?}"
        );
        assert_eq!(errors[1].index, 2);
        assert!(
            errors[1]
                .message
                .contains("undeclared reference to \"cluster\""),
            "{errors:?}"
        );
    }

    #[test]
    fn the_cases_of_ocms_predicate_plugin_behave_the_same() {
        let c = Cluster::new("cluster1")
            .label("region", "us-east-1")
            .label("env", "prod")
            .claim("cloud", "Amazon");
        let scores = [AddOnPlacementScore::new("cluster1", "test-addon").score("test-score", 90)];
        for source in [
            r#"managedCluster.metadata.labels["region"] == "us-east-1""#,
            r#"managedCluster.status.clusterClaims.exists(c, c.name == "cloud" && c.value == "Amazon")"#,
            r#"managedCluster.scores("test-addon").filter(s, s.name == 'test-score').all(e, e.value > 80)"#,
        ] {
            assert!(eval(source, &c, &scores), "{source}");
        }
        let low = [AddOnPlacementScore::new("cluster1", "test-addon").score("test-score", 70)];
        assert!(!eval(
            r#"managedCluster.scores("test-addon").filter(s, s.name == 'test-score').all(e, e.value > 80)"#,
            &c,
            &low
        ));
        let err = one("invalid.expression").unwrap_err();
        assert!(
            err[0]
                .message
                .contains("undeclared reference to \"invalid\""),
            "{err:?}"
        );
        assert!(
            CelExpressions::new(vec![]).compiled().is_ok(),
            "no expressions match everything"
        );
    }

    #[test]
    fn comprehension_variables_are_declared_inside_their_loop_only() {
        assert!(one("managedCluster.status.clusterClaims.all(c, c.value != '')").is_ok());
        let outside = one("managedCluster.status.clusterClaims.all(c, true) && c.value == ''");
        assert!(outside.is_err());
    }

    #[test]
    fn cost_is_bounded_statically() {
        let l = "managedCluster.status.clusterClaims";
        assert!(
            one(&format!(
                "{l}.all(a, {l}.all(b, a.name != '' && b.name != ''))"
            ))
            .is_ok()
        );
        let three = format!("{l}.all(a, {l}.all(b, {l}.all(c, a.name != b.name || c.name != '')))");
        let err = one(&three).unwrap_err();
        assert!(err[0].message.contains("estimated cost"), "{err:?}");
        let long = format!(
            "managedCluster.metadata.name == '{}'",
            "x".repeat(MAX_EXPRESSION_LEN)
        );
        assert!(one(&long).unwrap_err()[0].message.contains("byte limit"));
    }

    #[test]
    fn clones_share_one_compilation() {
        let a = CelExpressions::new(vec!["managedCluster.metadata.name != ''".to_owned()]);
        let b = a.clone();
        let pa = Arc::as_ptr(a.compiled().unwrap());
        let pb = Arc::as_ptr(b.compiled().unwrap());
        assert_eq!(pa, pb);
        assert_eq!(a, b);
    }

    #[test]
    fn compiled_expressions_can_cross_threads() {
        fn send_sync<T: Send + Sync>() {}
        send_sync::<CelExpressions>();
    }
}

#[cfg(test)]
mod properties {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn compiling_and_running_any_text_never_panics(
            source in "[a-zA-Z0-9_.()\\[\\]{}'\"!?:,<>=+*/%&|\\\\ -]{0,40}",
        ) {
            run(source);
        }

        #[test]
        fn compiling_and_running_token_soup_never_panics(
            tokens in prop::collection::vec(prop::sample::select(TOKENS.to_vec()), 0..14),
        ) {
            run(tokens.concat());
        }
    }

    const TOKENS: &[&str] = &[
        "managedCluster",
        ".metadata",
        ".labels",
        ".status",
        ".clusterClaims",
        "['a']",
        ".name",
        ".all(x, ",
        ".exists(x, ",
        ".map(x, ",
        ".filter(x, ",
        "x",
        ")",
        "(",
        "[",
        "]",
        "{",
        "}",
        ":",
        ",",
        "'a'",
        "'('",
        "1",
        "-1",
        "9223372036854775807",
        "1.5",
        "1u",
        "true",
        "null",
        " + ",
        " - ",
        " * ",
        " / ",
        " % ",
        " == ",
        " != ",
        " < ",
        " && ",
        " || ",
        "!",
        " ? ",
        " in ",
        "size(",
        ".size()",
        ".matches(",
        "'[('",
        "int(",
        "string(",
        "double(",
        ".scores('s')",
        ".startsWith(",
        "has(",
        "b'x'",
        "dyn(",
        "type(",
    ];

    fn run(source: String) {
        let exprs = CelExpressions::new(vec![source]);
        if let Ok(c) = exprs.compiled() {
            let cluster = Cluster::new("c1").label("a", "b").claim("x", "y");
            let scores = [AddOnPlacementScore::new("c1", "s").score("k", 1)];
            let _ = c.matches(&cluster_value(&cluster), &Arc::new(scores_value(&scores)));
        }
    }
}
