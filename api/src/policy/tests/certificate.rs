//! CertificatePolicy: reading the spec, and judging certificates made with `rcgen` against it,
//! with cert-policy-controller's messages (`controllers/certificatepolicy_utils.go`
//! `convertPolicyStatusToString` at 6077229).

use crate::go_duration::GoDuration;
use crate::policy::Compliance;
use crate::policy::certificate::*;
use crate::policy::namespaces::Namespace;
use serde_json::{Value, json};
use time::{Duration, OffsetDateTime};

const POLICY_CERTIFICATE: &str = include_str!("../../ocm/policy/testdata/policy-certificate.yaml");

/// The instant every test judges at: 2026-11-29T12:00:00Z.
fn now() -> OffsetDateTime {
    OffsetDateTime::from_unix_timestamp(1_795_953_600).expect("a valid instant")
}
const HOUR: i64 = 3_600_000_000_000;

/// policy-collection's policy-certificate, its CertificatePolicy as written.
fn collection_policy() -> CertificatePolicy {
    let root: Value = serde_yaml::from_str(POLICY_CERTIFICATE).expect("fixture parses");
    let template = &root["spec"]["policy-templates"][0]["objectDefinition"];
    CertificatePolicy::from_value(template).expect("the fixture is valid")
}

/// A CertificatePolicy from its spec.
fn policy(spec: Value) -> CertificatePolicy {
    CertificatePolicy::from_value(&certificate_policy(spec)).expect("valid policy")
}

fn certificate_policy(spec: Value) -> Value {
    json!({
        "apiVersion": "policy.open-cluster-management.io/v1",
        "kind": "CertificatePolicy",
        "metadata": {"name": "certs"},
        "spec": spec,
    })
}

fn errors(spec: Value) -> Vec<String> {
    CertificatePolicy::from_value(&certificate_policy(spec))
        .expect_err("invalid")
        .into_iter()
        .map(|e| e.to_string())
        .collect()
}

/// A certificate to put in a Secret.
struct Cert {
    not_before: OffsetDateTime,
    not_after: OffsetDateTime,
    sans: Vec<String>,
    ca: bool,
}

impl Cert {
    /// Valid from a day before [`now`] until `left` after it.
    fn expiring_in(left: Duration) -> Self {
        Self {
            not_before: now() - Duration::days(1),
            not_after: now() + left,
            sans: vec!["web.example.com".into()],
            ca: false,
        }
    }

    fn ca(mut self) -> Self {
        self.ca = true;
        self
    }

    fn sans(mut self, sans: &[&str]) -> Self {
        self.sans = sans.iter().map(|s| s.to_string()).collect();
        self
    }

    fn lifetime(mut self, lifetime: Duration) -> Self {
        self.not_before = self.not_after - lifetime;
        self
    }

    fn pem(&self) -> String {
        let mut params = rcgen::CertificateParams::new(self.sans.clone()).expect("params");
        params.not_before = self.not_before;
        params.not_after = self.not_after;
        if self.ca {
            params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        }
        let key = rcgen::KeyPair::generate().expect("key");
        params.self_signed(&key).expect("certificate").pem()
    }
}

/// A Secret builder: `kubernetes.io/tls`, the certificate under `tls.crt` unless told.
struct Secret(Value);

impl Secret {
    fn new(namespace: &str, name: &str) -> Self {
        Self(json!({
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"namespace": namespace, "name": name, "labels": {}},
            "type": "kubernetes.io/tls",
            "data": {},
        }))
    }

    fn with(self, cert: &Cert) -> Self {
        self.key("tls.crt", &cert.pem())
    }

    fn key(mut self, key: &str, text: &str) -> Self {
        self.0["data"][key] = json!(data_encoding::BASE64.encode(text.as_bytes()));
        self
    }

    fn label(mut self, key: &str, value: &str) -> Self {
        self.0["metadata"]["labels"][key] = json!(value);
        self
    }
}

fn namespaces(names: &[&str]) -> Vec<Namespace> {
    names
        .iter()
        .map(|n| Namespace {
            name: n.to_string(),
            labels: [("team".to_string(), format!("team-{n}"))].into(),
        })
        .collect()
}

fn judge_at(policy: &CertificatePolicy, secrets: Vec<Secret>) -> CertificateVerdict {
    let secrets: Vec<Value> = secrets.into_iter().map(|s| s.0).collect();
    judge(
        policy,
        &namespaces(&["default", "kube-system", "web"]),
        &secrets,
        now(),
    )
}

#[test]
fn a_certificate_expiring_in_ten_days_is_flagged_by_policy_collections_policy() {
    let p = collection_policy();
    assert_eq!(p.minimum_duration, Some(GoDuration(300 * HOUR)));
    assert!(p.unknown_fields.is_empty(), "{:?}", p.unknown_fields);
    let v = judge_at(
        &p,
        vec![
            Secret::new("default", "web-tls").with(&Cert::expiring_in(Duration::days(10))),
            Secret::new("default", "api-tls").with(&Cert::expiring_in(Duration::days(90))),
            // Not in a selected namespace.
            Secret::new("web", "old-tls").with(&Cert::expiring_in(Duration::days(1))),
        ],
    );
    assert_eq!(v.compliance, Compliance::NonCompliant);
    assert_eq!(
        v.message,
        "NonCompliant; 1 certificates expire in less than 300h0m0s: default:web-tls\n"
    );
    let flagged = &v.namespaces["default"]["web-tls"];
    assert!(flagged.failures.expiring && !flagged.failures.too_long);
    // The 90-day certificate crosses the 300h line next.
    assert_eq!(
        v.next_check,
        Some(now() + Duration::days(90) - Duration::hours(300) + Duration::nanoseconds(1))
    );
}

#[test]
fn without_a_minimum_only_expired_certificates_are_flagged() {
    let p = policy(json!({"namespaceSelector": {"include": ["default"]}}));
    let v = judge_at(
        &p,
        vec![
            Secret::new("default", "fresh").with(&Cert::expiring_in(Duration::hours(1))),
            Secret::new("default", "stale").with(&Cert::expiring_in(Duration::hours(-1))),
        ],
    );
    assert_eq!(
        v.message,
        "NonCompliant; 1 certificates expire in less than 0s: default:stale\n"
    );
    assert_eq!(
        v.next_check,
        Some(now() + Duration::hours(1) + Duration::nanoseconds(1))
    );
}

#[test]
fn compliant_messages_say_whether_any_namespace_was_selected() {
    let cert = Secret::new("default", "web").with(&Cert::expiring_in(Duration::days(400)));
    let selected = judge_at(
        &policy(json!({"namespaceSelector": {"include": ["default"]}, "minimumDuration": "720h"})),
        vec![cert],
    );
    assert_eq!(selected.compliance, Compliance::Compliant);
    assert_eq!(
        selected.message,
        "Compliant; All evaluated certificates are compliant"
    );
    // An empty selector selects nothing; so does one matching no namespace.
    for selector in [json!({}), json!({"include": ["nope-*"]})] {
        let v = judge_at(&policy(json!({"namespaceSelector": selector})), vec![]);
        assert_eq!(v.compliance, Compliance::Compliant);
        assert_eq!(
            v.message,
            "Compliant; No namespaces matched the namespace selector."
        );
        assert_eq!(v.next_check, None);
    }
}

#[test]
fn ca_certificates_are_judged_by_the_ca_limits_when_set() {
    let p = policy(json!({
        "namespaceSelector": {"include": ["*"], "exclude": ["kube-*"]},
        "minimumDuration": "100h",
        "minimumCADuration": "1000h",
        "maximumDuration": "2160h",
        "maximumCADuration": "26280h",
    }));
    let v = judge_at(
        &p,
        vec![
            // CA: 500h left < 1000h; lifetime 5y > 3y.
            Secret::new("default", "root-ca").with(
                &Cert::expiring_in(Duration::hours(500))
                    .ca()
                    .lifetime(Duration::days(5 * 365)),
            ),
            // CA within both CA limits, though outside the leaf ones.
            Secret::new("web", "mid-ca").with(
                &Cert::expiring_in(Duration::hours(2000))
                    .ca()
                    .lifetime(Duration::days(365)),
            ),
            // Leaf: 50h left, 100 days long.
            Secret::new("web", "leaf")
                .with(&Cert::expiring_in(Duration::hours(50)).lifetime(Duration::days(100))),
            // Excluded namespace.
            Secret::new("kube-system", "x").with(&Cert::expiring_in(Duration::hours(1))),
        ],
    );
    assert_eq!(
        v.message,
        "NonCompliant; 1 certificates expire in less than 100h0m0s: web:leaf\n \
         1 CA certificates expire in less than 1000h0m0s: default:root-ca\n \
         1 certificates exceed the maximum duration of 2160h0m0s: web:leaf\n \
         1 CA certificates exceed the maximum duration of 26280h0m0s: default:root-ca\n"
    );
    assert!(!v.namespaces["web"].contains_key("mid-ca"));
}

#[test]
fn a_ca_without_ca_limits_is_judged_as_any_certificate() {
    let p = policy(json!({
        "namespaceSelector": {"include": ["default"]},
        "minimumDuration": "100h",
        "maximumDuration": "2160h",
    }));
    let v = judge_at(
        &p,
        vec![
            Secret::new("default", "ca").with(
                &Cert::expiring_in(Duration::hours(10))
                    .ca()
                    .lifetime(Duration::days(365)),
            ),
        ],
    );
    assert_eq!(
        v.message,
        "NonCompliant; 1 certificates expire in less than 100h0m0s: default:ca\n \
         1 certificates exceed the maximum duration of 2160h0m0s: default:ca\n"
    );
}

#[test]
fn only_the_ca_lines_start_the_message_with_two_spaces() {
    // The controller appends every line but the first after a space, even when the first is
    // absent: the CA line then follows "NonCompliant; " with a second space.
    let p = policy(json!({
        "namespaceSelector": {"include": ["default"]},
        "minimumCADuration": "1000h",
    }));
    let v = judge_at(
        &p,
        vec![Secret::new("default", "ca").with(&Cert::expiring_in(Duration::hours(10)).ca())],
    );
    assert_eq!(
        v.message,
        "NonCompliant;  1 CA certificates expire in less than 1000h0m0s: default:ca\n"
    );
}

#[test]
fn dns_sans_are_matched_against_the_allowed_and_disallowed_patterns() {
    let p = policy(json!({
        "namespaceSelector": {"matchLabels": {"team": "team-web"}},
        "allowedSANPattern": "\\.example\\.com$",
        "disallowedSANPattern": "^internal\\.",
    }));
    let long = Duration::days(365);
    let v = judge_at(
        &p,
        vec![
            Secret::new("web", "a-good").with(&Cert::expiring_in(long).sans(&["a.example.com"])),
            Secret::new("web", "b-foreign")
                .with(&Cert::expiring_in(long).sans(&["a.example.com", "a.example.org"])),
            Secret::new("web", "c-internal")
                .with(&Cert::expiring_in(long).sans(&["internal.example.com"])),
            // An IP SAN is not a DNS name: never checked.
            Secret::new("web", "d-ip").with(&Cert::expiring_in(long).sans(&["10.0.0.1"])),
            // Not selected: another team's namespace.
            Secret::new("default", "e").with(&Cert::expiring_in(long).sans(&["x.org"])),
        ],
    );
    assert_eq!(
        v.message,
        "NonCompliant;  2 certificates defined SAN entries do not match pattern \
         Allowed: \\.example\\.com$ Disallowed: ^internal\\.: web:b-foreign, web:c-internal\n"
    );
    let only_disallowed = policy(json!({
        "namespaceSelector": {"include": ["web"]},
        "disallowedSANPattern": "^internal\\.",
    }));
    let v = judge_at(
        &only_disallowed,
        vec![Secret::new("web", "c").with(&Cert::expiring_in(long).sans(&["internal.a"]))],
    );
    assert_eq!(
        v.message,
        "NonCompliant;  1 certificates defined SAN entries do not match pattern  \
         Disallowed: ^internal\\.: web:c\n"
    );
}

#[test]
fn secrets_are_chosen_by_labels_and_named_by_their_certificate_labels() {
    let p = policy(json!({
        "namespaceSelector": {"include": ["default"]},
        "labelSelector": {"app": "web"},
        "minimumDuration": "100h",
    }));
    let soon = Cert::expiring_in(Duration::hours(1));
    let v = judge_at(
        &p,
        vec![
            Secret::new("default", "s1").label("app", "web").with(&soon),
            Secret::new("default", "s2")
                .label("app", "web")
                .label("certificate-name", "web-cert")
                .with(&soon),
            Secret::new("default", "s3")
                .label("app", "web")
                .label("certmanager.k8s.io/certificate-name", "cm-cert")
                .with(&soon),
            Secret::new("default", "s4").label("app", "db").with(&soon),
        ],
    );
    let names: Vec<&str> = v.namespaces["default"].keys().map(String::as_str).collect();
    assert_eq!(names, ["cm-cert", "s1", "web-cert"]);
    // The message names Secrets, in certificate-name order within a namespace.
    assert_eq!(
        v.message,
        "NonCompliant; 3 certificates expire in less than 100h0m0s: default:s3, default:s1, default:s2\n"
    );
}

#[test]
fn the_certificate_is_read_from_the_key_a_label_names_and_unreadable_secrets_are_skipped() {
    let p = policy(json!({"namespaceSelector": {"include": ["default"]}}));
    let expired = Cert::expiring_in(Duration::hours(-2));
    let chain = format!(
        "{}{}",
        expired.pem(),
        Cert::expiring_in(Duration::days(9)).pem()
    );
    let v = judge_at(
        &p,
        vec![
            Secret::new("default", "custom-key")
                .label("certificate_key_name", "cert.pem")
                .key("cert.pem", &expired.pem()),
            // A chain: the first certificate is judged.
            Secret::new("default", "chain").key("tls.crt", &chain),
            // Not PEM, a key where a certificate should be, and no tls.crt at all.
            Secret::new("default", "garbage").key("tls.crt", "not a certificate"),
            Secret::new("default", "key-only").key(
                "tls.crt",
                &rcgen::KeyPair::generate().expect("key").serialize_pem(),
            ),
            Secret::new("default", "opaque").key("password", "hunter2"),
        ],
    );
    assert_eq!(
        v.message,
        "NonCompliant; 2 certificates expire in less than 0s: default:chain, default:custom-key\n"
    );
}

#[test]
fn the_spec_is_read_with_every_problem_named_by_its_field() {
    let p = policy(json!({
        "remediationAction": "enforce",
        "severity": "High",
        "namespaceSelector": {"include": ["a-*"], "exclude": ["a-b"]},
        "labelSelector": {"app": "web"},
        "minimumDuration": "1h30m",
        "maximumDuration": "720h",
        "minimumCADuration": "100ms",
        "maximumCADuration": "2h45m30s",
        "allowedSANPattern": ".*",
        "extra": true,
    }));
    assert_eq!(p.minimum_duration, Some(GoDuration(HOUR * 3 / 2)));
    assert_eq!(p.maximum_duration, Some(GoDuration(720 * HOUR)));
    assert_eq!(p.minimum_ca_duration, Some(GoDuration(100_000_000)));
    assert_eq!(p.unknown_fields, ["spec.extra"]);
    assert_eq!(p.label_selector["app"], "web");
    assert_eq!(
        p.allowed_san_pattern.as_ref().map(SanPattern::as_str),
        Some(".*")
    );

    let errs = errors(json!({
        "severity": "urgent",
        "minimumDuration": "-1h",
        "maximumDuration": "10d",
        "minimumCADuration": "99999999999h",
        "allowedSANPattern": "(",
        "labelSelector": {"app": ""},
        "namespaceSelector": {"include": ["[a"]},
    }));
    let want = [
        "spec.severity: unknown value \"urgent\" (want low, medium, high or critical)",
        &format!(
            "spec.minimumDuration: Invalid value: \"-1h\": spec.minimumDuration in body should \
             match '{DURATION_PATTERN}'"
        ),
        &format!(
            "spec.maximumDuration: Invalid value: \"10d\": spec.maximumDuration in body should \
             match '{DURATION_PATTERN}'"
        ),
        "spec.minimumCADuration: time: invalid duration \"99999999999h\"",
    ];
    for w in want {
        assert!(errs.iter().any(|e| e == w), "missing {w:?} in {errs:#?}");
    }
    for path in [
        "spec.allowedSANPattern: ",
        "spec.labelSelector.app: must not be empty",
        "spec.namespaceSelector.include[0]: ",
    ] {
        assert!(
            errs.iter().any(|e| e.starts_with(path)),
            "missing {path:?} in {errs:#?}"
        );
    }
}
