//! Bundle names: Fleet's `<gitrepo>-<path>` (`/` → `-`, lower case, other characters → `-`),
//! with an 8-hex checksum of the original appended when anything else had to change or the
//! name had to be cut (`fleet@3b2c622:internal/names/name.go:64-95`). Ours must also fit the
//! replica set's owner label value `<namespace>.<name>` (≤ 63 characters).

use sha2::{Digest, Sha256};

/// The longest label value (the replica-set owner label is `<namespace>.<name>`).
const MAX_LABEL: usize = 63;

/// The bundle name of `path` in GitRepo `namespace/gitrepo` (`""` is the repository root).
pub fn bundle_name(namespace: &str, gitrepo: &str, path: &str) -> String {
    let raw = if path.is_empty() {
        gitrepo.to_owned()
    } else {
        format!("{gitrepo}-{path}")
    };
    let plain = raw.replace('/', "-");
    let mut name = String::with_capacity(plain.len());
    for c in plain.chars() {
        let c = c.to_ascii_lowercase();
        let c = if c.is_ascii_alphanumeric() { c } else { '-' };
        if !(c == '-' && name.ends_with('-')) {
            name.push(c);
        }
    }
    let name = name.trim_matches('-').to_owned();
    let max = MAX_LABEL.saturating_sub(namespace.len() + 1).max(16);
    if name == plain && name.len() <= max {
        return name;
    }
    let sum = hex8(&raw);
    let keep = max - sum.len() - 1;
    let mut cut: String = name.chars().take(keep).collect();
    while cut.ends_with('-') {
        cut.pop();
    }
    format!("{cut}-{sum}")
}

fn hex8(s: &str) -> String {
    let digest = Sha256::digest(s.as_bytes());
    digest[..4].iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_paths_become_dashed_names() {
        assert_eq!(
            bundle_name("edge-apps", "shop", "apps/web"),
            "shop-apps-web"
        );
        assert_eq!(bundle_name("edge-apps", "shop", ""), "shop");
    }

    #[test]
    fn changed_or_long_names_carry_a_checksum_and_fit_the_owner_label() {
        let n = bundle_name("edge-apps", "shop", "Apps/My_Web");
        assert!(n.starts_with("shop-apps-my-web-"), "{n}");
        assert_eq!(n.len(), "shop-apps-my-web-".len() + 8);
        let long = "x".repeat(80);
        let n = bundle_name("edge-apps", "shop", &format!("apps/{long}"));
        assert!("edge-apps".len() + 1 + n.len() <= 63, "{n}");
        assert_ne!(
            n,
            bundle_name("edge-apps", "shop", &format!("apps/{long}y"))
        );
        assert!(
            flotilla_api::names::validate_dns1123_label("name", &n).is_ok(),
            "{n}"
        );
    }
}
