use super::*;

/// The descriptor set of one `.proto` text (package `t`), compiled with protox from a
/// temporary directory.
fn set(source: &str) -> FileDescriptorSet {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("flotilla-compat-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("t.proto"),
        format!("syntax = \"proto3\";\npackage t;\n{source}"),
    )
    .unwrap();
    let set = protox::compile(["t.proto"], [&dir]).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    set
}

const BASE: &str = "
message Report {
  string cluster = 1;
  int64 observed_generation = 4;
  repeated string conditions = 5;
  oneof source { string agent = 6; string hub = 7; }
  Inner inner = 8;
  message Inner { bytes raw = 1; }
}
enum State { STATE_UNSPECIFIED = 0; STATE_APPLIED = 1; STATE_FAILED = 2; }
service Reports { rpc Send(Report) returns (Report); }
";

fn findings(old: &str, new: &str) -> Vec<String> {
    breaking(&set(old), &set(new))
        .iter()
        .map(ToString::to_string)
        .collect()
}

#[test]
fn the_same_set_breaks_nothing() {
    assert!(findings(BASE, BASE).is_empty());
}

#[test]
fn a_renumbered_field_is_breaking() {
    let new = BASE.replace(
        "int64 observed_generation = 4;",
        "int64 observed_generation = 9;",
    );
    assert_eq!(
        findings(BASE, &new),
        ["t.Report field observed_generation: renumbered 4 → 9"]
    );
}

#[test]
fn a_retyped_field_is_breaking_unless_the_wire_reads_it_the_same() {
    let retyped = BASE.replace("int64 observed_generation", "string observed_generation");
    assert_eq!(
        findings(BASE, &retyped),
        ["t.Report field 4 (observed_generation): int64 → string"]
    );
    // Varints read as each other; string and bytes are the same bytes; bytes hold a message.
    let widened = BASE
        .replace("int64 observed_generation", "uint64 observed_generation")
        .replace("string cluster = 1", "bytes cluster = 1")
        .replace("bytes raw = 1", "Report raw = 1");
    assert!(
        findings(BASE, &widened).is_empty(),
        "{:?}",
        findings(BASE, &widened)
    );
}

#[test]
fn removing_a_field_breaks_unless_its_number_is_reserved_and_renaming_does_not() {
    let removed = BASE.replace("int64 observed_generation = 4;", "");
    assert_eq!(
        findings(BASE, &removed),
        ["t.Report field 4 (observed_generation): removed without reserving its number"]
    );
    let reserved = BASE.replace(
        "int64 observed_generation = 4;",
        "reserved 4; reserved \"observed_generation\";",
    );
    assert!(findings(BASE, &reserved).is_empty());
    let renamed = BASE.replace("observed_generation", "generation");
    assert!(findings(BASE, &renamed).is_empty());
    let added = BASE.replace(
        "string cluster = 1;",
        "string cluster = 1; string site = 10;",
    );
    assert!(findings(BASE, &added).is_empty());
}

#[test]
fn cardinality_oneofs_messages_enums_and_rpcs_are_checked() {
    let new = BASE
        .replace("repeated string conditions", "string conditions")
        .replace(
            "oneof source { string agent = 6; string hub = 7; }",
            "string agent = 6; oneof source { string hub = 7; }",
        )
        .replace(" STATE_FAILED = 2;", " STATE_FAILED = 3;")
        .replace(
            "rpc Send(Report) returns (Report);",
            "rpc Send(stream Report) returns (Report);",
        );
    assert_eq!(
        findings(BASE, &new),
        [
            "t.Report field 5 (conditions): repeated changed to singular or back",
            "t.Report field 6 (agent): moved into, out of or between oneofs",
            "t.State value STATE_FAILED: renumbered 2 → 3",
            "t.Reports/Send: streaming changed",
        ]
    );
    let gone = BASE
        .replace("  message Inner { bytes raw = 1; }\n", "")
        .replace("Inner inner = 8;", "reserved 8;")
        .replace("service Reports { rpc Send(Report) returns (Report); }", "");
    assert_eq!(
        findings(BASE, &gone),
        [
            "t.Report.Inner: message removed",
            "t.Reports/Send: RPC removed"
        ]
    );
}
