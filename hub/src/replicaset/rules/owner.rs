//! Who may write a replica set (pure). A replica set a GitRepo writes (its bundle's: label
//! `apps.flotilla.io/gitrepo`) changes through the repository: a user's apply, delete or undo
//! of it is refused with the GitRepo named, unless forced; pausing and resuming it stay allowed.
//! The GitRepo writes only its own replica sets, or new ones.

use flotilla_api::v1::ManifestWorkReplicaSet;
pub use flotilla_gitops::source::GITREPO_LABEL;

/// Who writes a replica set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Writer<'a> {
    /// A user (the API, the dashboard): refused on a replica set a GitRepo writes.
    User,
    /// A user who forced the write (`--force`, the `flotilla-force` request header).
    Forced,
    /// The GitRepo of this name, in the replica set's namespace.
    GitRepo(&'a str),
}

/// What a writer does to a replica set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// Create or update it.
    Apply,
    /// Delete it.
    Delete,
    /// Go back to its previous template.
    Undo,
    /// Pause or resume its rollout.
    PauseOrResume,
}

/// Why a write was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// A user's change of a replica set a GitRepo writes.
    #[error(
        "ManifestWorkReplicaSet {namespace}/{name} belongs to GitRepo {namespace}/{gitrepo}: \
         change the repository, or `flotilla rollout undo gitrepo {gitrepo} -n {namespace}`; \
         {}",
        forced(*change)
    )]
    Owned {
        /// The replica set's namespace (the GitRepo's too).
        namespace: String,
        /// The replica set.
        name: String,
        /// The GitRepo writing it.
        gitrepo: String,
        /// What was refused.
        change: Change,
    },
    /// A GitRepo's write of a replica set it does not own.
    #[error(
        "ManifestWorkReplicaSet {namespace}/{name} exists and does not belong to GitRepo \
         {namespace}/{gitrepo}"
    )]
    NotOwned {
        /// The replica set's namespace.
        namespace: String,
        /// The replica set.
        name: String,
        /// The GitRepo that tried.
        gitrepo: String,
    },
}

fn forced(change: Change) -> &'static str {
    match change {
        Change::Delete => {
            "`--force` deletes it anyway (the GitRepo makes it again at its next commit)"
        }
        _ => {
            "`--force` writes it anyway (the GitRepo writes over it at its next commit that \
             changes this bundle)"
        }
    }
}

/// The GitRepo that writes `rs` (its label), if any.
pub fn owner(rs: &ManifestWorkReplicaSet) -> Option<&str> {
    rs.metadata
        .as_ref()?
        .labels
        .get(GITREPO_LABEL)
        .map(String::as_str)
        .filter(|n| !n.is_empty())
}

/// Whether `writer` may make `change` to the replica set stored as `stored` (`None`: none is
/// stored under that name yet).
pub fn may_write(
    stored: Option<&ManifestWorkReplicaSet>,
    writer: Writer<'_>,
    change: Change,
) -> Result<(), Refusal> {
    let Some(rs) = stored else {
        return Ok(());
    };
    let m = rs.metadata.clone().unwrap_or_default();
    match (writer, owner(rs)) {
        (Writer::Forced, _) | (Writer::User, None) => Ok(()),
        (Writer::User, Some(_)) if change == Change::PauseOrResume => Ok(()),
        (Writer::GitRepo(me), Some(o)) if o == me => Ok(()),
        (Writer::User, Some(o)) => Err(Refusal::Owned {
            namespace: m.namespace,
            name: m.name,
            gitrepo: o.to_owned(),
            change,
        }),
        (Writer::GitRepo(me), _) => Err(Refusal::NotOwned {
            namespace: m.namespace,
            name: m.name,
            gitrepo: me.to_owned(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flotilla_api::v1::ObjectMeta;

    fn set(owner: Option<&str>) -> ManifestWorkReplicaSet {
        ManifestWorkReplicaSet {
            metadata: Some(ObjectMeta {
                name: "shop-apps-web".into(),
                namespace: "edge-apps".into(),
                labels: owner
                    .map(|o| (GITREPO_LABEL.to_string(), o.to_string()))
                    .into_iter()
                    .collect(),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn a_user_s_change_of_a_gitrepo_s_replica_set_is_refused_naming_it_unless_forced() {
        let owned = set(Some("shop"));
        for change in [Change::Apply, Change::Delete, Change::Undo] {
            let e = may_write(Some(&owned), Writer::User, change).unwrap_err();
            let text = e.to_string();
            assert!(
                text.starts_with(
                    "ManifestWorkReplicaSet edge-apps/shop-apps-web belongs to GitRepo \
                     edge-apps/shop: change the repository, or `flotilla rollout undo gitrepo \
                     shop -n edge-apps`"
                ),
                "{text}"
            );
            assert!(text.contains("--force"), "{text}");
            assert_eq!(may_write(Some(&owned), Writer::Forced, change), Ok(()));
        }
        assert_eq!(
            may_write(Some(&owned), Writer::User, Change::PauseOrResume),
            Ok(()),
            "pausing and resuming a bundle stay allowed"
        );
    }

    #[test]
    fn users_write_sets_no_gitrepo_owns_and_a_gitrepo_only_its_own_or_new_ones() {
        let mine = set(Some("shop"));
        let plain = set(None);
        assert_eq!(may_write(Some(&plain), Writer::User, Change::Apply), Ok(()));
        assert_eq!(may_write(None, Writer::User, Change::Apply), Ok(()));
        assert_eq!(
            may_write(Some(&mine), Writer::GitRepo("shop"), Change::Apply),
            Ok(())
        );
        assert_eq!(
            may_write(None, Writer::GitRepo("shop"), Change::Apply),
            Ok(())
        );
        for other in [&plain, &set(Some("other"))] {
            let e = may_write(Some(other), Writer::GitRepo("shop"), Change::Delete).unwrap_err();
            assert_eq!(
                e.to_string(),
                "ManifestWorkReplicaSet edge-apps/shop-apps-web exists and does not belong to \
                 GitRepo edge-apps/shop"
            );
        }
        let unlabelled = set(Some(""));
        assert_eq!(owner(&unlabelled), None, "an empty label owns nothing");
    }
}
