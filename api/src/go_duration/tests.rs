//! Go's own cases for `time.ParseDuration` and `Duration.String` (`src/time/time_test.go`:
//! `parseDurationTests`, `parseDurationErrorTests`, `durationTests`), plus the spellings OCM's
//! CRDs use.

use super::{GoDuration, ParseDurationError};

const NS: i64 = 1;
const US: i64 = 1_000;
const MS: i64 = 1_000_000;
const S: i64 = 1_000_000_000;
const M: i64 = 60 * S;
const H: i64 = 60 * M;

#[test]
fn durations_parse_as_go_parses_them() {
    let cases: &[(&str, i64)] = &[
        ("0", 0),
        ("5s", 5 * S),
        ("30s", 30 * S),
        ("1478s", 1478 * S),
        ("-5s", -5 * S),
        ("+5s", 5 * S),
        ("-0", 0),
        ("+0", 0),
        ("5.0s", 5 * S),
        ("5.6s", 5 * S + 600 * MS),
        ("5.s", 5 * S),
        (".5s", 500 * MS),
        ("1.0s", S),
        ("1.00s", S),
        ("1.004s", S + 4 * MS),
        ("1.0040s", S + 4 * MS),
        ("100.00100s", 100 * S + MS),
        ("10ns", 10 * NS),
        ("11us", 11 * US),
        ("12\u{b5}s", 12 * US),
        ("12\u{3bc}s", 12 * US),
        ("13ms", 13 * MS),
        ("14s", 14 * S),
        ("15m", 15 * M),
        ("16h", 16 * H),
        ("3h30m", 3 * H + 30 * M),
        ("10.5s4m", 4 * M + 10 * S + 500 * MS),
        ("-2m3.4s", -(2 * M + 3 * S + 400 * MS)),
        (
            "1h2m3s4ms5us6ns",
            H + 2 * M + 3 * S + 4 * MS + 5 * US + 6 * NS,
        ),
        ("39h9m14.425s", 39 * H + 9 * M + 14 * S + 425 * MS),
        ("52763797000ns", 52_763_797_000),
        ("0.3333333333333333333h", 20 * M),
        ("9007199254740993ns", (1 << 53) + 1),
        ("9223372036854775807ns", i64::MAX),
        ("9223372036854775.807us", i64::MAX),
        ("9223372036s854ms775us807ns", i64::MAX),
        ("-9223372036854775808ns", i64::MIN),
        ("-9223372036854775.808us", i64::MIN),
        ("-9223372036s854ms775us808ns", i64::MIN),
        ("-2562047h47m16.854775808s", i64::MIN),
        ("0.100000000000000000000h", 6 * M),
        ("0.830103483285477580700h", 49 * M + 48 * S + 372_539_827),
        // What OCM's policies write.
        ("1h30m", H + 30 * M),
        ("720h", 720 * H),
        ("100ms", 100 * MS),
        ("300h", 300 * H),
    ];
    for (text, nanos) in cases {
        assert_eq!(GoDuration::parse(text), Ok(GoDuration(*nanos)), "{text:?}");
    }
}

#[test]
fn bad_durations_are_refused_in_gos_words() {
    let cases: &[(&str, &str)] = &[
        ("", r#"time: invalid duration """#),
        ("3", r#"time: missing unit in duration "3""#),
        ("-", r#"time: invalid duration "-""#),
        ("s", r#"time: invalid duration "s""#),
        (".", r#"time: invalid duration ".""#),
        ("-.", r#"time: invalid duration "-.""#),
        (".s", r#"time: invalid duration ".s""#),
        ("+.s", r#"time: invalid duration "+.s""#),
        ("1d", r#"time: unknown unit "d" in duration "1d""#),
        ("1h30", r#"time: missing unit in duration "1h30""#),
        ("1x2h", r#"time: unknown unit "x" in duration "1x2h""#),
        ("\u{fffd}", r#"time: invalid duration "\xef\xbf\xbd""#),
        (
            "1\u{e9}",
            r#"time: unknown unit "\xc3\xa9" in duration "1\xc3\xa9""#,
        ),
        (
            "9223372036854775810ns",
            r#"time: invalid duration "9223372036854775810ns""#,
        ),
        (
            "9223372036854775808ns",
            r#"time: invalid duration "9223372036854775808ns""#,
        ),
        (
            "-9223372036854775809ns",
            r#"time: invalid duration "-9223372036854775809ns""#,
        ),
        (
            "9223372036854775.808us",
            r#"time: invalid duration "9223372036854775.808us""#,
        ),
        (
            "9223372036854ms775us808ns",
            r#"time: invalid duration "9223372036854ms775us808ns""#,
        ),
        ("a\"b", r#"time: invalid duration "a\"b""#),
    ];
    for (text, message) in cases {
        let err = GoDuration::parse(text).expect_err(text);
        assert_eq!(err.to_string(), *message, "{text:?}");
    }
    assert_eq!(
        GoDuration::parse("1d"),
        Err(ParseDurationError::UnknownUnit {
            unit: "d".into(),
            input: "1d".into()
        })
    );
}

#[test]
fn durations_print_as_gos_duration_string() {
    let cases: &[(i64, &str)] = &[
        (0, "0s"),
        (NS, "1ns"),
        (1100 * NS, "1.1\u{b5}s"),
        (2200 * US, "2.2ms"),
        (3300 * MS, "3.3s"),
        (4 * M + 5 * S, "4m5s"),
        (4 * M + 5001 * MS, "4m5.001s"),
        (5 * H + 6 * M + 7001 * MS, "5h6m7.001s"),
        (8 * M + NS, "8m0.000000001s"),
        (i64::MAX, "2562047h47m16.854775807s"),
        (i64::MIN, "-2562047h47m16.854775808s"),
        (300 * H, "300h0m0s"),
        (720 * H, "720h0m0s"),
        (H + 30 * M, "1h30m0s"),
        (100 * MS, "100ms"),
        (-1500 * MS, "-1.5s"),
    ];
    for (nanos, text) in cases {
        assert_eq!(GoDuration(*nanos).to_string(), *text, "{nanos}");
    }
}

#[test]
fn a_printed_duration_parses_back_to_itself() {
    for nanos in [
        0,
        1,
        999,
        1_000,
        1_234_567,
        S,
        61 * S + 5,
        300 * H,
        i64::MAX,
        i64::MIN,
    ] {
        let d = GoDuration(nanos);
        assert_eq!(GoDuration::parse(&d.to_string()), Ok(d), "{d}");
    }
}

#[test]
fn spans_saturate_and_only_non_negative_ones_are_std_durations() {
    assert_eq!(
        GoDuration::saturating_from_nanos(i128::MAX),
        GoDuration(i64::MAX)
    );
    assert_eq!(
        GoDuration::saturating_from_nanos(i128::MIN),
        GoDuration(i64::MIN)
    );
    assert_eq!(GoDuration(-1).to_std(), None);
    assert_eq!(
        GoDuration(1_500).to_std(),
        Some(std::time::Duration::from_nanos(1_500))
    );
}
