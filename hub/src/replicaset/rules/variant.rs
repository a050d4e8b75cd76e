//! Per-target customizations of a GitRepo bundle's replica set (`hub.variants`), pure: which
//! template each decided cluster wants. A cluster gets the first variant that selects it
//! (Fleet's FirstMatch; every selector a variant gives must hold: cluster name, labels,
//! ManagedClusterSet membership, decision group), none: the replica set's own template; a
//! `doNotDeploy` variant: no work.

use flotilla_api::meta::CLUSTERSET_LABEL;
use flotilla_api::v1::{ManagedCluster, ManifestWorkReplicaSet, ManifestWorkSpec, TemplateVariant};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// What one decided cluster wants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pick {
    /// The replica set's template.
    Base,
    /// The template of `hub.variants[i]`.
    Variant(usize),
    /// No work (a `doNotDeploy` customization selects it).
    Nothing,
}

/// A decided cluster's pick, and the decision group it was picked in (its first decision's):
/// what a change of its labels is matched against to see whether it moves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Picked {
    /// The decision group of the first placement deciding it (may be empty).
    pub group: String,
    /// The template it wants.
    pub pick: Pick,
}

/// Each decided cluster's [`Picked`], by cluster.
pub type Picks = BTreeMap<String, Picked>;

/// The pick of `cluster` in `picks` (absent: the base, as every cluster of a set without
/// variants).
pub fn pick_of(picks: &Picks, cluster: &str) -> Pick {
    picks.get(cluster).map_or(Pick::Base, |p| p.pick)
}

/// What a variant is matched against.
#[derive(Debug, Clone, Copy)]
pub struct Facts<'a> {
    /// The cluster's name.
    pub name: &'a str,
    /// Its labels (`None`: not in the inventory: only name and group selectors can match).
    pub labels: Option<&'a HashMap<String, String>>,
    /// The name of the decision group it was decided in (may be empty).
    pub group: &'a str,
}

/// The replica set's variants (none for a plain replica set).
pub fn variants(rs: &ManifestWorkReplicaSet) -> &[TemplateVariant] {
    rs.hub.as_ref().map_or(&[], |h| h.variants.as_slice())
}

/// Whether `v` selects the cluster of `f`.
pub fn selects(v: &TemplateVariant, f: &Facts<'_>) -> bool {
    let label = |k: &str| f.labels.and_then(|l| l.get(k)).cloned();
    (v.cluster_name.is_empty() || v.cluster_name == f.name)
        && (v.decision_group.is_empty() || v.decision_group == f.group)
        && (v.cluster_set.is_empty() || label(CLUSTERSET_LABEL).is_some_and(|s| s == v.cluster_set))
        && v.cluster_selector
            .as_ref()
            .is_none_or(|sel| f.labels.is_some() && flotilla_api::selector::matches(sel, label))
}

/// The first variant selecting the cluster of `f`.
pub fn pick(variants: &[TemplateVariant], f: &Facts<'_>) -> Pick {
    match variants.iter().position(|v| selects(v, f)) {
        None => Pick::Base,
        Some(i) if variants[i].do_not_deploy => Pick::Nothing,
        Some(i) => Pick::Variant(i),
    }
}

/// Each decided cluster's pick (`decided`: `(cluster, group)`, over the placements in order),
/// the first decision of a cluster giving its group; `cluster`: a cluster from the inventory,
/// read in place. Empty when the replica set has no variants (every cluster wants the base).
pub fn picks<'a>(
    rs: &ManifestWorkReplicaSet,
    decided: impl IntoIterator<Item = (&'a str, &'a str)>,
    cluster: impl Fn(&str) -> Option<Arc<ManagedCluster>>,
) -> Picks {
    let vs = variants(rs);
    let mut out = Picks::new();
    if vs.is_empty() {
        return out;
    }
    let unlabelled = HashMap::new();
    for (name, group) in decided {
        if out.contains_key(name) {
            continue;
        }
        let mc = cluster(name);
        let f = Facts {
            name,
            labels: mc
                .as_deref()
                .map(|mc| mc.metadata.as_ref().map_or(&unlabelled, |m| &m.labels)),
            group,
        };
        let pick = pick(vs, &f);
        out.insert(
            name.to_owned(),
            Picked {
                group: group.to_owned(),
                pick,
            },
        );
    }
    out
}

/// The template hash a cluster with `pick` wants (`None`: no work): the base's `base`, or the
/// variant's content (its first 16 hex: what `template_hash` gives the same template).
pub fn hash<'a>(rs: &'a ManifestWorkReplicaSet, base: &'a str, pick: Pick) -> Option<&'a str> {
    match pick {
        Pick::Base => Some(base),
        Pick::Nothing => None,
        Pick::Variant(i) => variants(rs)
            .get(i)
            .map(|v| v.content.get(..16).unwrap_or(&v.content)),
    }
}

/// The template of a variant pick (`None` for the base or no work).
pub fn template(rs: &ManifestWorkReplicaSet, pick: Pick) -> Option<&ManifestWorkSpec> {
    match pick {
        Pick::Variant(i) => variants(rs).get(i).and_then(|v| v.template.as_ref()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flotilla_api::v1::{LabelSelector, ReplicaSetHubState};

    fn v(name: &str, f: impl FnOnce(&mut TemplateVariant)) -> TemplateVariant {
        let mut v = TemplateVariant {
            name: name.into(),
            content: format!("{name:0<64}"),
            template: Some(ManifestWorkSpec::default()),
            ..Default::default()
        };
        f(&mut v);
        v
    }

    #[test]
    fn the_first_variant_whose_every_selector_holds_wins() {
        let vs = vec![
            v("big-eu", |v| {
                v.cluster_selector = Some(LabelSelector {
                    match_labels: [("size".into(), "big".into())].into(),
                    ..Default::default()
                });
                v.cluster_set = "eu".into();
            }),
            v("canary", |v| v.decision_group = "canary".into()),
            v("lab", |v| {
                v.cluster_name = "lab-1".into();
                v.do_not_deploy = true;
            }),
        ];
        let labels = |pairs: &[(&str, &str)]| -> HashMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let big_eu = labels(&[("size", "big"), (CLUSTERSET_LABEL, "eu")]);
        let big_us = labels(&[("size", "big"), (CLUSTERSET_LABEL, "us")]);
        let f = |name, labels, group| Facts {
            name,
            labels,
            group,
        };
        assert_eq!(
            pick(&vs, &f("a", Some(&big_eu), "canary")),
            Pick::Variant(0)
        );
        assert_eq!(
            pick(&vs, &f("a", Some(&big_us), "canary")),
            Pick::Variant(1)
        );
        assert_eq!(pick(&vs, &f("a", Some(&big_us), "")), Pick::Base);
        assert_eq!(pick(&vs, &f("lab-1", None, "")), Pick::Nothing);
        // Not in the inventory: a label selector matches nothing, never everything.
        assert_eq!(pick(&vs, &f("a", None, "")), Pick::Base);
        let mut rs = ManifestWorkReplicaSet {
            hub: Some(ReplicaSetHubState {
                variants: vs,
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(
            hash(&rs, "base", Pick::Variant(1)),
            Some("canary0000000000")
        );
        assert_eq!(hash(&rs, "base", Pick::Nothing), None);
        let cluster = |labels: &HashMap<String, String>| {
            Arc::new(ManagedCluster {
                metadata: Some(flotilla_api::v1::ObjectMeta {
                    labels: labels.clone(),
                    ..Default::default()
                }),
                ..Default::default()
            })
        };
        let all = picks(&rs, [("lab-1", ""), ("b", "canary"), ("b", "")], |c| {
            (c == "b").then(|| cluster(&big_us))
        });
        assert_eq!(pick_of(&all, "lab-1"), Pick::Nothing);
        assert_eq!(pick_of(&all, "elsewhere"), Pick::Base);
        // The first decision counts, for the pick and for the group kept with it (a label
        // change is matched against that group too).
        assert_eq!(
            all["b"],
            Picked {
                group: "canary".into(),
                pick: Pick::Variant(1)
            }
        );
        rs.hub = None;
        assert!(picks(&rs, [("b", "")], |_| None).is_empty());
    }
}
