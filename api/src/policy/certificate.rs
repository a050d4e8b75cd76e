//! A CertificatePolicy (`policy.open-cluster-management.io/v1`, stolostron/cert-policy-controller)
//! read from a policy template's `objectDefinition`, and judged against the cluster's Secrets:
//! certificates that expire within `minimumDuration` (`minimumCADuration` for CA certificates),
//! that live longer than `maximumDuration` (`maximumCADuration`), or whose DNS SANs do not match
//! `allowedSANPattern` or match `disallowedSANPattern` — with the controller's compliance message,
//! byte for byte, and the next instant the verdict can change by time alone. Pure: the clock is
//! an argument.
//!
//! Sources (cert-policy-controller@6077229): `api/v1/certificatepolicy_types.go` (fields),
//! `deploy/crds/kustomize/patches.json` (the CRD's duration pattern),
//! `controllers/certificatepolicy_controller.go` (`checkSecrets`, `parseCertificate`,
//! `isCertificateExpiring`, `isCertificateLongDuration`, `isCertificateSANPatternMismatch`),
//! `controllers/certificatepolicy_utils.go` (`convertPolicyStatusToString`), `main.go` (the
//! default minimum duration the controller is initialised with: 0).

use super::config::{self, NamespaceSelector, Remediation, Severity};
use super::namespaces::{Namespace, select};
use super::{Compliance, FieldError};
use crate::go_duration::GoDuration;
use serde_json::{Map, Value};
use std::collections::{BTreeMap, HashMap};
use time::OffsetDateTime;

/// Template kind.
pub const CERTIFICATE_POLICY: &str = "CertificatePolicy";

/// The minimum duration when a policy sets none. cert-policy-controller's `main.go` parses a
/// `--default-duration` flag (672h) but initialises the reconciler with `time.Duration(0)`
/// (l. 221 at 6077229): only certificates already expired are flagged by default.
pub const DEFAULT_MINIMUM_DURATION: GoDuration = GoDuration::ZERO;

/// The pattern the CRD gives every duration field (`deploy/crds/kustomize/patches.json`).
pub const DURATION_PATTERN: &str = "^(?:(?:[0-9]+(?:.[0-9])?)(?:h|m|s|(?:ms)|(?:us)|(?:ns)))+$";

/// Label naming the Secret's key that holds the certificate (default `tls.crt`).
pub const KEY_NAME_LABEL: &str = "certificate_key_name";
/// The key a certificate is read from when the Secret names none.
pub const DEFAULT_KEY: &str = "tls.crt";
/// Labels naming the certificate (else the Secret's name), in the order they are tried.
pub const NAME_LABELS: [&str; 2] = ["certificate-name", "certmanager.k8s.io/certificate-name"];

/// A SAN pattern: Go regexp syntax, matched anywhere in the name (Go's `MatchString`).
#[derive(Debug, Clone)]
pub struct SanPattern {
    text: String,
    regex: regex::Regex,
}

impl SanPattern {
    /// Compiles a pattern.
    pub fn new(text: &str) -> Result<Self, regex::Error> {
        Ok(Self {
            text: text.to_string(),
            regex: regex::Regex::new(text)?,
        })
    }

    /// The pattern as written (OCM's messages quote it).
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether `name` contains a match.
    pub fn is_match(&self, name: &str) -> bool {
        self.regex.is_match(name)
    }
}

impl PartialEq for SanPattern {
    fn eq(&self, other: &Self) -> bool {
        self.text == other.text
    }
}

/// A CertificatePolicy, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct CertificatePolicy {
    /// `metadata.name`.
    pub name: String,
    /// `remediationAction`; enforce is inform (the controller never changes a Secret).
    pub remediation: Option<Remediation>,
    /// `severity`.
    pub severity: Severity,
    /// `namespaceSelector`: which namespaces' Secrets are read (empty: none).
    pub namespace_selector: NamespaceSelector,
    /// `labelSelector`: only Secrets carrying every one of these labels.
    pub label_selector: BTreeMap<String, String>,
    /// `minimumDuration` (unset: [`DEFAULT_MINIMUM_DURATION`]).
    pub minimum_duration: Option<GoDuration>,
    /// `maximumDuration`.
    pub maximum_duration: Option<GoDuration>,
    /// `minimumCADuration`.
    pub minimum_ca_duration: Option<GoDuration>,
    /// `maximumCADuration`.
    pub maximum_ca_duration: Option<GoDuration>,
    /// `allowedSANPattern`.
    pub allowed_san_pattern: Option<SanPattern>,
    /// `disallowedSANPattern`.
    pub disallowed_san_pattern: Option<SanPattern>,
    /// Paths of fields the CRD does not define ([`super::strict::unknown_fields`]): the agent
    /// reports the template as the API server's strict refusal, not evaluated.
    pub unknown_fields: Vec<String>,
}

impl CertificatePolicy {
    /// Reads a CertificatePolicy from a template's `objectDefinition`; every problem is returned,
    /// each with its path (`spec.minimumDuration`).
    pub fn from_value(object: &Value) -> Result<Self, Vec<FieldError>> {
        let mut errors = Vec::new();
        let name = config::template_name(object, &mut errors);
        let empty = Map::new();
        let spec = match object.get("spec") {
            None | Some(Value::Null) => &empty,
            Some(Value::Object(m)) => m,
            Some(_) => {
                errors.push(FieldError::new("spec", "must be a map"));
                &empty
            }
        };
        let remediation = config::opt_enum(
            spec,
            "remediationAction",
            "spec.remediationAction",
            "inform or enforce",
            Remediation::parse,
            &mut errors,
        );
        let severity = config::opt_enum(
            spec,
            "severity",
            "spec.severity",
            "low, medium, high or critical",
            Severity::parse,
            &mut errors,
        )
        .unwrap_or_default();
        let mut read = |key: &str| duration(spec, key, &mut errors);
        let (minimum_duration, maximum_duration, minimum_ca_duration, maximum_ca_duration) = (
            read("minimumDuration"),
            read("maximumDuration"),
            read("minimumCADuration"),
            read("maximumCADuration"),
        );
        let policy = Self {
            name,
            remediation,
            severity,
            namespace_selector: config::namespace_selector(
                spec.get("namespaceSelector"),
                &mut errors,
            ),
            label_selector: label_selector(spec.get("labelSelector"), &mut errors),
            minimum_duration,
            maximum_duration,
            minimum_ca_duration,
            maximum_ca_duration,
            allowed_san_pattern: pattern(spec, "allowedSANPattern", &mut errors),
            disallowed_san_pattern: pattern(spec, "disallowedSANPattern", &mut errors),
            unknown_fields: super::strict::unknown_fields(CERTIFICATE_POLICY, object)
                .unwrap_or_default(),
        };
        if errors.is_empty() {
            Ok(policy)
        } else {
            Err(errors)
        }
    }

    /// The minimum time left a certificate must have: `minimumCADuration` for a CA certificate
    /// when set, else `minimumDuration` (or the default).
    fn minimum_for(&self, ca: bool) -> GoDuration {
        match self.minimum_ca_duration {
            Some(d) if ca => d,
            _ => self.minimum_duration.unwrap_or(DEFAULT_MINIMUM_DURATION),
        }
    }

    /// The maximum lifetime a certificate may have, if any: `maximumCADuration` for a CA
    /// certificate when set, else `maximumDuration`.
    fn maximum_for(&self, ca: bool) -> Option<GoDuration> {
        match self.maximum_ca_duration {
            Some(d) if ca => Some(d),
            _ => self.maximum_duration,
        }
    }
}

/// A Go duration field: the CRD's pattern first (the API server's check), then
/// `time.ParseDuration` (`metav1.Duration`'s decoding).
fn duration(
    spec: &Map<String, Value>,
    key: &str,
    errors: &mut Vec<FieldError>,
) -> Option<GoDuration> {
    let path = format!("spec.{key}");
    let text = config::opt_str(spec, key, &path, errors)?;
    static PATTERN: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(DURATION_PATTERN).expect("the CRD's pattern compiles")
    });
    if !PATTERN.is_match(text) {
        errors.push(FieldError::new(
            &path,
            format!("Invalid value: {text:?}: {path} in body should match '{DURATION_PATTERN}'"),
        ));
        return None;
    }
    GoDuration::parse(text)
        .map_err(|e| errors.push(FieldError::new(&path, e.to_string())))
        .ok()
}

fn pattern(
    spec: &Map<String, Value>,
    key: &str,
    errors: &mut Vec<FieldError>,
) -> Option<SanPattern> {
    let path = format!("spec.{key}");
    let text = config::opt_str(spec, key, &path, errors)?;
    SanPattern::new(text)
        .map_err(|e| errors.push(FieldError::new(&path, e.to_string())))
        .ok()
}

fn label_selector(v: Option<&Value>, errors: &mut Vec<FieldError>) -> BTreeMap<String, String> {
    const PATH: &str = "spec.labelSelector";
    let mut out = BTreeMap::new();
    match v {
        None | Some(Value::Null) => {}
        Some(Value::Object(map)) => {
            for (k, v) in map {
                match v.as_str() {
                    Some("") => {
                        errors.push(FieldError::new(format!("{PATH}.{k}"), "must not be empty"))
                    }
                    Some(s) => {
                        out.insert(k.clone(), s.to_string());
                    }
                    None => errors.push(FieldError::new(format!("{PATH}.{k}"), "must be a string")),
                }
            }
        }
        Some(_) => errors.push(FieldError::new(PATH, "must be a map")),
    }
    out
}

/// The first certificate of a Secret, as the controller reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Certificate {
    /// The Secret holding it.
    pub secret: String,
    /// `NotBefore`.
    pub not_before: OffsetDateTime,
    /// `NotAfter`.
    pub not_after: OffsetDateTime,
    /// Basic constraints `CA:true`.
    pub ca: bool,
    /// DNS names of the subject alternative names (Go's `DNSNames`; other kinds are not
    /// checked).
    pub sans: Vec<String>,
}

impl Certificate {
    /// Reads the certificate of a Secret: the key its `certificate_key_name` label names, else
    /// `tls.crt`; every PEM block must be a certificate that parses (else the Secret is skipped,
    /// as the controller's `DecodeCertificateBytes` fails); the first is the one judged.
    /// `None`: nothing to judge.
    pub fn of_secret(secret: &Value) -> Option<Self> {
        let labels = config::labels_of(secret);
        let key = labels
            .get(KEY_NAME_LABEL)
            .filter(|k| !k.is_empty())
            .map_or(DEFAULT_KEY, String::as_str);
        let encoded = secret.get("data")?.get(key)?.as_str()?;
        let pem = data_encoding::BASE64.decode(encoded.as_bytes()).ok()?;
        let mut first = None;
        for block in x509_parser::pem::Pem::iter_from_buffer(&pem) {
            // A block whose armour or base64 is broken is passed over, as Go's `pem.Decode`.
            let Ok(block) = block else { continue };
            let cert = block.parse_x509().ok()?;
            if first.is_none() {
                first = Some(Self::from_x509(&cert, name_of(secret)));
            }
        }
        first
    }

    fn from_x509(cert: &x509_parser::certificate::X509Certificate<'_>, secret: &str) -> Self {
        use x509_parser::extensions::GeneralName;
        let sans = cert
            .subject_alternative_name()
            .ok()
            .flatten()
            .map(|ext| {
                ext.value
                    .general_names
                    .iter()
                    .filter_map(|n| match n {
                        GeneralName::DNSName(d) => Some(d.to_string()),
                        _ => None,
                    })
                    .collect()
            })
            .unwrap_or_default();
        Self {
            secret: secret.to_string(),
            not_before: cert.validity().not_before.to_datetime(),
            not_after: cert.validity().not_after.to_datetime(),
            ca: cert.is_ca(),
            sans,
        }
    }

    /// Time left at `now` (negative once expired).
    pub fn expiry(&self, now: OffsetDateTime) -> GoDuration {
        span(now, self.not_after)
    }

    /// `NotAfter − NotBefore`.
    pub fn lifetime(&self) -> GoDuration {
        span(self.not_before, self.not_after)
    }
}

fn span(from: OffsetDateTime, to: OffsetDateTime) -> GoDuration {
    GoDuration::saturating_from_nanos((to - from).whole_nanoseconds())
}

fn name_of(object: &Value) -> &str {
    object
        .get("metadata")
        .and_then(|m| m.get("name"))
        .and_then(Value::as_str)
        .unwrap_or_default()
}

fn namespace_of(object: &Value) -> &str {
    object
        .get("metadata")
        .and_then(|m| m.get("namespace"))
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// Which checks a certificate fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Failures {
    /// Fewer than the minimum duration left.
    pub expiring: bool,
    /// A lifetime above the maximum.
    pub too_long: bool,
    /// A DNS SAN outside the allowed pattern or inside the disallowed one.
    pub san_mismatch: bool,
}

impl Failures {
    /// Whether any check failed.
    pub fn any(self) -> bool {
        self.expiring || self.too_long || self.san_mismatch
    }
}

/// A certificate that fails a check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Flagged {
    /// The certificate.
    pub certificate: Certificate,
    /// What it fails.
    pub failures: Failures,
}

/// The outcome of judging a CertificatePolicy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertificateVerdict {
    /// Compliant, or NonCompliant when a certificate fails a check.
    pub compliance: Compliance,
    /// The message the controller sends to the parent policy
    /// (`NonCompliant; 1 certificates expire in less than 300h0m0s: default:web\n`).
    pub message: String,
    /// Per selected namespace (the empty name when none is selected), the flagged certificates
    /// by certificate name (the `certificate-name` label, else cert-manager's, else the Secret).
    pub namespaces: BTreeMap<String, BTreeMap<String, Flagged>>,
    /// The earliest instant after `now` at which a certificate crosses its minimum duration,
    /// so the verdict changes without any Secret changing.
    pub next_check: Option<OffsetDateTime>,
}

/// Judges `policy` against the cluster's `namespaces` and `secrets` (Secret objects as the API
/// serves them, `data` base64) at `now`.
pub fn judge(
    policy: &CertificatePolicy,
    namespaces: &[Namespace],
    secrets: &[Value],
    now: OffsetDateTime,
) -> CertificateVerdict {
    let selected = select(&policy.namespace_selector, namespaces);
    let mut by_namespace: BTreeMap<String, BTreeMap<String, Flagged>> = BTreeMap::new();
    let mut next_check: Option<OffsetDateTime> = None;
    if selected.is_empty() {
        by_namespace.insert(String::new(), BTreeMap::new());
    }
    for ns in &selected {
        let flagged = by_namespace.entry(ns.clone()).or_default();
        // The API server lists by name; a later Secret naming the same certificate wins.
        let mut in_scope: Vec<&Value> = secrets
            .iter()
            .filter(|s| namespace_of(s) == ns)
            .filter(|s| labels_match(&policy.label_selector, &config::labels_of(s)))
            .collect();
        in_scope.sort_by_key(|s| name_of(s));
        for secret in in_scope {
            let Some(cert) = Certificate::of_secret(secret) else {
                continue;
            };
            if let Some(at) = crossing(policy, &cert).filter(|at| *at > now)
                && next_check.is_none_or(|n| at < n)
            {
                next_check = Some(at);
            }
            let failures = failures(policy, &cert, now);
            if failures.any() {
                flagged.insert(
                    certificate_name(secret),
                    Flagged {
                        certificate: cert,
                        failures,
                    },
                );
            }
        }
    }
    let compliance = if by_namespace.values().any(|f| !f.is_empty()) {
        Compliance::NonCompliant
    } else {
        Compliance::Compliant
    };
    CertificateVerdict {
        compliance,
        message: message(policy, compliance, &by_namespace),
        namespaces: by_namespace,
        next_check,
    }
}

/// The first instant at which the certificate has less than its minimum duration left (just
/// after `NotAfter − minimum`); `None` when that is outside the calendar.
fn crossing(policy: &CertificatePolicy, cert: &Certificate) -> Option<OffsetDateTime> {
    let minimum = time::Duration::nanoseconds(policy.minimum_for(cert.ca).as_nanos());
    cert.not_after
        .checked_sub(minimum)?
        .checked_add(time::Duration::nanoseconds(1))
}

fn labels_match(want: &BTreeMap<String, String>, labels: &HashMap<String, String>) -> bool {
    want.iter().all(|(k, v)| labels.get(k) == Some(v))
}

/// The certificate's name: its `certificate-name` label, else cert-manager's, else the Secret's.
fn certificate_name(secret: &Value) -> String {
    let labels = config::labels_of(secret);
    NAME_LABELS
        .iter()
        .filter_map(|l| labels.get(*l))
        .find(|v| !v.is_empty())
        .cloned()
        .unwrap_or_else(|| name_of(secret).to_string())
}

/// The checks a certificate fails at `now`.
pub fn failures(policy: &CertificatePolicy, cert: &Certificate, now: OffsetDateTime) -> Failures {
    let sans_fail = |p: &Option<SanPattern>, fail_on_match: bool| {
        p.as_ref()
            .is_some_and(|p| cert.sans.iter().any(|san| p.is_match(san) == fail_on_match))
    };
    Failures {
        expiring: cert.expiry(now) < policy.minimum_for(cert.ca),
        too_long: policy
            .maximum_for(cert.ca)
            .is_some_and(|max| cert.lifetime() > max),
        san_mismatch: sans_fail(&policy.allowed_san_pattern, false)
            || sans_fail(&policy.disallowed_san_pattern, true),
    }
}

/// `convertPolicyStatusToString`: `Compliant; …` or `NonCompliant; ` and a line per kind of
/// failure, the flagged Secrets as `namespace:secret` (namespaces sorted; within one, by
/// certificate name — Go ranges over a map there, in no fixed order).
fn message(
    policy: &CertificatePolicy,
    compliance: Compliance,
    namespaces: &BTreeMap<String, BTreeMap<String, Flagged>>,
) -> String {
    if compliance == Compliance::Compliant {
        let nothing_selected = namespaces.len() == 1 && namespaces.contains_key("");
        return if nothing_selected {
            "Compliant; No namespaces matched the namespace selector.".to_string()
        } else {
            "Compliant; All evaluated certificates are compliant".to_string()
        };
    }
    // One list per line kind, in the controller's order.
    let mut lists: [Vec<String>; 5] = Default::default();
    for (ns, flagged) in namespaces {
        for f in flagged.values() {
            let (ca, at) = (f.certificate.ca, format!("{ns}:{}", f.certificate.secret));
            if f.failures.expiring {
                let i = usize::from(ca && policy.minimum_ca_duration.is_some());
                lists[i].push(at.clone());
            }
            if f.failures.too_long {
                let i = 2 + usize::from(ca && policy.maximum_ca_duration.is_some());
                lists[i].push(at.clone());
            }
            if f.failures.san_mismatch {
                lists[4].push(at);
            }
        }
    }
    let text = |d: Option<GoDuration>| d.unwrap_or_default().to_string();
    let minimum = policy
        .minimum_duration
        .unwrap_or(DEFAULT_MINIMUM_DURATION)
        .to_string();
    let heads = [
        format!("certificates expire in less than {minimum}"),
        format!(
            "CA certificates expire in less than {}",
            text(policy.minimum_ca_duration)
        ),
        format!(
            "certificates exceed the maximum duration of {}",
            text(policy.maximum_duration)
        ),
        format!(
            "CA certificates exceed the maximum duration of {}",
            text(policy.maximum_ca_duration)
        ),
        format!(
            "certificates defined SAN entries do not match pattern {}",
            patterns_used(policy)
        ),
    ];
    let mut out = String::new();
    for (i, (head, list)) in heads.iter().zip(&lists).enumerate() {
        if list.is_empty() {
            continue;
        }
        // Every line but the controller's first is appended after a space.
        if i > 0 {
            out.push(' ');
        }
        out.push_str(&format!("{} {head}: {}\n", list.len(), list.join(", ")));
    }
    format!("NonCompliant; {out}")
}

/// `getPatternsUsed`: `Allowed: <p>`, ` Disallowed: <p>`, or both.
fn patterns_used(policy: &CertificatePolicy) -> String {
    let mut out = String::new();
    if let Some(p) = &policy.allowed_san_pattern {
        out = format!("Allowed: {}", p.as_str());
    }
    if let Some(p) = &policy.disallowed_san_pattern {
        out = format!("{out} Disallowed: {}", p.as_str());
    }
    out
}
