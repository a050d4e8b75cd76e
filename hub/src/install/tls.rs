//! The names the NATS server certificate must carry: the client Service (hubs connect to
//! `nats.<namespace>.svc`) and every server behind the headless Service (routes dial
//! `nats-<i>.nats-headless.<namespace>.svc` and check its certificate).

use super::{Plan, Problem};
use x509_parser::extensions::GeneralName;
use x509_parser::pem::parse_x509_pem;

/// The DNS names the server certificate needs.
pub fn needed_names(plan: &Plan) -> Vec<String> {
    vec![
        plan.service_host("nats"),
        format!("*.{}", plan.service_host("nats-headless")),
    ]
}

/// Every needed name the certificate in `pem` lacks, with the command that fixes it.
pub fn check_names(pem: &[u8], plan: &Plan) -> Vec<Problem> {
    let names = match dns_names(pem) {
        Ok(names) => names,
        Err(why) => {
            return vec![Problem(format!("secure directory: tls/server.pem: {why}"))];
        }
    };
    let needed = needed_names(plan);
    let missing: Vec<&String> = needed.iter().filter(|n| !names.contains(n)).collect();
    if missing.is_empty() {
        return Vec::new();
    }
    let hosts: Vec<String> = needed.iter().map(|n| format!("--tls-host '{n}'")).collect();
    vec![Problem(format!(
        "secure directory: tls/server.pem does not name {}; write the directory with \
         flotilla-hub init --dir DIR --tls {} --tls-host <the name agents reach NATS by> \
         (with --force on an existing directory: it replaces every key)",
        missing
            .iter()
            .map(|n| format!("{n:?}"))
            .collect::<Vec<_>>()
            .join(", "),
        hosts.join(" ")
    ))]
}

/// The certificate's DNS subject alternative names.
fn dns_names(pem: &[u8]) -> Result<Vec<String>, String> {
    let (_, pem) = parse_x509_pem(pem).map_err(|e| format!("not a PEM certificate: {e}"))?;
    let cert = pem
        .parse_x509()
        .map_err(|e| format!("not an X.509 certificate: {e}"))?;
    let san = cert
        .subject_alternative_name()
        .map_err(|e| format!("bad subject alternative names: {e}"))?;
    Ok(san
        .map(|ext| {
            ext.value
                .general_names
                .iter()
                .filter_map(|n| match n {
                    GeneralName::DNSName(name) => Some(name.to_string()),
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default())
}
