//! The agent's RBAC on the spoke: the rules each `--rbac` mode grants, decided from the flags
//! in pure functions ([`cluster_rules`], [`namespace_rules`]), and their rendering as a
//! ClusterRole, Roles and their bindings ([`documents`]).
//!
//! The least-privilege default covers exactly what the Kubernetes backend
//! (`agent/src/backend/kube`) calls with the agent's own identity:
//!
//! | call | what for | rule |
//! |---|---|---|
//! | GET `/version`, `/readyz` | version, health | `nonResourceURLs` get |
//! | GET `/api`, `/apis`, `/apis/G/V` | discovery: resolving kinds, proxy queries | `nonResourceURLs` get |
//! | list `nodes` | capacity, allocatable, node count, platform, product | nodes get/list/watch |
//! | get `namespaces` kube-system | the `id.k8s.io` claim | namespaces get/list/watch |
//! | apply, list, watch `namespaces` | ManagedClusterSet managed namespaces (a label) | namespaces create/patch |
//! | create `subjectaccessreviews` | the executor check (OCM's `spec.executor`) | create |
//! | get, create, delete `appliedmanifestworks` | each work's anchor (owner of its resources) | get/create/delete |
//! | get, list, watch of a work's resources | status, feedback, proxy queries | get/list/watch of [`READ`] and `--allow` |
//! | impersonate the executor (`Impersonate-User` only) | a work's writes, reads and deletes as its executor | per `--executor-namespace` |
//! | Secrets in an add-on's install namespace | secure mode: add-on hub credentials | per `--addon-namespace` |
//! | get `leases` (coordination.k8s.io) | the health of add-ons managed by someone else (their spoke Lease) | in [`READ`] |
//!
//! Nothing in its own namespace: its credentials are mounted from the Secret and its state lives
//! on the volume. No cluster-wide write of any workload, and no Secret outside the namespaces
//! named: a work's manifests are written as the work's executor, which the spoke's admin grants
//! what it may do.

/// The group of the RBAC kinds.
const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

/// The kinds works commonly carry that the agent may read cluster-wide to observe them (status,
/// feedback) and answer proxy queries: `(group, resources)`. No Secrets.
pub const READ: &[(&str, &[&str])] = &[
    (
        "",
        &[
            "configmaps",
            "services",
            "serviceaccounts",
            "persistentvolumeclaims",
        ],
    ),
    ("apps", &["deployments", "statefulsets", "daemonsets"]),
    ("batch", &["jobs", "cronjobs"]),
    ("networking.k8s.io", &["ingresses", "networkpolicies"]),
    (RBAC_GROUP, &["roles", "rolebindings"]),
    // Add-ons managed by someone else prove they run with a Lease in their install namespace.
    ("coordination.k8s.io", &["leases"]),
];

/// The read verbs.
const READ_VERBS: &[&str] = &["get", "list", "watch"];

/// How much the agent may do on the spoke.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// Read what the agent observes, write only its anchors and managed namespaces; works'
    /// manifests are written as their executor (see --executor-namespace).
    #[default]
    LeastPrivilege,
    /// Every verb on every resource: works without an executor can write anything, and so can
    /// whoever controls the agent or the hub. Only for fleets that apply works without executors.
    #[value(alias = "admin")]
    ClusterAdmin,
}

/// The agent's RBAC, as the flags ask for it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rbac {
    /// `--rbac`.
    pub mode: Mode,
    /// `--allow`: more `(group, resource)` the agent may read cluster-wide.
    pub read: Vec<(String, String)>,
    /// `--executor-namespace`: namespaces whose ServiceAccounts the agent may impersonate (the
    /// executors of works).
    pub executor_namespaces: Vec<String>,
    /// `--addon-namespace`: add-on install namespaces where the agent keeps add-ons' hub
    /// credentials as Secrets.
    pub addon_namespaces: Vec<String>,
}

/// One RBAC policy rule.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Rule {
    /// API groups (`""` for the core group).
    pub api_groups: Vec<String>,
    /// Resources.
    pub resources: Vec<String>,
    /// Only these objects (all when empty).
    pub resource_names: Vec<String>,
    /// Non-resource URLs (then no groups or resources).
    pub non_resource_urls: Vec<String>,
    /// Verbs.
    pub verbs: Vec<String>,
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

impl Rule {
    fn resources(group: &str, resources: &[&str], verbs: &[&str]) -> Self {
        Self {
            api_groups: vec![group.to_string()],
            resources: strings(resources),
            verbs: strings(verbs),
            ..Self::default()
        }
    }

    fn urls(urls: &[&str], verbs: &[&str]) -> Self {
        Self {
            non_resource_urls: strings(urls),
            verbs: strings(verbs),
            ..Self::default()
        }
    }

    /// The rule as a YAML sequence item at column 0.
    fn yaml(&self) -> String {
        fn list(items: &[String]) -> String {
            let quoted: Vec<String> = items.iter().map(|i| super::quoted(i)).collect();
            format!("[{}]", quoted.join(", "))
        }
        let mut fields = Vec::new();
        if !self.non_resource_urls.is_empty() {
            fields.push(format!(
                "nonResourceURLs: {}",
                list(&self.non_resource_urls)
            ));
        } else {
            fields.push(format!("apiGroups: {}", list(&self.api_groups)));
            fields.push(format!("resources: {}", list(&self.resources)));
            if !self.resource_names.is_empty() {
                fields.push(format!("resourceNames: {}", list(&self.resource_names)));
            }
        }
        fields.push(format!("verbs: {}", list(&self.verbs)));
        format!("- {}\n", fields.join("\n  "))
    }
}

/// Parses an `--allow` entry: `GROUP/RESOURCE`, `/RESOURCE` for the core group.
pub fn parse_allow(entry: &str) -> Result<(String, String), String> {
    let (group, resource) = entry.split_once('/').ok_or_else(|| {
        format!("--allow {entry:?}: want GROUP/RESOURCE (/RESOURCE for the core group)")
    })?;
    if resource.is_empty() || resource.contains('/') || resource == "*" || group == "*" {
        return Err(format!(
            "--allow {entry:?}: the resource is missing or malformed (one resource, no wildcard)"
        ));
    }
    Ok((group.to_string(), resource.to_string()))
}

/// What is wrong with the flags of this RBAC, one entry per problem.
pub fn check(rbac: &Rbac) -> Vec<String> {
    let mut errors = Vec::new();
    if rbac.mode == Mode::ClusterAdmin {
        for (flag, given) in [
            ("--allow", !rbac.read.is_empty()),
            ("--executor-namespace", !rbac.executor_namespaces.is_empty()),
            ("--addon-namespace", !rbac.addon_namespaces.is_empty()),
        ] {
            if given {
                errors.push(format!(
                    "{flag} is for --rbac least-privilege (cluster-admin already allows everything)"
                ));
            }
        }
    }
    for (flag, namespaces) in [
        ("--executor-namespace", &rbac.executor_namespaces),
        ("--addon-namespace", &rbac.addon_namespaces),
    ] {
        for ns in namespaces {
            if let Err(e) = flotilla_api::names::validate_dns1123_label("namespace", ns) {
                errors.push(format!("{flag} {ns:?}: {}", e.reason));
            }
        }
    }
    errors
}

/// The ClusterRole's rules.
pub fn cluster_rules(rbac: &Rbac) -> Vec<Rule> {
    // Version, health and discovery (kube-rs resolves each kind with one group's discovery).
    let mut rules = vec![Rule::urls(
        &["/version", "/readyz", "/api", "/api/*", "/apis", "/apis/*"],
        &["get"],
    )];
    if rbac.mode == Mode::ClusterAdmin {
        rules.push(Rule::resources("*", &["*"], &["*"]));
        return rules;
    }
    rules.extend([
        // Capacity, allocatable, node count, platform and product.
        Rule::resources("", &["nodes"], READ_VERBS),
        // kube-system's UID (the id.k8s.io claim); managed namespaces are applied (server-side
        // apply of one label, which creates a missing namespace) and relabelled.
        Rule::resources(
            "",
            &["namespaces"],
            &["get", "list", "watch", "create", "patch"],
        ),
        // The executor check.
        Rule::resources(
            "authorization.k8s.io",
            &["subjectaccessreviews"],
            &["create"],
        ),
        // Each work's anchor.
        Rule::resources(
            "work.open-cluster-management.io",
            &["appliedmanifestworks"],
            &["get", "create", "delete"],
        ),
    ]);
    let mut read: Vec<(String, Vec<String>)> = READ
        .iter()
        .map(|(g, rs)| (g.to_string(), strings(rs)))
        .collect();
    for (group, resource) in &rbac.read {
        match read.iter_mut().find(|(g, _)| g == group) {
            Some((_, rs)) if rs.contains(resource) => {}
            Some((_, rs)) => rs.push(resource.clone()),
            None => read.push((group.clone(), vec![resource.clone()])),
        }
    }
    for (group, resources) in read {
        rules.push(Rule {
            api_groups: vec![group],
            resources,
            verbs: strings(READ_VERBS),
            ..Rule::default()
        });
    }
    // No `impersonate` on groups: the agent sends the executor's user alone and the API server
    // adds a ServiceAccount's groups itself; the ServiceAccounts are impersonated per namespace
    // (the Roles).
    rules
}

/// The Roles: `(namespace, rules)`, one per namespace named by `--executor-namespace` or
/// `--addon-namespace`, in the order first named.
pub fn namespace_rules(rbac: &Rbac) -> Vec<(String, Vec<Rule>)> {
    let mut out: Vec<(String, Vec<Rule>)> = Vec::new();
    if rbac.mode == Mode::ClusterAdmin {
        return out;
    }
    let mut add = |ns: &String, rule: Rule| match out.iter_mut().find(|(n, _)| n == ns) {
        Some((_, rules)) if rules.contains(&rule) => {}
        Some((_, rules)) => rules.push(rule),
        None => out.push((ns.clone(), vec![rule])),
    };
    for ns in &rbac.executor_namespaces {
        // Acting as the namespace's ServiceAccounts: the works' executors.
        add(
            ns,
            Rule::resources("", &["serviceaccounts"], &["impersonate"]),
        );
    }
    for ns in &rbac.addon_namespaces {
        // The add-ons' hub credentials: written, watched (the backend caches what it wrote)
        // and deleted with the add-on's work.
        add(
            ns,
            Rule::resources(
                "",
                &["secrets"],
                &["get", "list", "watch", "create", "update", "delete"],
            ),
        );
    }
    out
}

fn binding(kind: &str, namespace: Option<&str>, subject_namespace: &str) -> String {
    let metadata_namespace = namespace
        .map(|ns| format!("  namespace: {ns}\n"))
        .unwrap_or_default();
    let role_kind = kind.trim_end_matches("Binding");
    format!(
        "---\napiVersion: {RBAC_GROUP}/v1\nkind: {kind}\nmetadata:\n  name: flotilla-agent\n{metadata_namespace}\
         roleRef:\n  apiGroup: {RBAC_GROUP}\n  kind: {role_kind}\n  name: flotilla-agent\n\
         subjects:\n  - kind: ServiceAccount\n    name: flotilla-agent\n    namespace: {subject_namespace}\n"
    )
}

/// The ClusterRole `flotilla-agent`, its binding to the agent's ServiceAccount (in
/// `agent_namespace`), and a Role `flotilla-agent` with its binding per namespace of
/// [`namespace_rules`]; each document starts with `---`.
pub fn documents(rbac: &Rbac, agent_namespace: &str) -> String {
    let rules: String = cluster_rules(rbac).iter().map(Rule::yaml).collect();
    let mut out = format!(
        "---\napiVersion: {RBAC_GROUP}/v1\nkind: ClusterRole\nmetadata:\n  name: flotilla-agent\nrules:\n{rules}"
    );
    out.push_str(&binding("ClusterRoleBinding", None, agent_namespace));
    for (ns, rules) in namespace_rules(rbac) {
        let rules: String = rules.iter().map(Rule::yaml).collect();
        out.push_str(&format!(
            "---\napiVersion: {RBAC_GROUP}/v1\nkind: Role\nmetadata:\n  name: flotilla-agent\n  namespace: {ns}\nrules:\n{rules}"
        ));
        out.push_str(&binding("RoleBinding", Some(&ns), agent_namespace));
    }
    out
}

/// What to tell the operator on stderr about this RBAC.
pub fn warnings(rbac: &Rbac) -> Vec<String> {
    match rbac.mode {
        Mode::ClusterAdmin => vec![
            "warning: --rbac cluster-admin: the agent may do anything on this cluster (read every \
             Secret, write any object, grant any right); whoever controls the agent or can \
             apply works on the hub can too. Prefer the default with --executor-namespace"
                .to_string(),
        ],
        Mode::LeastPrivilege if rbac.executor_namespaces.is_empty() => vec![
            "note: no --executor-namespace: the agent may act as no executor, so it can write no \
             work's manifests on this cluster; name the namespaces of the works' executors with \
             --executor-namespace NS"
                .to_string(),
        ],
        Mode::LeastPrivilege => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn least() -> Rbac {
        Rbac::default()
    }

    fn writes(rule: &Rule) -> bool {
        rule.verbs.iter().any(|v| {
            matches!(
                v.as_str(),
                "create" | "update" | "patch" | "delete" | "deletecollection" | "*"
            )
        })
    }

    #[test]
    fn least_privilege_has_no_wildcard_no_secret_and_writes_only_its_own_kinds() {
        let rules = cluster_rules(&least());
        for r in &rules {
            for field in [&r.api_groups, &r.resources, &r.verbs, &r.non_resource_urls] {
                assert!(!field.iter().any(|x| x == "*"), "{r:?}");
            }
            assert!(!r.resources.iter().any(|x| x == "secrets"), "{r:?}");
            assert!(!r.verbs.iter().any(|v| v == "impersonate"), "{r:?}");
        }
        let written: Vec<&str> = rules
            .iter()
            .filter(|r| writes(r))
            .flat_map(|r| r.resources.iter().map(String::as_str))
            .collect();
        assert_eq!(
            written,
            ["namespaces", "subjectaccessreviews", "appliedmanifestworks"]
        );
        assert!(namespace_rules(&least()).is_empty());
        assert_eq!(
            warnings(&least()).len(),
            1,
            "the missing executors are named"
        );
    }

    #[test]
    fn executors_are_impersonated_in_their_namespaces_only_and_no_group_is() {
        let rbac = Rbac {
            executor_namespaces: vec!["team-a".into(), "default".into()],
            ..least()
        };
        let roles = namespace_rules(&rbac);
        assert_eq!(roles.len(), 2);
        for (_, rules) in &roles {
            assert_eq!(
                rules,
                &[Rule::resources("", &["serviceaccounts"], &["impersonate"])]
            );
        }
        assert!(
            !cluster_rules(&rbac)
                .iter()
                .any(|r| r.verbs.iter().any(|v| v == "impersonate")),
            "impersonation cluster-wide"
        );
        assert!(warnings(&rbac).is_empty());
    }

    #[test]
    fn addon_secrets_are_granted_in_their_install_namespaces_only() {
        let rbac = Rbac {
            executor_namespaces: vec!["addons".into()],
            addon_namespaces: vec!["addons".into(), "other".into()],
            ..least()
        };
        let roles = namespace_rules(&rbac);
        assert_eq!(
            roles
                .iter()
                .map(|(ns, r)| (ns.as_str(), r.len()))
                .collect::<Vec<_>>(),
            [("addons", 2), ("other", 1)]
        );
        let docs = documents(&rbac, "flotilla-agent");
        assert_eq!(docs.matches("\nkind: Role\n").count(), 2);
        assert_eq!(docs.matches("\nkind: RoleBinding\n").count(), 2);
        assert!(docs.contains("  name: flotilla-agent\n  namespace: other\nroleRef:"));
    }

    #[test]
    fn allow_adds_reads_only() {
        let rbac = Rbac {
            read: vec![
                ("monitoring.coreos.com".into(), "servicemonitors".into()),
                ("apps".into(), "replicasets".into()),
                ("apps".into(), "deployments".into()),
            ],
            ..least()
        };
        let rules = cluster_rules(&rbac);
        let apps = rules.iter().find(|r| r.api_groups == ["apps"]).unwrap();
        assert_eq!(
            apps.resources,
            ["deployments", "statefulsets", "daemonsets", "replicasets"]
        );
        let monitoring = rules
            .iter()
            .find(|r| r.api_groups == ["monitoring.coreos.com"])
            .unwrap();
        assert_eq!(monitoring.verbs, READ_VERBS);
    }

    #[test]
    fn cluster_admin_allows_everything_and_is_warned_about() {
        let rbac = Rbac {
            mode: Mode::ClusterAdmin,
            ..least()
        };
        assert!(cluster_rules(&rbac).contains(&Rule::resources("*", &["*"], &["*"])));
        assert!(warnings(&rbac)[0].starts_with("warning: --rbac cluster-admin"));
        let mixed = Rbac {
            executor_namespaces: vec!["a".into()],
            ..rbac
        };
        assert_eq!(check(&mixed).len(), 1);
    }

    #[test]
    fn bad_entries_are_named() {
        assert_eq!(
            parse_allow("/configmaps"),
            Ok((String::new(), "configmaps".into()))
        );
        assert!(
            parse_allow("nogroup")
                .unwrap_err()
                .contains("--allow \"nogroup\"")
        );
        assert!(parse_allow("apps/*").is_err());
        let rbac = Rbac {
            executor_namespaces: vec!["Bad_NS".into()],
            ..least()
        };
        assert!(check(&rbac)[0].starts_with("--executor-namespace \"Bad_NS\""));
    }

    #[test]
    fn rules_render_as_yaml_with_quoted_items() {
        let r = Rule {
            api_groups: vec![String::new()],
            resources: strings(&["groups"]),
            resource_names: strings(&["system:authenticated"]),
            verbs: strings(&["impersonate"]),
            ..Rule::default()
        };
        assert_eq!(
            r.yaml(),
            "- apiGroups: [\"\"]\n  resources: [\"groups\"]\n  resourceNames: [\"system:authenticated\"]\n  verbs: [\"impersonate\"]\n"
        );
    }
}
