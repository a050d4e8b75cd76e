//! A hostile template fails with an error and never aborts, exhausts or holds the process
//! (review finding 1): bounded output while it is written, bounded values and arguments,
//! bounded pads, no recursion through `{{template}}`, loops bounded by their size, a deadline.

use super::super::budget::{Deadline, MAX_OUTPUT, MAX_TIME};
use super::super::funcs::Mode;
use super::super::source::Fetched;
use super::super::{Outcome, Resolver, TemplateError};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn resolver(deadline: Deadline) -> Resolver {
    Resolver {
        mode: Mode::Spoke,
        context: gotmpl::Value::Nil,
        source: Arc::new(Fetched::default()),
        protect: None,
        deadline,
    }
}

/// Go's error text of a template that must fail, and how long it took.
fn refused(template: &str) -> (String, Duration) {
    let started = Instant::now();
    let out = resolver(Deadline::after(MAX_TIME)).resolve_yaml(&format!("v: '{template}'\n"));
    let took = started.elapsed();
    match out {
        Err(TemplateError::Exec { go, .. } | TemplateError::Parse { go, .. }) => (go, took),
        Err(other) => panic!("{template}: {other}"),
        Ok(Outcome::Resolved(r)) => panic!(
            "{template}: resolved to {} bytes",
            r.value.to_string().len()
        ),
        Ok(Outcome::Pending(p)) => panic!("{template}: pending {p:?}"),
    }
}

fn assert_refused(template: &str, expected: &str) {
    let (go, took) = refused(template);
    assert!(go.contains(expected), "{template}: {go}");
    assert!(took < Duration::from_secs(3), "{template}: took {took:?}");
}

#[test]
fn an_indent_of_a_hundred_gigabytes_is_an_error_not_an_abort() {
    assert_refused(
        "{{ indent 100000000000 \"a\" }}",
        "error calling indent: the result is larger than 1048576 bytes (Flotilla's bound)",
    );
    assert_refused(
        "{{ nindent 100000000000 \"a\" }}",
        "error calling nindent: the result is larger than",
    );
    // Go's strings.Repeat panics on a negative count, and the template reports it.
    assert_refused(
        "{{ indent -1 \"a\" }}",
        "error calling indent: strings: negative Repeat count",
    );
    // A pad that fits but is repeated on every line of a large text.
    assert_refused(
        "{{ indent 1000 (repeat 2000 \"x\\n\") }}",
        "error calling indent: the result is larger than",
    );
}

#[test]
fn output_is_bounded_while_it_is_written() {
    let (go, took) = refused("{{ range until 100000 }}{{ repeat 1048576 \"x\" }}{{ end }}");
    assert_eq!(
        go,
        format!(
            "template: tmpl: executing \"tmpl\": the output is larger than {MAX_OUTPUT} bytes \
             (Flotilla's bound)"
        )
    );
    assert!(took < Duration::from_secs(3), "took {took:?}");
}

#[test]
fn values_that_double_without_output_are_refused() {
    assert_refused(
        "{{ $s := repeat 1048576 \"x\" }}{{ range until 40 }}{{ $s = cat $s $s }}{{ end }}",
        "error calling cat: the arguments are larger than 1048576 bytes together",
    );
    assert_refused(
        "{{ $s := repeat 600000 \"x\" }}{{ range until 40 }}{{ $s = printf \"%s%s\" $s $s }}{{ end }}",
        "the arguments are larger than 1048576 bytes together",
    );
    // A list of lists shares its halves: never walked whole, refused as it doubles.
    assert_refused(
        "{{ $l := list (repeat 1000 \"x\") }}{{ range until 60 }}{{ $l = list $l $l }}{{ end }}",
        "error calling list: the arguments are larger than",
    );
    assert_refused(
        "{{ $s := repeat 1000000 \"x\" }}{{ range until 30 }}{{ $s = trimAll \"\" (print $s $s) }}{{ end }}",
        "larger than 1048576 bytes",
    );
}

#[test]
fn replacements_that_multiply_their_input_are_refused_before_they_are_built() {
    assert_refused(
        "{{ replace \"\" (repeat 1048576 \"a\") (repeat 1048576 \"b\") }}",
        "error calling replace: the result is larger than",
    );
    assert_refused(
        "{{ regexReplaceAll \"x\" (repeat 1000000 \"x\") \"$0$0$0$0\" }}",
        "error calling regexReplaceAll: the result is larger than",
    );
    assert_refused(
        "{{ regexReplaceAllLiteral \"x\" (repeat 1000000 \"x\") \"yy\" }}",
        "error calling regexReplaceAllLiteral: the result is larger than",
    );
    assert_refused(
        "{{ join (repeat 1000000 \"-\") (list 1 2 3) }}",
        "error calling join: the result is larger than",
    );
}

#[test]
fn the_values_one_execution_produces_are_bounded_together() {
    // Each value fits; a thousand of them do not.
    assert_refused(
        "{{ range until 1000 }}{{ $s := repeat 100000 \"x\" }}{{ end }}",
        "the template's functions produced more than 64 MiB (Flotilla's bound)",
    );
}

#[test]
fn a_template_calling_templates_is_refused_at_parse() {
    let recursive = "{{define \"t\"}}{{with .a}}{{template \"t\" .}}{{template \"t\" .}}{{end}}{{end}}\
                     {{- $d := dict }}{{ range until 60 }}{{ $d = dict \"a\" $d }}{{ end }}{{ template \"t\" $d }}";
    assert_refused(
        recursive,
        "template: tmpl:1: define, template and block are not supported in policy templates",
    );
    assert_refused(
        "{{ block \"b\" . }}x{{ end }}",
        "define, template and block are not supported",
    );
}

#[test]
fn large_loop_bodies_get_fewer_iterations() {
    // 100,000 iterations of a body of ~2,000 nodes would walk 2e8 nodes with no call.
    let body = "{{ $x := . }}".repeat(500);
    let (go, took) = refused(&format!("{{{{ range until 100000 }}}}{body}{{{{ end }}}}"));
    assert!(
        go.starts_with(
            "template: tmpl: executing \"tmpl\": the template's range loops ran more than"
        ),
        "{go}"
    );
    assert!(took < Duration::from_secs(3), "took {took:?}");
    // A small body keeps the whole budget.
    let out = resolver(Deadline::after(MAX_TIME))
        .resolve_yaml("v: '{{ range until 100000 }}{{ end }}ok'\n")
        .unwrap();
    assert!(matches!(out, Outcome::Resolved(r) if r.value["v"] == "ok"));
}

#[test]
fn functions_stop_once_the_cpu_budget_is_spent() {
    let out = resolver(Deadline::after(Duration::ZERO)).resolve_yaml("v: '{{ upper \"a\" }}'\n");
    match out {
        Err(TemplateError::Exec { go, .. }) => assert_eq!(
            go,
            "template: tmpl:1:7: executing \"tmpl\" at <upper \"a\">: error calling upper: the \
             template ran longer than 5s (Flotilla's bound)"
        ),
        other => panic!("{other:?}"),
    }
}
