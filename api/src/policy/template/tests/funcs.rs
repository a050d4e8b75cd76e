//! Every function Flotilla's templates offer, with the values OCM (go-template-utils) and
//! sprig v3 give; the docs name each of them.

use super::super::funcs::{Mode, names};
use super::super::source::{Answer, CLUSTER_CLAIM, CLUSTER_CLAIM_API_VERSION, Fetched, Query};
use super::super::{Outcome, Resolver, TemplateError};
use serde_json::{Value, json};
use std::sync::Arc;

fn get(api_version: &str, kind: &str, ns: &str, name: &str) -> Query {
    Query::Get {
        api_version: api_version.into(),
        kind: kind.into(),
        namespace: ns.into(),
        name: name.into(),
    }
}

/// The cluster every case reads: a ConfigMap, a Secret, a claim, two labelled namespaces.
fn cluster() -> Fetched {
    let mut f = Fetched::default();
    f.insert(
        get("v1", "ConfigMap", "default", "site"),
        Answer::object(Some(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "site", "namespace": "default"},
            "data": {"vlan": "3620", "name": "edge", "on": "true"}}))),
    );
    f.insert(
        get("v1", "Secret", "default", "creds"),
        Answer::object(Some(json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "creds", "namespace": "default"},
            "data": {"user": "YWRtaW4="}}))),
    );
    f.insert(
        get(CLUSTER_CLAIM_API_VERSION, CLUSTER_CLAIM, "", "env"),
        Answer::object(Some(json!({"spec": {"value": "prod"}}))),
    );
    f.insert(
        get(CLUSTER_CLAIM_API_VERSION, CLUSTER_CLAIM, "", "absent"),
        Answer::Object(None),
    );
    f.insert(
        Query::List {
            api_version: "v1".into(),
            kind: "Namespace".into(),
            namespace: String::new(),
            selector: "team".into(),
        },
        Answer::Objects(vec![
            json!({"metadata": {"name": "a", "labels": {"team": "x"}}}),
            json!({"metadata": {"name": "b", "labels": {"team": "y"}}}),
        ]),
    );
    f.insert(
        get("v1", "ConfigMap", "default", "nosuch"),
        Answer::Object(None),
    );
    f.insert(
        get("example.com/v1", "Widget", "default", "w"),
        Answer::Unserved,
    );
    f
}

fn resolver() -> Resolver {
    Resolver {
        mode: Mode::Spoke,
        context: gotmpl::Value::Nil,
        source: Arc::new(cluster()),
        protect: None,
        deadline: super::budget::Deadline::after(super::budget::MAX_TIME),
    }
}

/// The value of `v: <text>` once resolved.
fn value(text: &str) -> Value {
    match resolver().resolve_yaml(&format!("v: {text}\n")) {
        Ok(Outcome::Resolved(r)) => r.value["v"].clone(),
        other => panic!("{text}: {other:?}"),
    }
}

/// What `{{ expr }}` gives, as text (`toInt`, `toBool` and `toLiteral` give typed values).
fn string(expr: &str) -> String {
    match value(&format!("'{{{{ {expr} }}}}'")) {
        Value::String(s) => s,
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        other => panic!("{expr}: not a scalar: {other}"),
    }
}

fn error(expr: &str) -> String {
    match resolver().resolve_yaml(&format!("v: '{{{{ {expr} }}}}'\n")) {
        Err(TemplateError::Exec { go, .. } | TemplateError::Parse { go, .. }) => go,
        other => panic!("{expr}: {other:?}"),
    }
}

#[test]
fn ocms_functions_read_the_cluster() {
    let cases = [
        (r#"fromConfigMap "default" "site" "vlan""#, "3620"),
        (r#"fromConfigMap "default" "site" "nokey""#, ""),
        (r#"fromSecret "default" "creds" "user""#, "YWRtaW4="),
        (
            r#"fromSecret "default" "creds" "user" | base64dec"#,
            "admin",
        ),
        (r#"fromClusterClaim "env""#, "prod"),
        (r#"lookupClusterClaim "absent""#, ""),
        (
            r#"(lookup "v1" "ConfigMap" "default" "site").data.name"#,
            "edge",
        ),
        (r#"(lookup "v1" "Namespace" "" "" "team").items | len"#, "2"),
        (r#"len (lookup "v1" "ConfigMap" "default" "nosuch")"#, "0"),
        (r#""admin" | base64enc"#, "YWRtaW4="),
        (r#""admin" | b64enc | b64dec"#, "admin"),
        (
            r#""%%%" | base64dec"#,
            "illegal base64 data at input byte 0",
        ),
        (r#"indent 2 "a\nb" | len"#, "5"),
        (r#""12" | atoi"#, "12"),
        (r#""x" | atoi"#, "0"),
        (r#""0x1f" | toInt"#, "31"),
        (r#""3.000" | toInt"#, "3"),
        // cast v1.10.0's trimDecimal drops any decimal part; base 0 takes underscores.
        (r#""3.5" | toInt"#, "3"),
        (r#""-2.9" | toInt"#, "-2"),
        (r#"".5" | toInt"#, "0"),
        (r#""1_000" | toInt"#, "1000"),
        (r#""1__0" | toInt"#, "0"),
        (r#"3.9 | toInt"#, "3"),
        (r#""True" | toBool"#, "true"),
        (r#""yes" | toBool"#, "false"),
        (r#""a" | toLiteral"#, "a"),
        (r#"dict "a" 1 | toJSON"#, r#"{"a":1}"#),
        (r#""<b>" | toJSON"#, r#""\u003cb\u003e""#),
        (r#""<b>" | toRawJSON"#, r#""<b>""#),
        (r#"(fromJSON "{\"a\":[1,2]}").a | len"#, "2"),
        (r#"(mustFromJSON "{\"a\":2}").a"#, "2"),
        (r#"mustToJSON (list 1 "x")"#, r#"[1,"x"]"#),
        (r#"mustToRawJSON (list "&")"#, r#"["&"]"#),
        (r#"(fromYAML "a: [1, 2]").a | len"#, "2"),
        (r#"(fromYaml "b: c").b"#, "c"),
        (r#"dict "a" "b" | toYAML"#, "a: b"),
        (r#"list "a" | toYaml"#, "- a"),
    ];
    for (expr, want) in cases {
        assert_eq!(string(expr), want, "{expr}");
    }
}

#[test]
fn typed_functions_lose_their_quotes_as_in_ocm() {
    assert_eq!(
        value(r#"'{{ fromConfigMap "default" "site" "vlan" | toInt }}'"#),
        json!(3620)
    );
    assert_eq!(
        value(r#"'{{ fromConfigMap "default" "site" "on" | toBool }}'"#),
        json!(true)
    );
    assert_eq!(value(r#"'{{ "[1, 2]" | toLiteral }}'"#), json!([1, 2]));
    assert_eq!(
        value(r#"'{{ copyConfigMapData "default" "site" }}'"#),
        json!({"vlan": "3620", "name": "edge", "on": "true"})
    );
    assert_eq!(
        value(r#"'{{ copySecretData "default" "creds" }}'"#),
        json!({"user": "YWRtaW4="})
    );
}

#[test]
fn autoindent_becomes_indent_by_the_templates_column() {
    let text = "a:\n  b: |\n    {{ \"x\\ny\" | autoindent }}\n";
    let Ok(Outcome::Resolved(r)) = resolver().resolve_yaml(text) else {
        panic!("resolves");
    };
    assert_eq!(r.value, json!({"a": {"b": "x\ny\n"}}));
}

#[test]
fn ocms_errors_are_worded_as_ocm_words_them() {
    let cases = [
        (
            r#"fromConfigMap "" "site" "vlan""#,
            "error calling fromConfigMap: the input is invalid: namespace, name, and key must be specified",
        ),
        (
            r#"fromClusterClaim "absent""#,
            "error calling fromClusterClaim: clusterclaims.cluster.open-cluster-management.io \"absent\" not found",
        ),
        (
            r#"fromClusterClaim """#,
            "error calling fromClusterClaim: a claim name must be provided",
        ),
        (
            r#"lookup "" "ConfigMap" "default" "site""#,
            "error calling lookup: the apiVersion and kind are required",
        ),
        (
            r#"lookup "example.com/v1" "Widget" "default" "w""#,
            "error calling lookup: one or more API resources are not installed on the API server",
        ),
        (
            r#""a\nb" | toLiteral"#,
            "error calling toLiteral: new lines are not allowed in the string passed to the toLiteral function",
        ),
        (
            r#""x" | protect"#,
            "error calling protect: the protect template function is not enabled in this mode",
        ),
        (
            r#""x" | autoindent | trim"#,
            "error calling autoindent: an unexpected error occurred where autoindent could not be processed",
        ),
        (
            r#"expandenv "$HOME""#,
            "error calling expandenv: use of denylisted template function: function 'expandenv' is considered a security risk",
        ),
        (
            r#"fromConfigMap "default" "site""#,
            "wrong number of args for fromConfigMap: want 3 got 2",
        ),
        (
            r#"fromConfigMap "default" "site" 3"#,
            "wrong type for value; expected string; got int",
        ),
        (r#"fail "stop""#, "error calling fail: stop"),
    ];
    for (expr, want) in cases {
        let go = error(expr);
        assert!(
            go.starts_with("template: tmpl:1:") && go.ends_with(want),
            "{expr}: {go}"
        );
    }
    assert_eq!(
        error(r#"randAlpha 3"#),
        "template: tmpl:1: function \"randAlpha\" not defined"
    );
}

#[test]
fn sprig_functions_give_sprigs_values() {
    let cases = [
        (r#"trim "  a  ""#, "a"),
        (r#"trimAll "$" "$5.00$""#, "5.00"),
        (r#"trimPrefix "-" "-a""#, "a"),
        (r#"trimSuffix "-" "a-""#, "a"),
        (r#"upper "a""#, "A"),
        (r#"lower "A""#, "a"),
        (r#"title "hello world""#, "Hello World"),
        (r#"repeat 3 "ab""#, "ababab"),
        (r#"substr 1 3 "hello""#, "el"),
        (r#"trunc 3 "hello""#, "hel"),
        (r#"trunc -3 "hello""#, "llo"),
        (r#"nospace "a b  c""#, "abc"),
        (r#"contains "ll" "hello""#, "true"),
        (r#"hasPrefix "he" "hello""#, "true"),
        (r#"hasSuffix "lo" "hello""#, "true"),
        (r#"quote "a" 1"#, r#""a" "1""#),
        (r#"squote "a" | len"#, "3"),
        (r#"cat "a" 1 nil "b""#, "a 1 b"),
        (r#"replace "-" "_" "a-b-c""#, "a_b_c"),
        (r#"nindent 2 "a\nb" | len"#, "8"),
        (r#"(split "," "a,b")._1"#, "b"),
        (r#"(splitn "," 2 "a,b,c")._1"#, "b,c"),
        (r#"splitList "," "a,b" | len"#, "2"),
        (r#"join "-" (list "a" "b")"#, "a-b"),
        (r#"default "d" """#, "d"),
        (r#"default "d" "x""#, "x"),
        (r#"empty (list)"#, "true"),
        (r#"coalesce "" "b""#, "b"),
        (r#"ternary "y" "n" true"#, "y"),
        (r#"list 1 2 | len"#, "2"),
        (r#"first (list 1 2)"#, "1"),
        (r#"last (list 1 2)"#, "2"),
        (r#"rest (list 1 2 3) | len"#, "2"),
        (r#"initial (list 1 2 3) | last"#, "2"),
        (r#"append (list 1) 2 | last"#, "2"),
        (r#"prepend (list 1) 0 | first"#, "0"),
        (r#"concat (list 1) (list 2 3) | len"#, "3"),
        (r#"reverse (list 1 2) | first"#, "2"),
        (r#"uniq (list 1 1 2) | len"#, "2"),
        (r#"has 2 (list 1 2)"#, "true"),
        (r#"compact (list "" "a") | len"#, "1"),
        (r#"sortAlpha (list "b" "a") | first"#, "a"),
        (r#"until 3 | last"#, "2"),
        (r#"untilStep 0 10 3 | last"#, "9"),
        (r#"without (list 1 2 1) 1 | len"#, "1"),
        (r#"dig "a" "b" "none" (dict "a" (dict "b" "x"))"#, "x"),
        (r#"dig "a" "c" "none" (dict "a" (dict "b" "x"))"#, "none"),
        (r#"typeIs "string" "x""#, "true"),
        (
            r#"sha256sum "a""#,
            "ca978112ca1bbdcafac231b39a23dc4da786eff8147c4e72b9807785afee48bb",
        ),
        (r#"b32enc "a""#, "ME======"),
        (r#"b32dec "ME======""#, "a"),
        (r#"get (dict "a" "b") "a""#, "b"),
        (r#"hasKey (dict "a" 1) "a""#, "true"),
        (r#"keys (dict "b" 1 "a" 2) | first"#, "a"),
        (r#"values (dict "a" 2) | first"#, "2"),
        (r#"pick (dict "a" 1 "b" 2) "a" | len"#, "1"),
        (r#"omit (dict "a" 1 "b" 2) "a" | keys | first"#, "b"),
        (r#"toString 5"#, "5"),
        (r#"toStrings (list 1 2) | last"#, "2"),
        (r#"int "7""#, "7"),
        (r#"int64 "7""#, "7"),
        (r#"float64 "1.5""#, "1.5"),
        (r#"add 1 2 3"#, "6"),
        (r#"add1 1"#, "2"),
        (r#"sub 5 2"#, "3"),
        (r#"mul 2 3"#, "6"),
        (r#"div 7 2"#, "3"),
        (r#"mod 7 2"#, "1"),
        (r#"max 1 5 3"#, "5"),
        (r#"min 4 2 3"#, "2"),
        (r#"toJson (dict "a" "<")"#, r#"{"a":"\u003c"}"#),
        (r#"mustToJson 1"#, "1"),
        (r#"toRawJson (dict "a" "<")"#, r#"{"a":"<"}"#),
        (r#"mustToRawJson "&""#, r#""&""#),
        (r#"toPrettyJson (list 1) | len"#, "7"),
        (r#"(fromJson "{\"a\":1}").a"#, "1"),
        (r#"(mustFromJson "[1]") | len"#, "1"),
        (r#"regexMatch "^a.c$" "abc""#, "true"),
        (r#"regexFind "[0-9]+" "ab12cd""#, "12"),
        (r#"regexFindAll "[0-9]" "a1b2" -1 | len"#, "2"),
        (r#"regexReplaceAll "a(x*)b" "-ab-axxb-" "${1}W""#, "-W-xxW-"),
        (r#"regexReplaceAllLiteral "a(x*)b" "-ab-" "${1}""#, "-${1}-"),
        (r#"regexSplit "z+" "pizza" -1 | len"#, "2"),
        (r#"typeOf 1"#, "int"),
        (r#"kindOf (list)"#, "slice"),
        (r#"kindIs "map" (dict)"#, "true"),
        (r#"deepEqual (list 1) (list 1)"#, "true"),
        (r#"b64enc "a""#, "YQ=="),
        (r#"b64dec "YQ==""#, "a"),
    ];
    for (expr, want) in cases {
        assert_eq!(string(expr), want, "{expr}");
    }
}

#[test]
fn every_function_is_tested_and_named_in_the_docs() {
    let tested = include_str!("funcs.rs");
    let docs = include_str!("../../../../../docs/architecture.md");
    let section = docs
        .split("### Policy templates")
        .nth(1)
        .expect("docs/architecture.md has a Policy templates section");
    for name in names() {
        let word = format!("`{name}`");
        assert!(
            section.contains(&word),
            "{name} is not in the docs' function list"
        );
        if ["env"].contains(&name) {
            continue;
        }
        assert!(
            tested.contains(&format!("{name} ")) || tested.contains(&format!("{name}\"")),
            "{name} has no case here"
        );
    }
}

#[test]
fn sprigs_integer_functions_cast_as_ocm_does() {
    // Review finding 7: sprig's int, add, … go through cast too.
    assert_eq!(string(r#"add "1.5" 1"#), "2");
    assert_eq!(string(r#"int "-2.9""#), "-2");
    assert_eq!(string(r#"mul "1_000" 2"#), "2000");
}

#[test]
fn sprigs_string_parameters_refuse_nil_and_other_types_as_go_does() {
    // Review finding 8: Go's validateType refuses what does not fit a `string` parameter.
    assert_eq!(
        error(r#"(lookup "v1" "ConfigMap" "default" "nosuch").data.key | upper"#),
        "template: tmpl:1:63: executing \"tmpl\" at <upper>: invalid value; expected string"
    );
    assert_eq!(
        error("5 | upper"),
        "template: tmpl:1:11: executing \"tmpl\" at <upper>: wrong type for value; expected \
         string; got int"
    );
    assert_eq!(
        error(r#"substr "1" 2 "abc""#),
        "template: tmpl:1:7: executing \"tmpl\" at <substr \"1\" 2 \"abc\">: wrong type for \
         value; expected int; got string"
    );
    // interface{} parameters still print anything.
    assert_eq!(string("cat 5 nil true"), "5 true");
}

#[test]
fn a_functions_error_after_a_secret_was_read_withholds_its_text() {
    // Review finding 9: the regex error would quote the pattern, which is the Secret's value.
    assert_eq!(
        error(r#"regexMatch (printf "(%s" (fromSecret "default" "creds" "user" | b64dec)) "x""#),
        "template: tmpl:1:7: executing \"tmpl\" at <regexMatch (printf \"(%s\" (fromSecret \
         \"default\" \"creds\" \"user\" | b64dec)) \"x\">: error calling regexMatch: (message \
         withheld: the template read a Secret)"
    );
    let go = error(r#"fail (lookup "v1" "Secret" "default" "creds").data | toJson"#);
    assert!(
        go.ends_with("(message withheld: the template read a Secret)"),
        "{go}"
    );
    assert!(!go.contains("YWRtaW4"), "{go}");
    // Without a Secret read, the text is the function's.
    assert!(error(r#"regexMatch "(" "x""#).contains("regex parse error"));
}

#[test]
fn hub_mode_errors_carry_ocms_prefix() {
    // Review finding 12: go-template-utils wraps getOrList's errors in the function's words.
    let hub = Resolver {
        mode: Mode::Hub {
            namespace: "policies".into(),
        },
        context: gotmpl::Value::Nil,
        source: Arc::new(Fetched::default()),
        protect: None,
        deadline: super::super::budget::Deadline::after(super::super::budget::MAX_TIME),
    };
    let go = |t: &str| match hub.resolve_yaml(&format!("v: '{{{{hub {t} hub}}}}'\n")) {
        Err(TemplateError::Exec { go, .. }) => go,
        other => panic!("{t}: {other:?}"),
    };
    assert!(
        go(r#"fromConfigMap "other" "site" "k""#).ends_with(
            "error calling fromConfigMap: failed getting the ConfigMap site from other: the \
             namespace argument is restricted to policies"
        ),
        "{}",
        go(r#"fromConfigMap "other" "site" "k""#)
    );
}

#[test]
fn title_substr_and_an_empty_first_selector_behave_as_in_go() {
    // Review finding 13: strings.Title treats ASCII punctuation as a separator.
    assert_eq!(
        string(r#"title "hello-world foo_bar x.y""#),
        "Hello-World Foo_bar X.Y"
    );
    // sprig's substring slices; a slice out of range is the runtime's panic, reported.
    assert_eq!(string(r#"substr -1 2 "hello""#), "he");
    assert_eq!(string(r#"substr 2 -1 "hello""#), "llo");
    assert_eq!(string(r#"substr 2 99 "hello""#), "llo");
    for (expr, tail) in [
        (r#"substr 3 1 "hello""#, "slice bounds out of range [3:1]"),
        (
            r#"substr -1 9 "hello""#,
            "slice bounds out of range [:9] with length 5",
        ),
        (r#"substr -1 -1 "hello""#, "slice bounds out of range [:-1]"),
        (r#"substr 7 -1 "hello""#, "slice bounds out of range [7:5]"),
    ] {
        let go = error(expr);
        assert!(
            go.ends_with(&format!("error calling substr: runtime error: {tail}")),
            "{expr}: {go}"
        );
    }
    // go-template-utils ignores every selector when the first one is empty: the list of
    // Namespaces is asked without one.
    let mut f = cluster();
    f.insert(
        Query::List {
            api_version: "v1".into(),
            kind: "Namespace".into(),
            namespace: String::new(),
            selector: String::new(),
        },
        Answer::Objects(vec![json!({"metadata": {"name": "a"}})]),
    );
    let r = Resolver {
        source: Arc::new(f),
        ..resolver()
    };
    let raw = "v: '{{ (lookup \"v1\" \"Namespace\" \"\" \"\" \"\" \"team\").items | len }}'\n";
    match r.resolve_yaml(raw) {
        Ok(Outcome::Resolved(out)) => assert_eq!(out.value["v"], json!("1")),
        other => panic!("{other:?}"),
    }
}

/// Marks a value as protected (the hub seals it to the cluster's agent).
struct Marked;

impl super::super::funcs::Protect for Marked {
    fn protect(&self, plain: &str) -> Result<String, String> {
        Ok(format!("$ocm_encrypted:sealed({})", plain.len()))
    }
}

#[test]
fn a_hub_lookup_of_a_secret_gives_its_values_protected() {
    // A hub Secret's values never leave the hub unsealed, whichever function reads them.
    let mut f = Fetched::default();
    let secret = json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "creds", "namespace": "policies"}, "data": {"user": "YWRtaW4="}});
    f.insert(
        get("v1", "Secret", "policies", "creds"),
        Answer::object(Some(secret.clone())),
    );
    f.insert(
        Query::List {
            api_version: "v1".into(),
            kind: "Secret".into(),
            namespace: "policies".into(),
            selector: String::new(),
        },
        Answer::Objects(vec![secret]),
    );
    let hub = Resolver {
        mode: Mode::Hub {
            namespace: "policies".into(),
        },
        context: gotmpl::Value::Nil,
        source: Arc::new(f),
        protect: Some(Arc::new(Marked)),
        deadline: super::budget::Deadline::after(super::budget::MAX_TIME),
    };
    let raw = "one: '{{hub (lookup \"v1\" \"Secret\" \"\" \"creds\").data.user hub}}'\n\
               all: '{{hub (index (lookup \"v1\" \"Secret\" \"\" \"\").items 0).data.user hub}}'\n\
               from: '{{hub fromSecret \"\" \"creds\" \"user\" hub}}'\n";
    match hub.resolve_yaml(raw) {
        Ok(Outcome::Resolved(out)) => {
            for key in ["one", "all", "from"] {
                assert_eq!(out.value[key], json!("$ocm_encrypted:sealed(8)"), "{key}");
            }
            assert!(!out.value.to_string().contains("YWRtaW4"));
        }
        other => panic!("{other:?}"),
    }
}
