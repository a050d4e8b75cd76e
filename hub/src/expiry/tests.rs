use super::*;
use flotilla_auth::jwt::Claims;
use flotilla_auth::{Creds, Secret, setup};
use nkeys::KeyPair;

const DAY: i64 = 86_400;

/// A self-signed certificate valid until `y-m-d`, as PEM.
fn certificate(y: i32, m: u8, d: u8) -> String {
    let mut params = rcgen::CertificateParams::new(vec!["hub.example".to_string()]).unwrap();
    params.not_after = rcgen::date_time_ymd(y, m, d);
    let key = rcgen::KeyPair::generate().unwrap();
    params.self_signed(&key).unwrap().pem()
}

/// A credentials file whose user JWT expires at `exp`.
fn creds(exp: Option<i64>) -> String {
    let account = KeyPair::new_account();
    let user = KeyPair::new_user();
    let mut claims = Claims::new(
        "flotilla-hub",
        user.public_key(),
        1_700_000_000,
        setup_user(),
    );
    claims.exp = exp;
    let jwt = claims.encode(&account).unwrap();
    let creds = Creds {
        jwt,
        seed: Secret::new(user.seed().unwrap()),
    };
    creds.format().expose().to_string()
}

fn setup_user() -> User {
    flotilla_auth::permissions::hub()
}

fn source(dir: &Path, what: &'static str, text: &str, format: Format) -> Source {
    let path = dir.join(what);
    std::fs::write(&path, text).unwrap();
    Source { what, path, format }
}

#[test]
fn a_bundle_expires_with_its_earliest_certificate_and_a_jwt_with_its_exp() {
    let dir = tempfile::tempdir().unwrap();
    let bundle = format!("{}{}", certificate(2031, 1, 1), certificate(2029, 6, 30));
    let ca = source(dir.path(), "nats-ca", &bundle, Format::Certificates);
    // 2029-06-30T00:00:00Z.
    assert_eq!(read(&ca).unwrap(), Some(1_877_472_000));
    let hub = source(
        dir.path(),
        "hub-creds",
        &creds(Some(1_900_000_000)),
        Format::Creds,
    );
    assert_eq!(read(&hub).unwrap(), Some(1_900_000_000));
    let never = source(dir.path(), "sys-creds", &creds(None), Format::Creds);
    assert_eq!(read(&never).unwrap(), None);
}

#[test]
fn a_file_that_is_not_what_it_should_be_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let key_only = source(
        dir.path(),
        "api-tls-cert",
        "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
        Format::Certificates,
    );
    let e = read(&key_only).unwrap_err().to_string();
    assert!(
        e.contains("api-tls-cert") && e.contains("no CERTIFICATE block"),
        "{e}"
    );
    let not_creds = source(dir.path(), "hub-creds", "hello", Format::Creds);
    let e = read(&not_creds).unwrap_err().to_string();
    assert!(
        e.contains("hub-creds") && e.contains("BEGIN NATS USER JWT"),
        "{e}"
    );
    let missing = Source {
        what: "nats-ca",
        path: dir.path().join("absent.pem"),
        format: Format::Certificates,
    };
    assert!(
        read(&missing)
            .unwrap_err()
            .to_string()
            .contains("absent.pem")
    );
}

#[test]
fn a_secure_directory_names_its_ca_client_certificate_and_both_creds() {
    let dir = tempfile::tempdir().unwrap();
    let options = setup::InitOptions {
        nats_listen: "0.0.0.0:4222".into(),
        tls: true,
        tls_hosts: vec!["nats.example".into()],
        ..Default::default()
    };
    let secure = flotilla_auth::SecureDir::init(dir.path(), &options).unwrap();
    let tls = secure.tls.unwrap();
    let mut config = Config::new("tls://nats.example:4222");
    config.security = Some(crate::security::SecurityConfig {
        dir: dir.path().to_path_buf(),
        credentials_ttl: std::time::Duration::from_secs(3600),
    });
    config.nats.tls_ca_file = Some(tls.ca.clone());
    config.nats.tls_client_cert = Some((tls.client_cert.clone(), tls.client_key.clone()));
    let sources = sources(&config);
    let whats: Vec<&str> = sources.iter().map(|s| s.what).collect();
    assert_eq!(
        whats,
        ["nats-ca", "nats-client-cert", "hub-creds", "sys-creds"]
    );

    let now = setup::unix_now();
    let client = read(&sources[1]).unwrap().unwrap();
    let issued_for = client - now;
    assert!(
        ((setup::CERT_DAYS - 1) * DAY..=setup::CERT_DAYS * DAY).contains(&issued_for),
        "{issued_for}"
    );
    assert!(
        read(&sources[0]).unwrap().unwrap() > client,
        "the CA outlives it"
    );
    // `init` writes the hub's credentials without an expiry: no series.
    assert_eq!(read(&sources[2]).unwrap(), None);

    let mut registry = prometheus_client::registry::Registry::with_prefix("flotilla_hub");
    registry.register_collector(Box::new(ExpiryMetrics(sources)));
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    let series = format!(
        "flotilla_hub_credential_expiry_timestamp_seconds{{what=\"nats-client-cert\"}} {client}"
    );
    assert!(text.contains(&series), "{text}");
    assert!(!text.contains("what=\"hub-creds\""), "{text}");
}
