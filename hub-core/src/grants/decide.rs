//! The decision (pure): may this scope do this to that target — and if not, every grant it
//! lacks, so the refusal says in one round what to ask for (docs/notes/issue-48-design.md §5.3).
//!
//! A fleet role decides for every target (`admin` everything, `view` every read). Otherwise a
//! cluster is reached through the sets the set index says it is in (a cluster in several sets is
//! seen by the viewers of any of them and written by the admins of any of them, as OCM's
//! synced RoleBindings add up); a binding needs `bind` on the set and `edit` on the namespace;
//! a cluster moved into a set needs `admin` on that set and on one of the sets it is in now.
//! [`sees`] is the read filter of lists and watches: the same rule as [`decide`] with
//! [`Verb::Read`], by masks when the scope was built against the index's id table.

use super::index::SetIndexView;
use super::scope::Scope;
use super::{FleetRole, Grant, NamespaceRole, Principal, SetRole};
use std::fmt;
use std::sync::Arc;

/// What a call does to its target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Verb {
    /// Get, list, watch.
    Read,
    /// Create, update, delete (works, cluster edits, namespace objects).
    Write,
    /// Bind a set into a namespace.
    Bind,
    /// Hand out a credential (a join token, a ServiceAccount's token).
    Credentials,
    /// Read through the cluster proxy (get/list/watch, never Secrets).
    ProxyRead,
    /// Any verb through the cluster proxy.
    ProxyWrite,
}

impl Verb {
    /// The fleet role that allows it everywhere.
    pub fn fleet_role(self) -> FleetRole {
        match self {
            Verb::Read | Verb::ProxyRead => FleetRole::View,
            _ => FleetRole::Admin,
        }
    }

    /// The set role that allows it on the set's clusters.
    pub fn set_role(self) -> SetRole {
        match self {
            Verb::Read | Verb::ProxyRead => SetRole::View,
            Verb::Bind => SetRole::Bind,
            Verb::Write | Verb::Credentials | Verb::ProxyWrite => SetRole::Admin,
        }
    }

    /// The namespace role that allows it on the namespace's objects.
    pub fn namespace_role(self) -> NamespaceRole {
        match self {
            Verb::Read | Verb::ProxyRead => NamespaceRole::View,
            Verb::Write | Verb::Bind => NamespaceRole::Edit,
            Verb::Credentials | Verb::ProxyWrite => NamespaceRole::Admin,
        }
    }
}

/// What a call acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target<'a> {
    /// Cluster-scoped kinds of no set (add-on catalogue, import policies, set create/delete).
    Fleet,
    /// A cluster, and the objects of its namespace (works, add-ons, service accounts).
    Cluster {
        /// The cluster.
        name: &'a str,
    },
    /// A cluster created in, or moved into, a set.
    ClusterIntoSet {
        /// The cluster.
        name: &'a str,
        /// The set it goes into.
        set: &'a str,
    },
    /// A cluster written so that it is in `sets` afterwards: created, relabelled or its
    /// document applied again (review r1 §3: a label can join a label-selector set as the
    /// set label joins an exclusive one). Needs `admin` on every set it enters (but a set
    /// holding every cluster) and, for a cluster the index knows, on one set it is in now.
    ClusterInto {
        /// The cluster.
        name: &'a str,
        /// Every set it is in after the write ([`SetIndexView::sets_for`]).
        sets: &'a [Arc<str>],
    },
    /// A cluster set.
    Set {
        /// The set.
        name: &'a str,
    },
    /// A namespace's objects (placements, replica sets, policies, bindings).
    Namespace {
        /// The namespace.
        name: &'a str,
    },
    /// Binding a set into a namespace.
    Binding {
        /// The namespace.
        namespace: &'a str,
        /// The set.
        set: &'a str,
    },
}

/// The outcome of [`decide`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Allowed, by this grant (for the audit line).
    Allowed(Grant),
    /// Refused: what is missing.
    Missing(Missing),
}

impl Decision {
    /// Whether it was allowed.
    pub fn allowed(&self) -> bool {
        matches!(self, Decision::Allowed(_))
    }
}

/// One grant a refused call needed, with what the caller holds there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Want {
    /// A fleet role.
    Fleet {
        /// The role needed.
        role: FleetRole,
        /// The role held.
        holds: Option<FleetRole>,
    },
    /// A role on one set.
    Set {
        /// The set.
        name: Arc<str>,
        /// The role needed.
        role: SetRole,
        /// The role held on it.
        holds: Option<SetRole>,
    },
    /// A role on one namespace.
    Namespace {
        /// The namespace.
        name: Arc<str>,
        /// The role needed.
        role: NamespaceRole,
        /// The role held on it.
        holds: Option<NamespaceRole>,
    },
    /// A role on any one of the sets a cluster is in.
    ClusterSets {
        /// The cluster.
        cluster: Arc<str>,
        /// The sets it is in, named only to a caller holding a role on one of them (none: no
        /// set, a cluster the index does not know, or one hidden from the caller — a team
        /// cannot tell them apart).
        sets: Vec<Arc<str>>,
        /// The role needed on one of them.
        role: SetRole,
    },
}

/// Why a call was refused: every grant it needed and lacks, and the caller's fleet and set
/// grants (what a refusal about a cluster lists as held).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Missing {
    /// The grants needed and not held.
    pub wants: Vec<Want>,
    /// The caller's fleet and set grants.
    pub holds: Vec<Grant>,
}

/// How many held grants a refusal lists before "and N more".
const HOLDS_SHOWN: usize = 5;

impl Missing {
    /// The refusal's text: `alice (groups sre) may not apply ManifestWork c1/web: it needs
    /// admin on cluster set "team-b" (cluster c1 is in team-b); alice holds admin on cluster
    /// set "team-a"`. `action` says what was tried ("apply ManifestWork c1/web").
    pub fn refusal(&self, who: &Principal, action: &str) -> String {
        let user = &who.user;
        let wants: Vec<String> = self.wants.iter().map(|w| w.text(user)).collect();
        let mut text = format!("{who} may not {action}: it needs {}", wants.join(" and "));
        let about_clusters = self
            .wants
            .iter()
            .any(|w| matches!(w, Want::ClusterSets { sets, .. } if !sets.is_empty()));
        if about_clusters {
            if self.holds.is_empty() {
                text.push_str(&format!("; {user} holds no cluster set grant"));
            } else {
                let shown: Vec<String> = self
                    .holds
                    .iter()
                    .take(HOLDS_SHOWN)
                    .map(ToString::to_string)
                    .collect();
                text.push_str(&format!("; {user} holds {}", shown.join(", ")));
                if self.holds.len() > HOLDS_SHOWN {
                    text.push_str(&format!(" and {} more", self.holds.len() - HOLDS_SHOWN));
                }
            }
        }
        text
    }
}

impl fmt::Display for Missing {
    /// The refusal without the caller and the action: `needs admin on cluster set "b" (…)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let wants: Vec<String> = self.wants.iter().map(|w| w.text("the caller")).collect();
        write!(f, "needs {}", wants.join(" and "))
    }
}

fn holds<R: fmt::Display>(role: Option<R>) -> String {
    role.map_or_else(|| "none".to_string(), |r| r.to_string())
}

impl Want {
    fn text(&self, user: &str) -> String {
        match self {
            Want::Fleet { role, holds: h } => format!("{role} on the fleet (holds {})", holds(*h)),
            Want::Set {
                name,
                role,
                holds: h,
            } => format!("{role} on cluster set {name:?} (holds {})", holds(*h)),
            Want::Namespace {
                name,
                role,
                holds: h,
            } => format!("{role} on namespace {name:?} (holds {})", holds(*h)),
            Want::ClusterSets {
                cluster,
                sets,
                role,
            } => match sets.as_slice() {
                [] => format!(
                    "{role} on a cluster set that contains {cluster}; {cluster} is in none of \
                     {user}'s sets"
                ),
                [one] => format!("{role} on cluster set {one:?} (cluster {cluster} is in {one})"),
                many => {
                    let quoted: Vec<String> = many.iter().map(|s| format!("{s:?}")).collect();
                    let bare: Vec<&str> = many.iter().map(|s| &**s).collect();
                    format!(
                        "{role} on one of cluster sets {} (cluster {cluster} is in {})",
                        quoted.join(", "),
                        bare.join(", ")
                    )
                }
            },
        }
    }
}

/// May `scope` do `verb` to `target`, with `index` saying which sets each cluster is in.
pub fn decide(scope: &Scope, index: &SetIndexView, verb: Verb, target: &Target) -> Decision {
    let fleet = verb.fleet_role();
    if let Some(held) = scope.fleet.filter(|h| *h >= fleet) {
        return Decision::Allowed(Grant::Fleet(held));
    }
    let read = matches!(verb, Verb::Read | Verb::ProxyRead);
    let target = match *target {
        // Reading a binding is reading its namespace; reading a cluster is the same wherever it
        // goes.
        Target::Binding { namespace, .. } if read => Target::Namespace { name: namespace },
        Target::ClusterIntoSet { name, .. } | Target::ClusterInto { name, .. } if read => {
            Target::Cluster { name }
        }
        other => other,
    };
    let mut wants = Vec::new();
    let allowed = match target {
        Target::Fleet => {
            wants.push(Want::Fleet {
                role: fleet,
                holds: scope.fleet,
            });
            None
        }
        Target::Cluster { name } => cluster(scope, index, name, verb.set_role(), &mut wants),
        Target::ClusterIntoSet { name, set } => {
            let into = one_set(scope, set, verb.set_role(), &mut wants);
            // A cluster that exists leaves the sets it is in: one of them must be the caller's
            // too (a new cluster, or one in no set, leaves nothing).
            let from = match index.sets_of(name) {
                Some(sets) if !sets.is_empty() && !sets.iter().any(|s| &**s == set) => {
                    cluster(scope, index, name, verb.set_role(), &mut wants)
                }
                _ => into.clone(),
            };
            from.and(into)
        }
        Target::ClusterInto { name, sets } => {
            cluster_into(scope, index, name, sets, verb, &mut wants)
        }
        Target::Set { name } => one_set(scope, name, verb.set_role(), &mut wants),
        Target::Namespace { name } => namespace(scope, name, verb.namespace_role(), &mut wants),
        Target::Binding { namespace: ns, set } => {
            let bind = one_set(scope, set, SetRole::Bind, &mut wants);
            let edit = namespace(scope, ns, NamespaceRole::Edit, &mut wants);
            edit.and(bind)
        }
    };
    match allowed {
        Some(grant) if wants.is_empty() => Decision::Allowed(grant),
        _ => Decision::Missing(Missing {
            wants,
            holds: held_fleet_and_sets(scope),
        }),
    }
}

/// The grant on one of `name`'s sets that allows `role`, or a want pushed.
fn cluster(
    scope: &Scope,
    index: &SetIndexView,
    name: &str,
    role: SetRole,
    wants: &mut Vec<Want>,
) -> Option<Grant> {
    let sets = index.sets_of(name).unwrap_or_default();
    let best = sets
        .iter()
        .filter_map(|s| scope.set_role(s).map(|r| (r, s)))
        .filter(|(r, _)| *r >= role)
        .max_by_key(|(r, _)| *r);
    if let Some((held, set)) = best {
        return Some(Grant::Set {
            name: set.clone(),
            role: held,
        });
    }
    // The sets are named only to a caller holding a role on one of them: to anyone else a
    // hidden cluster reads as a missing one (review r1 §9; design §5.3).
    let holds_one = scope.fleet.is_some() || sets.iter().any(|s| scope.set_role(s).is_some());
    wants.push(Want::ClusterSets {
        cluster: name.into(),
        sets: if holds_one { sets } else { Vec::new() },
        role,
    });
    None
}

/// [`Target::ClusterInto`]: the grant on one of the cluster's sets now (or, for a new one, on a
/// set it enters), with a want pushed for every set entered without `admin`. A new cluster that
/// enters no set of its own (only sets that hold every cluster) needs the fleet role.
fn cluster_into(
    scope: &Scope,
    index: &SetIndexView,
    name: &str,
    after: &[Arc<str>],
    verb: Verb,
    wants: &mut Vec<Want>,
) -> Option<Grant> {
    let role = verb.set_role();
    let now = index.sets_of(name).unwrap_or_default();
    let from = (!now.is_empty()).then(|| cluster(scope, index, name, role, wants));
    let mut into = None;
    let mut entered = false;
    for set in after {
        if now.contains(set) || index.holds_every_cluster(set) {
            continue;
        }
        entered = true;
        let grant = one_set(scope, set, role, wants);
        into = into.or(grant);
    }
    match from {
        Some(from) => from,
        None if !entered => {
            wants.push(Want::Fleet {
                role: verb.fleet_role(),
                holds: scope.fleet,
            });
            None
        }
        None => into,
    }
}

fn one_set(scope: &Scope, name: &str, role: SetRole, wants: &mut Vec<Want>) -> Option<Grant> {
    let held = scope.set_role(name);
    match held.filter(|h| *h >= role) {
        Some(h) => Some(Grant::Set {
            name: name.into(),
            role: h,
        }),
        None => {
            wants.push(Want::Set {
                name: name.into(),
                role,
                holds: held,
            });
            None
        }
    }
}

fn namespace(
    scope: &Scope,
    name: &str,
    role: NamespaceRole,
    wants: &mut Vec<Want>,
) -> Option<Grant> {
    let held = scope.namespace_role(name);
    match held.filter(|h| *h >= role) {
        Some(h) => Some(Grant::Namespace {
            name: name.into(),
            role: h,
        }),
        None => {
            wants.push(Want::Namespace {
                name: name.into(),
                role,
                holds: held,
            });
            None
        }
    }
}

fn held_fleet_and_sets(scope: &Scope) -> Vec<Grant> {
    scope
        .grants()
        .into_iter()
        .filter(|g| !matches!(g, Grant::Namespace { .. }))
        .collect()
}

/// May `scope` see `target` (the filter of lists and watches): [`decide`] with [`Verb::Read`],
/// without building a refusal, and by masks for clusters when the scope's masks were built
/// against the index's id table.
pub fn sees(scope: &Scope, index: &SetIndexView, target: &Target) -> bool {
    if scope.fleet.is_some() {
        return true;
    }
    match *target {
        Target::Fleet => false,
        Target::Cluster { name }
        | Target::ClusterIntoSet { name, .. }
        | Target::ClusterInto { name, .. } => match scope.sees_mask(index.ids()) {
            Some(mask) => index.mask(name).is_some_and(|m| m.intersects(mask)),
            None => index
                .sets_of(name)
                .is_some_and(|sets| sets.iter().any(|s| scope.set_role(s).is_some())),
        },
        Target::Set { name } => scope.set_role(name).is_some(),
        Target::Namespace { name } => scope.namespace_role(name).is_some(),
        // A binding is an object of its namespace.
        Target::Binding { namespace, .. } => scope.namespace_role(namespace).is_some(),
    }
}
