//! A replica set's next revision (pure). Its content is its template and, for a GitRepo
//! bundle's set, its per-target variants (`hub.variants`): a change of either moves the
//! generation (what rollout status and `--wait` go by) and keeps the content before it as the
//! undo copy (`hub.previousTemplate` with `hub.previousVariants`); `rollout undo` swaps the two
//! contents whole, so that no cluster on a variant keeps the newer content while the set says
//! it was undone.

use super::owner;
use flotilla_api::v1::{ManifestWorkReplicaSet, ReplicaSetHubState, TemplateVariants};

/// Makes `new`, written over the stored `old`, the next revision: `old`'s identity, status and
/// hub state carry over, the variants too unless a GitRepo writes them (`by_gitrepo`: `new`'s
/// own). Returns whether the spec or the variants changed (the generation moved).
pub fn next(
    old: ManifestWorkReplicaSet,
    new: &mut ManifestWorkReplicaSet,
    by_gitrepo: bool,
) -> bool {
    let mut hub = old.hub.unwrap_or_default();
    let written = new.hub.take().map(|h| h.variants).unwrap_or_default();
    let variants_changed = by_gitrepo && written != hub.variants;
    let old_template = old
        .spec
        .as_ref()
        .and_then(|s| s.manifest_work_template.as_ref());
    let template_changed = old_template != super::template_of(new);
    if template_changed || variants_changed {
        hub.previous_template = old_template.cloned();
        hub.previous_variants = Some(TemplateVariants {
            variants: hub.variants.clone(),
        });
    }
    if variants_changed {
        hub.variants = written;
    }
    let changed = old.spec != new.spec || variants_changed;
    let m = new.metadata.get_or_insert_with(Default::default);
    crate::identity::keep(m, &old.metadata.unwrap_or_default(), changed);
    new.status = old.status;
    new.hub = Some(hub);
    changed
}

/// Goes back to the content before the last change (`rollout undo`): the template and the
/// variants swap with their undo copies, and the generation moves. Refused, saying why, with
/// nothing to go back to, or when a set with variants has no record of the variants before
/// (stored before they were kept): its base alone would go back.
pub fn undo(rs: &mut ManifestWorkReplicaSet) -> Result<(), String> {
    let key = rs
        .metadata
        .as_ref()
        .map(|m| format!("{}/{}", m.namespace, m.name))
        .unwrap_or_default();
    let hub = rs.hub.get_or_insert_with(ReplicaSetHubState::default);
    if hub.previous_template.is_none() {
        return Err(format!("{key}: no previous template to go back to"));
    }
    if hub.previous_variants.is_none() && !hub.variants.is_empty() {
        let how = match owner::owner(rs) {
            Some(gitrepo) => {
                let ns = rs.metadata.as_ref().map_or("", |m| m.namespace.as_str());
                format!(
                    "`flotilla rollout undo gitrepo {gitrepo} -n {ns}` goes back to the \
                     commit before"
                )
            }
            None => "apply the content to go back to".to_owned(),
        };
        return Err(format!(
            "{key}: its per-target variants before the last change were not recorded (it was \
             stored before they were kept), so an undo would take back its base template only; \
             {how}"
        ));
    }
    let previous = hub.previous_template.take();
    let variants = hub.previous_variants.take().unwrap_or_default().variants;
    hub.previous_variants = Some(TemplateVariants {
        variants: std::mem::replace(&mut hub.variants, variants),
    });
    let spec = rs.spec.get_or_insert_with(Default::default);
    hub.previous_template = std::mem::replace(&mut spec.manifest_work_template, previous);
    if let Some(m) = rs.metadata.as_mut() {
        m.generation += 1;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
