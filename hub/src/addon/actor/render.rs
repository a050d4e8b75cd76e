//! One cluster's works rendered from the add-on's template at its effective configs, refused
//! when they declare what another add-on's works on the cluster declare.

use super::{Actor, Entry};
use crate::addon::effects::manifest_ids;
use crate::addon::rules::{self, Resolved};
use crate::keys::ObjectRef;
use flotilla_api::addon::{self, render};
use flotilla_api::v1::{AddOnDeploymentConfig, AddOnTemplate, ManagedClusterAddOn, ManifestWork};

/// Why an add-on's works cannot be rendered for a cluster (its installation's status says it).
#[derive(Debug, thiserror::Error)]
pub(super) enum RenderFailure {
    /// The template the configs resolved to is no longer stored.
    #[error("the AddOnTemplate is gone")]
    TemplateGone,
    /// The template does not render with this cluster's values.
    #[error(transparent)]
    Render(#[from] render::RenderError),
    /// A manifest another add-on's work on the cluster declares too.
    #[error(
        "{what} (manifests[{index}] of work {work}) is already managed by add-on {owner} on this \
         cluster: declare it in one add-on only"
    )]
    Conflict {
        /// The manifest (kind, namespace, name).
        what: String,
        /// Its index in the work.
        index: usize,
        /// The work declaring it.
        work: String,
        /// The add-on whose work declares it already.
        owner: String,
    },
}

impl Actor {
    pub(super) fn render_input<'a>(
        &'a self,
        cluster: &'a str,
        mca: &'a ManagedClusterAddOn,
        template: &'a AddOnTemplate,
        config: Option<&'a AddOnDeploymentConfig>,
        hashes: &'a rules::Hashes,
    ) -> render::Input<'a> {
        render::Input {
            addon: &self.name,
            cluster,
            install_namespace: mca
                .spec
                .as_ref()
                .map(|s| s.install_namespace.as_str())
                .unwrap_or(""),
            template,
            config,
            hub_url: &self.deps.config.hub_url,
            config_hashes: hashes,
            ensure_namespace: true,
        }
    }

    /// The works of one cluster at its effective configs, checked against the works of other
    /// add-ons on the cluster.
    pub(super) fn render(
        &self,
        e: &Entry,
        resolved: &[Resolved],
    ) -> Result<Vec<ManifestWork>, RenderFailure> {
        let template = self
            .template_of(resolved)
            .ok_or(RenderFailure::TemplateGone)?;
        let config = self.deployment_config_of(resolved);
        let input = self.render_input(&e.cluster, &e.mca, &template, config.as_deref(), &e.target);
        let mut works = render::render(&input)?;
        let hub_access = template
            .spec
            .as_ref()
            .is_some_and(|s| !s.registration.is_empty());
        let namespace = render::install_namespace(&input);
        for m in works.iter_mut().filter_map(|w| w.metadata.as_mut()) {
            // Keep the annotation the rollout compares with exactly what the targets are.
            m.annotations.insert(
                addon::CONFIG_SPEC_HASH_ANNOTATION.to_string(),
                rules::annotation(&e.target),
            );
            // Hub access: a secure-mode agent puts the add-on's credentials in this Secret.
            if hub_access {
                m.annotations.insert(
                    addon::HUB_CREDENTIALS_SECRET_ANNOTATION.to_string(),
                    addon::hub_credentials_secret_name(&self.name),
                );
                m.annotations.insert(
                    addon::INSTALL_NAMESPACE_ANNOTATION.to_string(),
                    namespace.clone(),
                );
            }
        }
        self.check_conflicts(&e.cluster, &works)?;
        Ok(works)
    }

    /// Refuses works declaring a resource another add-on's work on the cluster declares.
    fn check_conflicts(&self, cluster: &str, works: &[ManifestWork]) -> Result<(), RenderFailure> {
        let mine: Vec<(String, usize, flotilla_api::work::ManifestId)> = works
            .iter()
            .flat_map(|w| {
                let name = w
                    .metadata
                    .as_ref()
                    .map(|m| m.name.clone())
                    .unwrap_or_default();
                manifest_ids(w)
                    .into_iter()
                    .map(move |(i, id)| (name.clone(), i, id))
            })
            // Namespaces are shared by add-ons (they are orphaned, never deleted, by each).
            .filter(|(_, _, id)| id.kind != "Namespace")
            .collect();
        if mine.is_empty() {
            return Ok(());
        }
        for (_, other) in self.deps.works.with_prefix(&ObjectRef::prefix(cluster)) {
            let Some(owner) = other
                .metadata
                .as_ref()
                .and_then(|m| m.labels.get(addon::ADDON_NAME_LABEL))
            else {
                continue;
            };
            if *owner == self.name {
                continue;
            }
            let theirs = manifest_ids(&other.to_work());
            for (work, i, id) in &mine {
                if theirs.iter().any(|(_, t)| t == id) {
                    return Err(RenderFailure::Conflict {
                        what: id.describe(),
                        index: *i,
                        work: work.clone(),
                        owner: owner.clone(),
                    });
                }
            }
        }
        Ok(())
    }
}
