use super::*;

const ED25519: &str = "AAAAC3NzaC1lZDI1NTE5AAAAIDzGyaOaiXwnk59mj/J1rtxAN2rUi6nVEWVz8ht9uvYX";
const ECDSA: &str = "AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAIbmlzdHAyNTYAAABBBLtbFHEFCcit56OmD/eoRzaDsMTgZQjDFgF7yanM4vA8tI8V+NuVsqGvuilT/FPCwkFrUPLJzdFbXTG3OmE7KOE=";
/// `ssh-keygen -H` of `git.example.com ssh-ed25519 <ED25519>`.
const HASHED: &str = "|1|/jhDbOsV19tMUnpL7ftx2duyslI=|0tszAg9JIWYWrqlzhXOaLm9kArM=";

fn ed25519() -> Vec<u8> {
    BASE64.decode(ED25519.as_bytes()).unwrap()
}

fn ecdsa() -> Vec<u8> {
    BASE64.decode(ECDSA.as_bytes()).unwrap()
}

fn verdict(text: &str, host: &str, port: u16, algorithm: &str, key: &[u8]) -> Verdict {
    check(
        &parse(text).unwrap(),
        &host_name(host, port),
        algorithm,
        key,
    )
}

#[test]
fn a_listed_key_is_trusted_for_its_host_and_port_only() {
    let text = format!("# keyscan\n\n[127.0.0.1]:2222 ssh-ed25519 {ED25519} comment\n");
    assert_eq!(
        verdict(&text, "127.0.0.1", 2222, "ssh-ed25519", &ed25519()),
        Verdict::Trusted
    );
    assert_eq!(
        verdict(&text, "127.0.0.1", 22, "ssh-ed25519", &ed25519()),
        Verdict::Unknown
    );
    assert_eq!(
        verdict(&text, "127.0.0.2", 2222, "ssh-ed25519", &ed25519()),
        Verdict::Unknown
    );
}

#[test]
fn another_key_for_a_known_host_is_a_mismatch_naming_what_is_known() {
    let text = format!("github.com ssh-ed25519 {ED25519}\n");
    assert_eq!(
        verdict(&text, "github.com", 22, "ecdsa-sha2-nistp256", &ecdsa()),
        Verdict::Mismatch {
            known: vec!["ssh-ed25519".into()]
        }
    );
}

#[test]
fn patterns_lists_wildcards_and_negation() {
    let text = format!("*.example.com,!evil.example.com,git?.corp ssh-ed25519 {ED25519}\n");
    let t = |host| verdict(&text, host, 22, "ssh-ed25519", &ed25519());
    assert_eq!(t("git.example.com"), Verdict::Trusted);
    assert_eq!(t("GIT.Example.COM"), Verdict::Trusted);
    assert_eq!(t("git1.corp"), Verdict::Trusted);
    assert_eq!(t("evil.example.com"), Verdict::Unknown);
    assert_eq!(t("example.com"), Verdict::Unknown);
    assert_eq!(t("git12.corp"), Verdict::Unknown);
}

#[test]
fn hashed_hosts_match_their_name_only() {
    let text = format!("{HASHED} ssh-ed25519 {ED25519}\n");
    assert_eq!(
        verdict(&text, "git.example.com", 22, "ssh-ed25519", &ed25519()),
        Verdict::Trusted
    );
    assert_eq!(
        verdict(&text, "git.example.org", 22, "ssh-ed25519", &ed25519()),
        Verdict::Unknown
    );
    assert_eq!(
        verdict(&text, "Git.Example.COM", 22, "ssh-ed25519", &ed25519()),
        Verdict::Trusted,
        "the name is hashed lower-cased, as OpenSSH does"
    );
}

#[test]
fn a_revoked_key_is_refused_even_when_another_line_trusts_it() {
    let text = format!(
        "git.example.com ssh-ed25519 {ED25519}\n@revoked * ssh-ed25519 {ED25519}\n\
         git.example.com ecdsa-sha2-nistp256 {ECDSA}\n"
    );
    assert_eq!(
        verdict(&text, "git.example.com", 22, "ssh-ed25519", &ed25519()),
        Verdict::Revoked { line: 2 }
    );
    assert_eq!(
        verdict(
            &text,
            "git.example.com",
            22,
            "ecdsa-sha2-nistp256",
            &ecdsa()
        ),
        Verdict::Trusted
    );
}

#[test]
fn unusable_lines_are_named_by_number() {
    let cases = [
        ("h ssh-ed25519\n".to_owned(), 1, "expected `<hosts>"),
        ("\nh ssh-ed25519 not*base64\n".to_owned(), 2, "not base64"),
        (format!("h ssh-rsa {ED25519}\n"), 1, "says ssh-rsa"),
        (
            format!("@cert-authority *.corp ssh-ed25519 {ED25519}\n"),
            1,
            "@cert-authority",
        ),
        (
            format!("@trusted h ssh-ed25519 {ED25519}\n"),
            1,
            "unknown marker",
        ),
        (format!("|2|a|b ssh-ed25519 {ED25519}\n"), 1, "unknown kind"),
        (
            format!("a,,b ssh-ed25519 {ED25519}\n"),
            1,
            "empty host pattern",
        ),
    ];
    for (text, line, says) in cases {
        let e = parse(&text).unwrap_err();
        assert_eq!(e.line, line, "{text}");
        assert!(e.to_string().contains(says), "{text}: {e}");
    }
}

#[test]
fn oversized_texts_are_refused() {
    let text = "#".repeat(MAX_BYTES + 1);
    assert!(parse(&text).unwrap_err().why.contains("at most"));
}

#[test]
fn glob_handles_stars_in_any_place() {
    assert!(glob("*", ""));
    assert!(glob("a*b*c", "aXXbYc"));
    assert!(!glob("a*b*c", "aXXbY"));
    assert!(glob("*.corp", "x.y.corp"));
    assert!(!glob("?", ""));
}
