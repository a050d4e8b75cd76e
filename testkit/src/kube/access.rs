//! The fake server's authorizer: `POST /apis/authorization.k8s.io/v1/subjectaccessreviews`
//! answered from a rule list the test sets ([`super::FakeKube::allow`]), in the real JSON shape.
//! Like RBAC it denies what no rule allows; unlike RBAC the rules are not Kubernetes objects.
//! The same rules judge impersonated requests (`Impersonate-User`, `Impersonate-Group`), with
//! RBAC's escalation rules for writing Roles and bindings ([`escalation`]). Requests that
//! impersonate no one are judged as the caller the test names ([`super::FakeKube::authenticate_as`])
//! and never checked when it names none (any token may do anything); a named caller also needs
//! `impersonate` on whom it impersonates, as the API server checks: the ServiceAccount
//! (`serviceaccounts` in its namespace), another user (`users`), each group sent (`groups`).

use serde_json::{Value, json};

/// A request made impersonating someone, as the fake server received it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Impersonation {
    /// `METHOD /path?query`, as in [`super::FakeKube::requests`].
    pub request: String,
    /// The `Impersonate-User` header.
    pub user: String,
    /// The `Impersonate-Group` headers (none when the API server is to derive the groups).
    pub groups: Vec<String>,
}

/// The groups the API server puts an impersonated `user` in when the request names none: a
/// ServiceAccount's (`system:serviceaccounts`, `system:serviceaccounts:<ns>`), and
/// `system:authenticated` for everyone.
pub fn implicit_groups(user: &str) -> Vec<String> {
    let mut groups = Vec::new();
    if let Some((ns, _)) = service_account(user) {
        groups.push("system:serviceaccounts".to_string());
        groups.push(format!("system:serviceaccounts:{ns}"));
    }
    groups.push("system:authenticated".to_string());
    groups
}

/// `(namespace, name)` of a ServiceAccount's user name, `system:serviceaccount:<ns>:<name>`.
pub fn service_account(user: &str) -> Option<(&str, &str)> {
    let rest = user.strip_prefix("system:serviceaccount:")?;
    let (ns, name) = rest.split_once(':')?;
    (!ns.is_empty() && !name.is_empty() && !name.contains(':')).then_some((ns, name))
}

/// What a subject may do: the shape of one RBAC policy rule bound to one user or group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessRule {
    /// A user (`system:serviceaccount:<ns>:<name>`) or a group (`system:serviceaccounts:<ns>`).
    pub subject: String,
    /// Verbs (`create`, `get`, …; `*` for all).
    pub verbs: Vec<String>,
    /// API groups (`""` for core, `*` for all).
    pub api_groups: Vec<String>,
    /// Plural resources (`*` for all).
    pub resources: Vec<String>,
    /// Object names; empty for all.
    pub resource_names: Vec<String>,
    /// The namespace the rule holds in (a RoleBinding's); `None` everywhere (a
    /// ClusterRoleBinding's), cluster-scoped resources included.
    pub namespace: Option<String>,
}

impl AccessRule {
    /// A rule for `subject` allowing nothing yet.
    pub fn subject(subject: &str) -> Self {
        Self {
            subject: subject.into(),
            verbs: Vec::new(),
            api_groups: Vec::new(),
            resources: Vec::new(),
            resource_names: Vec::new(),
            namespace: None,
        }
    }

    /// The rule for a ServiceAccount.
    pub fn service_account(namespace: &str, name: &str) -> Self {
        Self::subject(&format!("system:serviceaccount:{namespace}:{name}"))
    }

    /// Allows these verbs.
    pub fn verbs(mut self, verbs: &[&str]) -> Self {
        self.verbs = verbs.iter().map(|v| v.to_string()).collect();
        self
    }

    /// On these resources of `group`.
    pub fn resources(mut self, group: &str, resources: &[&str]) -> Self {
        self.api_groups = vec![group.to_string()];
        self.resources = resources.iter().map(|r| r.to_string()).collect();
        self
    }

    /// Only in `namespace`.
    pub fn in_namespace(mut self, namespace: &str) -> Self {
        self.namespace = Some(namespace.into());
        self
    }

    /// Only objects with these names.
    pub fn names(mut self, names: &[&str]) -> Self {
        self.resource_names = names.iter().map(|n| n.to_string()).collect();
        self
    }

    fn allows(&self, user: &str, groups: &[&str], attributes: &Value) -> bool {
        let any = |list: &[String], value: &str| list.iter().any(|x| x == "*" || x == value);
        let attr = |k: &str| attributes[k].as_str().unwrap_or_default();
        (self.subject == user || groups.contains(&self.subject.as_str()))
            && any(&self.verbs, attr("verb"))
            && any(&self.api_groups, attr("group"))
            && any(&self.resources, attr("resource"))
            && (self.resource_names.is_empty()
                || self.resource_names.iter().any(|n| n == attr("name")))
            && self
                .namespace
                .as_deref()
                .is_none_or(|ns| ns == attr("namespace"))
    }
}

/// Whether `user` (in `groups`) may `verb` the object `name` of `group`'s `resource` in
/// `namespace` (`""`: cluster-wide) under `rules`.
#[allow(clippy::too_many_arguments)]
pub fn allowed(
    rules: &[AccessRule],
    user: &str,
    groups: &[&str],
    verb: &str,
    group: &str,
    resource: &str,
    namespace: &str,
    name: &str,
) -> bool {
    let attributes = json!({"verb": verb, "group": group, "resource": resource,
        "namespace": namespace, "name": name});
    rules.iter().any(|r| r.allows(user, groups, &attributes))
}

/// Whether a write of this plural resource of `rbac.authorization.k8s.io` is subject to the
/// escalation rules.
pub fn escalates(resource: &str) -> bool {
    matches!(
        resource,
        "roles" | "rolebindings" | "clusterroles" | "clusterrolebindings"
    )
}

/// RBAC's escalation rules for `user` writing `object` (a Role, ClusterRole, RoleBinding or
/// ClusterRoleBinding of plural `resource`) in `namespace`: a role may only hold rules its writer
/// holds (unless it may `escalate` roles), a binding may only bind a role whose rules its writer
/// holds (unless it may `bind` that role). `role(kind, name)` reads the bound role. The error
/// lists what is not held, as the API server does.
pub fn escalation(
    rules: &[AccessRule],
    user: &str,
    groups: &[&str],
    resource: &str,
    namespace: &str,
    object: &Value,
    role: impl Fn(&str, &str) -> Option<Value>,
) -> Result<(), String> {
    const RBAC: &str = "rbac.authorization.k8s.io";
    let may = |verb: &str, resource: &str, name: &str| {
        allowed(rules, user, groups, verb, RBAC, resource, namespace, name)
    };
    let granted = match resource {
        "roles" | "clusterroles" => {
            let name = object["metadata"]["name"].as_str().unwrap_or_default();
            if may("escalate", resource, name) {
                return Ok(());
            }
            object["rules"].clone()
        }
        "rolebindings" | "clusterrolebindings" => {
            let kind = object["roleRef"]["kind"].as_str().unwrap_or_default();
            let name = object["roleRef"]["name"].as_str().unwrap_or_default();
            let plural = if kind == "Role" {
                "roles"
            } else {
                "clusterroles"
            };
            if may("bind", plural, name) {
                return Ok(());
            }
            match role(kind, name) {
                Some(r) => r["rules"].clone(),
                None => return Err(format!("{kind} {name:?} not found")),
            }
        }
        _ => return Ok(()),
    };
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|x| x.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut missing = Vec::new();
    for rule in granted.as_array().into_iter().flatten() {
        let names = strings(&rule["resourceNames"]);
        let names = if names.is_empty() {
            vec![String::new()]
        } else {
            names
        };
        for g in strings(&rule["apiGroups"]) {
            for r in strings(&rule["resources"]) {
                for v in strings(&rule["verbs"]) {
                    for n in &names {
                        if !allowed(rules, user, groups, &v, &g, &r, namespace, n) {
                            missing.push(format!(
                                "{{APIGroups:[{g:?}], Resources:[{r:?}], Verbs:[{v:?}]}}"
                            ));
                        }
                    }
                }
            }
        }
    }
    if missing.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "user {user:?} is attempting to grant RBAC permissions not currently held:\n{}",
            missing.join("\n")
        ))
    }
}

/// The answer to a SubjectAccessReview `review` (the request body) under `rules`: the review
/// with its `status` (`allowed`, and `reason` saying which rule allowed it or that none did).
pub fn review(rules: &[AccessRule], review: &Value) -> Result<Value, String> {
    let spec = &review["spec"];
    let user = spec["user"].as_str().unwrap_or_default();
    if user.is_empty() && spec["groups"].as_array().is_none_or(Vec::is_empty) {
        return Err("spec.user or spec.groups is required".into());
    }
    let groups: Vec<&str> = spec["groups"]
        .as_array()
        .map(|g| g.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let attributes = &spec["resourceAttributes"];
    let status = if !attributes.is_object() {
        json!({"allowed": false, "reason": "only resourceAttributes are served"})
    } else {
        match rules
            .iter()
            .position(|r| r.allows(user, &groups, attributes))
        {
            Some(i) => json!({"allowed": true, "reason": format!("allowed by rule {i}")}),
            None => json!({"allowed": false}),
        }
    };
    let mut out = review.clone();
    out["apiVersion"] = json!("authorization.k8s.io/v1");
    out["kind"] = json!("SubjectAccessReview");
    if !out["metadata"].is_object() {
        out["metadata"] = json!({});
    }
    out["status"] = status;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sar(user: &str, verb: &str, group: &str, resource: &str, ns: &str, name: &str) -> Value {
        json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": {
            "user": user,
            "groups": ["system:serviceaccounts", format!("system:serviceaccounts:{ns}")],
            "resourceAttributes": {"verb": verb, "group": group, "version": "v1",
                "resource": resource, "namespace": ns, "name": name},
        }})
    }

    #[test]
    fn rules_allow_what_they_name_and_nothing_else() {
        let sa = "system:serviceaccount:default:executor1";
        let rules = [
            AccessRule::service_account("default", "executor1")
                .verbs(&["*"])
                .resources("", &["configmaps"])
                .in_namespace("default"),
            AccessRule::subject("system:serviceaccounts:ops")
                .verbs(&["get"])
                .resources("apps", &["*"]),
        ];
        let allowed = |s: Value| review(&rules, &s).unwrap()["status"]["allowed"] == true;
        assert!(allowed(sar(
            sa,
            "create",
            "",
            "configmaps",
            "default",
            "test"
        )));
        assert!(!allowed(sar(
            sa,
            "create",
            "",
            "configmaps",
            "other",
            "test"
        )));
        assert!(!allowed(sar(
            sa, "create", "", "secrets", "default", "test"
        )));
        assert!(!allowed(sar(
            sa,
            "create",
            "apps",
            "deployments",
            "default",
            "web"
        )));
        // A group rule holds for every ServiceAccount of the namespace.
        let ops = "system:serviceaccount:ops:anyone";
        assert!(allowed(sar(
            ops,
            "get",
            "apps",
            "deployments",
            "ops",
            "web"
        )));
        assert!(!allowed(sar(
            ops,
            "delete",
            "apps",
            "deployments",
            "ops",
            "web"
        )));
        let answer = review(&rules, &sar(sa, "get", "", "configmaps", "default", "x")).unwrap();
        assert_eq!(answer["kind"], "SubjectAccessReview");
        assert_eq!(answer["spec"]["user"], sa);
    }

    #[test]
    fn an_impersonated_service_account_gets_its_groups_from_the_server() {
        assert_eq!(
            implicit_groups("system:serviceaccount:team-a:deployer"),
            [
                "system:serviceaccounts",
                "system:serviceaccounts:team-a",
                "system:authenticated"
            ]
        );
        assert_eq!(implicit_groups("alice"), ["system:authenticated"]);
        assert_eq!(service_account("system:serviceaccount:a:b:c"), None);
        assert_eq!(service_account("system:serviceaccount::b"), None);
    }

    #[test]
    fn roles_grant_only_what_their_writer_holds() {
        let sa = "system:serviceaccount:default:executor1";
        let rules = [AccessRule::service_account("default", "executor1")
            .verbs(&["*"])
            .resources("", &["configmaps"])
            .in_namespace("default")];
        let role = |resources: &[&str]| {
            json!({"metadata": {"name": "r"}, "rules": [
                {"apiGroups": [""], "resources": resources, "verbs": ["get"]}]})
        };
        let none = |_: &str, _: &str| None;
        assert!(
            escalation(
                &rules,
                sa,
                &[],
                "roles",
                "default",
                &role(&["configmaps"]),
                none
            )
            .is_ok()
        );
        let err = escalation(
            &rules,
            sa,
            &[],
            "roles",
            "default",
            &role(&["secrets"]),
            none,
        )
        .unwrap_err();
        assert!(
            err.contains("not currently held") && err.contains("secrets"),
            "{err}"
        );
        // A binding to a role it does not hold, unless it may bind that role.
        let binding = json!({"roleRef": {"kind": "ClusterRole", "name": "admin"}});
        let admin = |_: &str, _: &str| {
            Some(json!({"rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]}))
        };
        assert!(escalation(&rules, sa, &[], "rolebindings", "default", &binding, admin).is_err());
        let with_bind = [
            rules[0].clone(),
            AccessRule::service_account("default", "executor1")
                .verbs(&["bind"])
                .resources("rbac.authorization.k8s.io", &["clusterroles"])
                .names(&["admin"]),
        ];
        assert!(
            escalation(
                &with_bind,
                sa,
                &[],
                "rolebindings",
                "default",
                &binding,
                admin
            )
            .is_ok()
        );
    }
}
