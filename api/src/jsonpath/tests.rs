//! Tests of the JSONPath engine, one section per construct of the dialect, then error
//! positions, the canonical form, properties and the kubectl reference page (long because the
//! dialect is; each section stands alone).

use super::parser::is_plain;
use super::*;
use proptest::prelude::*;
use serde_json::json;

fn eval(path: &str, doc: &Value) -> Vec<Value> {
    parse(path)
        .unwrap_or_else(|e| panic!("{e}"))
        .eval(doc)
        .into_iter()
        .cloned()
        .collect()
}

fn err(path: &str) -> JsonPathError {
    match parse(path) {
        Ok(p) => panic!("{path:?} parsed as {p:?}"),
        Err(e) => e,
    }
}

fn deployment() -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": "hello",
            "labels": {"app.kubernetes.io/name": "hello", "tier-1": "web"},
        },
        "spec": {"replicas": 3, "template": {"spec": {"containers": [
            {"name": "app", "image": "nginx:1.27", "ports": [{"containerPort": 80}]},
            {"name": "sidecar", "image": "envoy:1.30", "ports": [{"containerPort": 9901}]},
        ]}}},
        "status": {
            "observedGeneration": 4,
            "replicas": 3,
            "readyReplicas": 2,
            "conditions": [
                {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable"},
                {"type": "Available", "status": "False", "reason": "MinimumReplicasUnavailable"},
            ],
        },
    })
}

// --- selection ------------------------------------------------------------------------

#[test]
fn dotted_fields_select_nested_value() {
    assert_eq!(eval(".status.readyReplicas", &deployment()), [json!(2)]);
    assert_eq!(eval(".metadata.name", &deployment()), [json!("hello")]);
}

#[test]
fn braces_dollar_and_whitespace_are_optional() {
    for path in [
        ".status.replicas",
        "{.status.replicas}",
        "$.status.replicas",
        "{$.status.replicas}",
        "  { .status.replicas }  ",
    ] {
        assert_eq!(eval(path, &deployment()), [json!(3)], "{path}");
    }
}

#[test]
fn dollar_alone_selects_root() {
    let doc = json!({"a": 1});
    assert_eq!(eval("$", &doc), [json!({"a": 1})]);
    assert_eq!(eval("{$}", &doc), [doc]);
}

#[test]
fn bracket_name_allows_dots_dashes_and_slashes() {
    let doc = deployment();
    assert_eq!(
        eval(".metadata.labels['app.kubernetes.io/name']", &doc),
        [json!("hello")]
    );
    assert_eq!(eval(r#".metadata.labels["tier-1"]"#, &doc), [json!("web")]);
    assert_eq!(eval("['status']['readyReplicas']", &doc), [json!(2)]);
}

#[test]
fn dot_name_allows_dashes_slashes_and_escaped_dots() {
    let doc = deployment();
    assert_eq!(eval(".metadata.labels.tier-1", &doc), [json!("web")]);
    assert_eq!(
        eval(r".metadata.labels.app\.kubernetes\.io/name", &doc),
        [json!("hello")]
    );
}

#[test]
fn quoted_name_unescapes_backslash_sequences() {
    let doc = json!({"it's": 1, "a\"b": 2, "back\\slash": 3});
    assert_eq!(eval(r"['it\'s']", &doc), [json!(1)]);
    assert_eq!(eval(r#"["a\"b"]"#, &doc), [json!(2)]);
    assert_eq!(eval(r"['back\\slash']", &doc), [json!(3)]);
}

#[test]
fn index_selects_array_element() {
    assert_eq!(
        eval(".spec.template.spec.containers[0].image", &deployment()),
        [json!("nginx:1.27")]
    );
}

#[test]
fn negative_index_counts_from_end() {
    let doc = json!({"a": [1, 2, 3]});
    assert_eq!(eval(".a[-1]", &doc), [json!(3)]);
    assert_eq!(eval(".a[-3]", &doc), [json!(1)]);
    assert!(eval(".a[-4]", &doc).is_empty());
}

#[test]
fn index_out_of_range_yields_no_match() {
    let doc = json!({"a": [1, 2, 3]});
    assert!(eval(".a[3]", &doc).is_empty());
    assert!(eval(".a[9223372036854775807]", &doc).is_empty());
    assert!(eval(".a[-9223372036854775808]", &doc).is_empty());
}

#[test]
fn wildcard_selects_array_elements_and_object_values() {
    let doc = deployment();
    assert_eq!(
        eval(".spec.template.spec.containers[*].name", &doc),
        [json!("app"), json!("sidecar")]
    );
    assert_eq!(
        eval(".spec.template.spec.containers.*.name", &doc),
        [json!("app"), json!("sidecar")]
    );
    let obj = json!({"m": {"x": 1, "y": 2}});
    assert_eq!(eval(".m.*", &obj), [json!(1), json!(2)]);
    assert_eq!(eval(".m[*]", &obj), [json!(1), json!(2)]);
    assert!(eval(".m.x[*]", &obj).is_empty());
}

#[test]
fn slice_selects_half_open_range() {
    let doc = json!({"a": [0, 1, 2, 3, 4]});
    assert_eq!(eval(".a[1:3]", &doc), [json!(1), json!(2)]);
    assert_eq!(eval(".a[:2]", &doc), [json!(0), json!(1)]);
    assert_eq!(eval(".a[3:]", &doc), [json!(3), json!(4)]);
    assert_eq!(eval(".a[:]", &doc).len(), 5);
}

#[test]
fn slice_bounds_are_clamped_and_may_be_negative() {
    let doc = json!({"a": [0, 1, 2, 3, 4]});
    assert_eq!(eval(".a[-2:]", &doc), [json!(3), json!(4)]);
    assert_eq!(eval(".a[:-3]", &doc), [json!(0), json!(1)]);
    assert_eq!(eval(".a[2:100]", &doc), [json!(2), json!(3), json!(4)]);
    assert!(eval(".a[4:2]", &doc).is_empty());
    assert!(eval(".a[-100:-50]", &doc).is_empty());
}

#[test]
fn slice_step_skips_elements() {
    let doc = json!({"a": [0, 1, 2, 3, 4]});
    assert_eq!(eval(".a[::2]", &doc), [json!(0), json!(2), json!(4)]);
    assert_eq!(eval(".a[1:5:3]", &doc), [json!(1), json!(4)]);
}

#[test]
fn recursive_descent_finds_members_in_document_order() {
    let doc = deployment();
    assert_eq!(
        eval("..image", &doc),
        [json!("nginx:1.27"), json!("envoy:1.30")]
    );
    assert_eq!(eval("..containerPort", &doc), [json!(80), json!(9901)]);
    let nested = json!({"a": {"a": {"a": 1}}});
    assert_eq!(
        eval("..a", &nested),
        [json!({"a": {"a": 1}}), json!({"a": 1}), json!(1)]
    );
}

#[test]
fn recursive_descent_accepts_wildcard_index_and_filter() {
    let doc = json!({"x": [1, [2, 3]], "y": {"z": [4]}});
    assert_eq!(eval("..[0]", &doc), [json!(1), json!(2), json!(4)]);
    assert_eq!(eval(".y..*", &doc), [json!([4]), json!(4)]);
    let pods = json!({"items": [{"s": {"c": [{"t": "Ready", "v": "True"}]}}]});
    assert_eq!(eval(r#"..c[?(@.t=="Ready")].v"#, &pods), [json!("True")]);
    assert_eq!(eval(r#"..[?(@.t=="Ready")].v"#, &pods), [json!("True")]);
}

#[test]
fn filter_selects_condition_status() {
    let doc = deployment();
    assert_eq!(
        eval(r#".status.conditions[?(@.type=="Available")].status"#, &doc),
        [json!("False")]
    );
    assert_eq!(
        eval(
            ".status.conditions[?(@.type == 'Progressing')].reason",
            &doc
        ),
        [json!("NewReplicaSetAvailable")]
    );
}

#[test]
fn filter_not_equal_excludes_match() {
    assert_eq!(
        eval(
            r#".status.conditions[?(@.type!="Available")].type"#,
            &deployment()
        ),
        [json!("Progressing")]
    );
}

#[test]
fn filter_compares_numbers_numerically() {
    let doc = json!({"p": [{"n": 1}, {"n": 2.5}, {"n": 10}, {"n": -3}]});
    let names = |path: &str| eval(path, &doc);
    assert_eq!(names(".p[?(@.n > 2)].n"), [json!(2.5), json!(10)]);
    assert_eq!(names(".p[?(@.n >= 2.5)].n"), [json!(2.5), json!(10)]);
    assert_eq!(names(".p[?(@.n < 1)].n"), [json!(-3)]);
    assert_eq!(names(".p[?(@.n <= 1)].n"), [json!(1), json!(-3)]);
    assert_eq!(names(".p[?(@.n == 10.0)].n"), [json!(10)]);
    assert_eq!(names(".p[?(@.n == 1e1)].n"), [json!(10)]);
    assert_eq!(names(".p[?(@.n != 1)].n").len(), 3);
}

#[test]
fn filter_compares_strings_bytewise() {
    let doc = json!({"v": [{"s": "apple"}, {"s": "banana"}, {"s": "Cherry"}]});
    assert_eq!(
        eval(r#".v[?(@.s < "b")].s"#, &doc),
        [json!("apple"), json!("Cherry")]
    );
    assert_eq!(eval(r#".v[?(@.s >= "banana")].s"#, &doc), [json!("banana")]);
}

#[test]
fn filter_compares_booleans_for_equality_only() {
    let doc = json!({"c": [{"ready": true, "n": "a"}, {"ready": false, "n": "b"}]});
    assert_eq!(eval(".c[?(@.ready==true)].n", &doc), [json!("a")]);
    assert_eq!(eval(".c[?(@.ready != true)].n", &doc), [json!("b")]);
    assert!(eval(".c[?(@.ready < true)].n", &doc).is_empty());
}

#[test]
fn filter_existence_selects_elements_with_the_path() {
    let doc = json!({"c": [{"a": {"b": null}}, {"a": {}}, {"x": 1}]});
    assert_eq!(eval(".c[?(@.a.b)]", &doc), [json!({"a": {"b": null}})]);
    assert_eq!(eval(".c[?(@.a)]", &doc).len(), 2);
}

#[test]
fn filter_at_alone_tests_scalar_elements() {
    let doc = json!({"finalizers": ["a/b", "c", "a/b"]});
    assert_eq!(
        eval(r#".finalizers[?(@=="a/b")]"#, &doc),
        [json!("a/b"), json!("a/b")]
    );
}

#[test]
fn filter_with_bracket_name_and_nested_filter() {
    let doc = json!({"pods": [
        {"meta": {"x-y": "1"}, "cs": [{"ok": true}]},
        {"meta": {"x-y": "2"}, "cs": [{"ok": false}]},
    ]});
    assert_eq!(
        eval(r#".pods[?(@.meta['x-y']=="2")].cs[0].ok"#, &doc),
        [json!(false)]
    );
    assert_eq!(
        eval(".pods[?(@.cs[?(@.ok==true)])].meta['x-y']", &doc),
        [json!("1")]
    );
}

#[test]
fn filter_type_mismatch_selects_nothing() {
    let doc = json!({"c": [{"n": 1}, {"n": "1"}, {"n": true}, {"n": null}]});
    assert_eq!(eval(".c[?(@.n==1)].n", &doc), [json!(1)]);
    assert_eq!(eval(r#".c[?(@.n=="1")].n"#, &doc), [json!("1")]);
    assert_eq!(eval(r#".c[?(@.n!="x")].n"#, &doc), [json!("1")]);
}

#[test]
fn filter_with_several_matches_on_left_selects_nothing() {
    let doc = json!({"c": [{"t": ["a", "b"]}]});
    assert!(eval(r#".c[?(@.t[*]=="a")]"#, &doc).is_empty());
    assert_eq!(eval(r#".c[?(@.t[0]=="a")]"#, &doc).len(), 1);
}

#[test]
fn filter_on_object_or_scalar_selects_nothing() {
    let doc = json!({"o": {"a": {"t": "x"}}, "s": "x"});
    assert!(eval(r#".o[?(@.t=="x")]"#, &doc).is_empty());
    assert!(eval(r#".s[?(@=="x")]"#, &doc).is_empty());
}

#[test]
fn missing_field_yields_no_match() {
    let doc = deployment();
    assert!(eval(".status.availableReplicas", &doc).is_empty());
    assert!(eval(".nope.deeper.still", &doc).is_empty());
    assert!(eval(r#".status.conditions[?(@.type=="Missing")].status"#, &doc).is_empty());
}

#[test]
fn selectors_on_wrong_type_yield_no_match() {
    let doc = json!({"s": "text", "n": 1, "a": [1], "o": {"0": 1}});
    assert!(eval(".s.x", &doc).is_empty());
    assert!(eval(".s[0]", &doc).is_empty());
    assert!(eval(".n[0:1]", &doc).is_empty());
    assert!(eval(".a.x", &doc).is_empty());
    assert!(eval(".o[0]", &doc).is_empty());
    assert_eq!(eval(".o['0']", &doc), [json!(1)]);
}

#[test]
fn first_stops_at_first_match() {
    let doc = json!({"a": [{"b": 1}, {"b": 2}]});
    let path = parse(".a[*].b").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(path.first(&doc), Some(&json!(1)));
    let missing = parse(".a[*].c").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(missing.first(&doc), None);
}

#[test]
fn eval_into_appends_to_buffer() {
    let doc = json!({"a": 1, "b": 2});
    let mut buf = Vec::new();
    for path in [".a", ".b", ".c"] {
        parse(path)
            .unwrap_or_else(|e| panic!("{e}"))
            .eval_into(&doc, &mut buf);
    }
    assert_eq!(buf, [&json!(1), &json!(2)]);
}

#[test]
fn deep_document_does_not_overflow_recursive_descent() {
    let mut doc = json!(1);
    for _ in 0..10_000 {
        doc = Value::Array(vec![doc]);
    }
    let found = parse("..*")
        .unwrap_or_else(|e| panic!("{e}"))
        .eval(&doc)
        .len();
    assert_eq!(found, 10_000);
    // serde_json drops values recursively; unwrap iteratively to keep the test stack small.
    while let Value::Array(mut items) = doc {
        doc = items.pop().unwrap_or(Value::Null);
    }
    assert_eq!(doc, json!(1));
}

// --- canonical form ----------------------------------------------------------------------

#[test]
fn display_prints_canonical_form() {
    let cases = [
        ("{$.status.readyReplicas}", ".status.readyReplicas"),
        ("$", "$"),
        ("['a']", ".a"),
        (r#"["a.b"]"#, "['a.b']"),
        (r".a\.b", "['a.b']"),
        (".a.*", ".a[*]"),
        ("..[*]", "..*"),
        ("..['x y']", "..['x y']"),
        (".a[ 1 : 3 ]", ".a[1:3]"),
        (".a[::1]", ".a[:]"),
        (".a[-1:]", ".a[-1:]"),
        (".a[::2]", ".a[::2]"),
        (
            ".status.conditions[?( @.type == 'Complete' )].status",
            r#".status.conditions[?(@.type=="Complete")].status"#,
        ),
        (".c[?(@.n>=1.5)]", ".c[?(@.n>=1.5)]"),
        (".c[?(@.ok != false)]", ".c[?(@.ok!=false)]"),
        (".c[?(@['a b'])]", ".c[?(@['a b'])]"),
        (r#".c[?(@=="say \"hi\"")]"#, r#".c[?(@=="say \"hi\"")]"#),
        (r"['it\'s']", r"['it\'s']"),
        ("['']", "['']"),
        ("['*']", "['*']"),
    ];
    for (input, canonical) in cases {
        let path = parse(input).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(path.to_string(), canonical, "{input}");
        assert_eq!(parse(canonical).as_ref(), Ok(&path), "{canonical}");
    }
}

#[test]
fn from_str_matches_parse() {
    let path: JsonPath = ".a[0]".parse().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(Ok(path), parse(".a[0]"));
}

// --- errors ------------------------------------------------------------------------------

#[test]
fn error_unclosed_filter_reports_where_it_opens() {
    let e = err(r#".status.conditions[?(@.type=="Available").status"#);
    assert_eq!(e.kind(), &JsonPathErrorKind::UnclosedFilter);
    assert_eq!(e.position(), 19);
    assert_eq!(
        e.to_string(),
        r#"path ".status.conditions[?(@.type==\"Available\").status": unclosed filter at position 19"#
    );
    assert_eq!(
        err(r#".c[?(@.type=="A""#).kind(),
        &JsonPathErrorKind::UnclosedFilter
    );
    assert_eq!(
        err(r#".c[?(@.type=="A"]"#).kind(),
        &JsonPathErrorKind::UnclosedFilter
    );
    assert_eq!(err(".c[?(@.a").kind(), &JsonPathErrorKind::UnclosedFilter);
    assert_eq!(err(".c[?(").kind(), &JsonPathErrorKind::UnclosedFilter);
}

#[test]
fn error_empty_path() {
    for path in ["", "   ", "{}", "{ }"] {
        assert_eq!(err(path).kind(), &JsonPathErrorKind::Empty, "{path:?}");
    }
    assert_eq!(err("").to_string(), r#"path "": empty path at position 1"#);
}

#[test]
fn error_unclosed_brace_and_stray_brace() {
    let e = err("{.a.b");
    assert_eq!(e.kind(), &JsonPathErrorKind::UnclosedBrace);
    assert_eq!(e.position(), 1);
    assert_eq!(err("{").kind(), &JsonPathErrorKind::UnclosedBrace);
    assert!(matches!(
        err(".a}").kind(),
        JsonPathErrorKind::UnexpectedChar { found: '}', .. }
    ));
    assert!(matches!(
        err("{.a}}").kind(),
        JsonPathErrorKind::UnexpectedChar { found: '}', .. }
    ));
}

#[test]
fn error_unclosed_bracket_points_at_bracket() {
    let e = err(".a[0");
    assert_eq!(e.kind(), &JsonPathErrorKind::UnclosedBracket);
    assert_eq!(e.position(), 3);
    assert_eq!(err(".a[").kind(), &JsonPathErrorKind::UnclosedBracket);
    assert_eq!(err(".a['b'").kind(), &JsonPathErrorKind::UnclosedBracket);
}

#[test]
fn error_unclosed_string_points_at_quote() {
    let e = err(".a['b]");
    assert_eq!(e.kind(), &JsonPathErrorKind::UnclosedString);
    assert_eq!(e.position(), 4);
    assert_eq!(
        err(r#".c[?(@.t=="x)]"#).kind(),
        &JsonPathErrorKind::UnclosedString
    );
    assert_eq!(err(r"['a\").kind(), &JsonPathErrorKind::UnclosedString);
}

#[test]
fn error_missing_leading_dot_or_name() {
    assert!(matches!(
        err("status.replicas").kind(),
        JsonPathErrorKind::UnexpectedChar { found: 's', .. }
    ));
    assert!(matches!(
        err(".a.").kind(),
        JsonPathErrorKind::UnexpectedEnd { .. }
    ));
    assert!(matches!(
        err(".a..").kind(),
        JsonPathErrorKind::UnexpectedEnd { .. }
    ));
    assert!(matches!(
        err("...a").kind(),
        JsonPathErrorKind::UnexpectedChar { found: '.', .. }
    ));
    assert!(matches!(
        err(".a.[0]").kind(),
        JsonPathErrorKind::UnexpectedChar { found: '[', .. }
    ));
    assert_eq!(
        err(".a b").to_string(),
        r#"path ".a b": unexpected 'b', expected '.', '[' or the end of the path at position 4"#
    );
}

#[test]
fn error_dangling_escape() {
    let e = err(r".a\");
    assert_eq!(e.kind(), &JsonPathErrorKind::DanglingEscape);
    assert_eq!(e.position(), 3);
}

#[test]
fn error_bad_index_or_slice() {
    assert_eq!(err(".a[]").kind(), &JsonPathErrorKind::EmptyBrackets);
    assert_eq!(
        err(".a[-]").kind(),
        &JsonPathErrorKind::InvalidIndex("-".into())
    );
    assert_eq!(
        err(".a[99999999999999999999]").kind(),
        &JsonPathErrorKind::InvalidIndex("99999999999999999999".into())
    );
    assert!(matches!(
        err(".a[1a]").kind(),
        JsonPathErrorKind::UnexpectedChar { found: 'a', .. }
    ));
    assert!(matches!(
        err(".a[x]").kind(),
        JsonPathErrorKind::UnexpectedChar { found: 'x', .. }
    ));
    assert!(matches!(
        err(".a[1:2:3:4]").kind(),
        JsonPathErrorKind::UnexpectedChar { found: ':', .. }
    ));
}

#[test]
fn error_slice_step_must_be_positive() {
    let e = err(".a[0:5:0]");
    assert_eq!(e.kind(), &JsonPathErrorKind::InvalidStep(0));
    assert_eq!(e.position(), 8);
    assert_eq!(err(".a[::-1]").kind(), &JsonPathErrorKind::InvalidStep(-1));
}

#[test]
fn error_union_is_unsupported() {
    let e = err(".a[0,1]");
    assert_eq!(e.kind(), &JsonPathErrorKind::UnsupportedUnion);
    assert_eq!(e.position(), 5);
    assert_eq!(
        err(".a['x','y']").kind(),
        &JsonPathErrorKind::UnsupportedUnion
    );
}

#[test]
fn error_unknown_operator() {
    let e = err(r#".c[?(@.t="x")]"#);
    assert_eq!(e.kind(), &JsonPathErrorKind::UnknownOperator("=".into()));
    assert_eq!(e.position(), 9);
    assert_eq!(
        err(r#".c[?(@.t=<"x")]"#).kind(),
        &JsonPathErrorKind::UnknownOperator("=<".into())
    );
}

#[test]
fn error_invalid_filter_value() {
    assert_eq!(
        err(".c[?(@.t==Available)]").kind(),
        &JsonPathErrorKind::InvalidLiteral("Available".into())
    );
    assert_eq!(
        err(".c[?(@.n==1.)]").kind(),
        &JsonPathErrorKind::InvalidNumber("1.".into())
    );
    assert_eq!(
        err(".c[?(@.n==-)]").kind(),
        &JsonPathErrorKind::InvalidNumber("-".into())
    );
    assert_eq!(
        err(".c[?(@.n==1e)]").kind(),
        &JsonPathErrorKind::InvalidNumber("1e".into())
    );
    assert_eq!(
        err(".c[?(@.n==1e999)]").kind(),
        &JsonPathErrorKind::InvalidNumber("1e999".into())
    );
    assert!(matches!(
        err(".c[?(@.n==)]").kind(),
        JsonPathErrorKind::UnexpectedChar { found: ')', .. }
    ));
    assert!(matches!(
        err(".c[?(@.n==").kind(),
        JsonPathErrorKind::UnexpectedEnd { .. }
    ));
}

#[test]
fn error_filter_must_start_with_at() {
    let e = err(r#".c[?(.t=="x")]"#);
    assert_eq!(e.kind(), &JsonPathErrorKind::FilterWithoutCurrent);
    assert_eq!(e.position(), 6);
    assert!(matches!(
        err(".c[?@.t]").kind(),
        JsonPathErrorKind::UnexpectedChar { found: '@', .. }
    ));
}

#[test]
fn error_logical_operators_are_unsupported() {
    assert!(matches!(
        err(r#".c[?(@.a=="x" && @.b=="y")]"#).kind(),
        JsonPathErrorKind::UnexpectedChar { found: '&', .. }
    ));
}

#[test]
fn error_too_many_steps() {
    let long = ".a".repeat(MAX_STEPS + 1);
    let e = err(&long);
    assert_eq!(e.kind(), &JsonPathErrorKind::TooManySteps);
    assert_eq!(e.position(), 2 * MAX_STEPS + 1);
    assert!(parse(&".a".repeat(MAX_STEPS)).is_ok());
}

#[test]
fn error_filters_nested_too_deep() {
    let nested = |n: usize| format!("{}{}", ".x[?(@".repeat(n), ")]".repeat(n));
    assert!(parse(&nested(MAX_FILTER_DEPTH)).is_ok());
    assert_eq!(
        err(&nested(MAX_FILTER_DEPTH + 1)).kind(),
        &JsonPathErrorKind::FilterTooDeep
    );
}

#[test]
fn error_position_counts_characters_not_bytes() {
    let e = err(".größe[");
    assert_eq!(e.kind(), &JsonPathErrorKind::UnclosedBracket);
    assert_eq!(e.position(), 7);
}

// --- properties --------------------------------------------------------------------------

fn arb_name() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-zA-Z_][a-zA-Z0-9_-]{0,8}",
        "[a-z./'\"\\\\ *@$=!()\\[\\]{}-]{0,6}",
        any::<String>().prop_map(|s| s.chars().take(6).collect()),
    ]
}

fn arb_literal() -> impl Strategy<Value = Literal> {
    prop_oneof![
        arb_name().prop_map(Literal::String),
        any::<i64>().prop_map(|n| Literal::Number(n.into())),
        any::<u64>().prop_map(|n| Literal::Number(n.into())),
        any::<f64>()
            .prop_filter_map("finite", Number::from_f64)
            .prop_map(Literal::Number),
        any::<bool>().prop_map(Literal::Bool),
    ]
}

fn arb_op() -> impl Strategy<Value = CmpOp> {
    prop_oneof![
        Just(CmpOp::Eq),
        Just(CmpOp::Ne),
        Just(CmpOp::Lt),
        Just(CmpOp::Le),
        Just(CmpOp::Gt),
        Just(CmpOp::Ge),
    ]
}

fn arb_selector(depth: u32) -> BoxedStrategy<Selector> {
    let leaf = prop_oneof![
        arb_name().prop_map(Selector::Name),
        Just(Selector::Wildcard),
        any::<i64>().prop_map(Selector::Index),
        (
            proptest::option::of(-10i64..10),
            proptest::option::of(-10i64..10),
            1i64..4
        )
            .prop_map(|(start, end, step)| Selector::Slice { start, end, step }),
    ];
    if depth == 0 {
        return leaf.boxed();
    }
    let filter = (
        proptest::collection::vec(arb_segment(depth - 1), 0..3),
        proptest::option::of((arb_op(), arb_literal())),
    )
        .prop_map(|(path, test)| Selector::Filter(Box::new(Filter { path, test })));
    prop_oneof![4 => leaf, 1 => filter].boxed()
}

fn arb_segment(depth: u32) -> BoxedStrategy<Segment> {
    prop_oneof![
        3 => arb_selector(depth).prop_map(Segment::Child),
        1 => arb_selector(depth).prop_map(Segment::Descendant),
    ]
    .boxed()
}

fn arb_path() -> impl Strategy<Value = JsonPath> {
    proptest::collection::vec(arb_segment(2), 0..6).prop_map(|segments| JsonPath { segments })
}

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter_map("finite", Number::from_f64)
            .prop_map(Value::Number),
        "[a-c]{0,3}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 5, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            proptest::collection::btree_map("[a-c]{1,2}|type|x-y", inner, 0..5)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Path-ish strings: mostly JSONPath punctuation so the parser's error paths get exercised.
fn arb_path_text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[.\\[\\]?()@$*'\"=!<>:,{} \\\\0-9a-c-]{0,24}",
        "\\PC{0,24}",
        arb_path().prop_map(|p| p.to_string()),
    ]
}

proptest! {
    #[test]
    fn display_then_parse_round_trips(path in arb_path()) {
        let text = path.to_string();
        prop_assert_eq!(parse(&text), Ok(path), "canonical form {}", text);
    }

    #[test]
    fn eval_never_panics_and_accepted_paths_round_trip(
        text in arb_path_text(),
        doc in arb_json(),
    ) {
        match parse(&text) {
            Ok(path) => {
                let matches = path.eval(&doc);
                prop_assert_eq!(path.first(&doc), matches.first().copied());
                let canonical = path.to_string();
                let reparsed = parse(&canonical);
                prop_assert_eq!(reparsed.as_ref(), Ok(&path), "canonical form {}", canonical);
            }
            Err(e) => {
                prop_assert_eq!(e.path(), text.as_str());
                prop_assert!(e.position() >= 1 && e.position() <= text.chars().count() + 1);
            }
        }
    }

    #[test]
    fn generated_paths_evaluate_without_panicking(path in arb_path(), doc in arb_json()) {
        let matches = path.eval(&doc);
        prop_assert_eq!(path.first(&doc), matches.first().copied());
    }

    #[test]
    fn dotted_path_agrees_with_direct_indexing(
        doc in arb_json(),
        keys in proptest::collection::vec("[a-c]{1,2}|type|x-y|a\\.b|q'r", 1..5),
    ) {
        let text: String = keys
            .iter()
            .map(|k| {
                if k.chars().all(is_plain) {
                    format!(".{k}")
                } else {
                    format!("['{}']", k.replace('\\', "\\\\").replace('\'', "\\'"))
                }
            })
            .collect();
        let path = parse(&text).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let direct = keys.iter().try_fold(&doc, |v, k| v.get(k.as_str()));
        prop_assert_eq!(path.eval(&doc), direct.into_iter().collect::<Vec<_>>());
    }

    #[test]
    fn index_agrees_with_direct_indexing(items in proptest::collection::vec(any::<i64>(), 0..8), i in -10i64..10) {
        let doc = json!({ "a": items });
        let path = parse(&format!(".a[{i}]")).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let len = items.len() as i64;
        let expected = if (-len..len).contains(&i) {
            vec![json!(items[((i + len) % len) as usize])]
        } else {
            vec![]
        };
        prop_assert_eq!(path.eval(&doc).into_iter().cloned().collect::<Vec<_>>(), expected);
    }
}

// --- the kubectl JSONPath reference -----------------------------------------------------------

/// The input document of <https://kubernetes.io/docs/reference/kubectl/jsonpath/>.
fn kubectl_reference_input() -> Value {
    json!({
        "kind": "List",
        "items": [
            {
                "kind": "None",
                "metadata": {
                    "name": "127.0.0.1",
                    "labels": {"kubernetes.io/hostname": "127.0.0.1"}
                },
                "status": {
                    "capacity": {"cpu": "4"},
                    "addresses": [{"type": "LegacyHostIP", "address": "127.0.0.1"}]
                }
            },
            {
                "kind": "None",
                "metadata": {"name": "127.0.0.2"},
                "status": {
                    "capacity": {"cpu": "8"},
                    "addresses": [
                        {"type": "LegacyHostIP", "address": "127.0.0.2"},
                        {"type": "another", "address": "127.0.0.3"}
                    ]
                }
            }
        ],
        "users": [
            {"name": "myself", "user": {}},
            {"name": "e2e", "user": {"username": "admin", "password": "secret"}}
        ]
    })
}

/// Every selecting example of the kubectl reference page's table, with the page's result.
/// The page's templating rows (`range`/`end`, literal text, `''` quoting) are out of scope (see
/// the module docs); its union row is refused with an error that says so.
#[test]
fn kubectl_reference_page_examples() {
    let doc = kubectl_reference_input();
    let table: &[(&str, Value)] = &[
        ("{@}", json!([doc.clone()])),
        ("{.kind}", json!(["List"])),
        ("{['kind']}", json!(["List"])),
        (
            "{..name}",
            json!(["127.0.0.1", "127.0.0.2", "myself", "e2e"]),
        ),
        (
            "{.items[*].metadata.name}",
            json!(["127.0.0.1", "127.0.0.2"]),
        ),
        ("{.users[0].name}", json!(["myself"])),
        (
            "{.users[?(@.name==\"e2e\")].user.password}",
            json!(["secret"]),
        ),
        (
            "{.items[0].metadata.labels.kubernetes\\.io/hostname}",
            json!(["127.0.0.1"]),
        ),
        // The examples below the table.
        (
            "{.items[*].status.addresses[?(@.type==\"LegacyHostIP\")].address}",
            json!(["127.0.0.1", "127.0.0.2"]),
        ),
        ("{.items[-1:].metadata.name}", json!(["127.0.0.2"])),
        ("{.items[0:2:1].status.capacity.cpu}", json!(["4", "8"])),
        ("$.kind", json!(["List"])),
    ];
    for (path, want) in table {
        assert_eq!(
            Value::Array(eval(path, &doc)),
            *want,
            "kubectl reference example {path}"
        );
    }
}

#[test]
fn kubectl_reference_union_is_refused_not_misread() {
    let e = err("{.items[*]['metadata.name', 'status.capacity']}");
    assert!(e.to_string().contains("union"), "{e}");
}
