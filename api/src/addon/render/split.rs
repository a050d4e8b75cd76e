//! The agent's work split into works of at most [`MAX_MANIFESTS_BYTES`] of manifests each,
//! OCM's `addon-<name>-deploy-N` works ([`work_name`]).

use super::{Origin, RenderError};
use crate::addon::work_name;
use crate::v1;
use crate::work::MAX_MANIFESTS_BYTES;

/// Splits the agent's work into works of at most [`MAX_MANIFESTS_BYTES`] of manifests each,
/// filled greedily in manifest order and named [`work_name`] 0, 1, …; each keeps the whole
/// work's labels, annotations, manifest configs, delete option and executor (OCM's work builder
/// sets its options on every work). A manifest larger than one work is an error naming it.
pub(super) fn split(
    whole: v1::ManifestWork,
    origins: &[Origin],
    addon: &str,
) -> Result<Vec<v1::ManifestWork>, RenderError> {
    let meta = whole.metadata.unwrap_or_default();
    let mut spec = whole.spec.unwrap_or_default();
    let manifests = spec
        .workload
        .take()
        .map(|w| w.manifests)
        .unwrap_or_default();
    let mut chunks: Vec<(Vec<v1::Manifest>, usize)> = Vec::new();
    for (m, origin) in manifests.into_iter().zip(origins) {
        let bytes = m.raw.len();
        if bytes > MAX_MANIFESTS_BYTES {
            return Err(RenderError::TooLarge {
                field: origin.field(),
                bytes,
                limit: MAX_MANIFESTS_BYTES,
            });
        }
        match chunks.last_mut() {
            Some((list, size)) if *size + bytes <= MAX_MANIFESTS_BYTES => {
                list.push(m);
                *size += bytes;
            }
            _ => chunks.push((vec![m], bytes)),
        }
    }
    let works = chunks
        .into_iter()
        .enumerate()
        .map(|(i, (manifests, _))| v1::ManifestWork {
            metadata: Some(v1::ObjectMeta {
                name: work_name(addon, i),
                ..meta.clone()
            }),
            spec: Some(v1::ManifestWorkSpec {
                workload: Some(v1::ManifestsTemplate { manifests }),
                ..spec.clone()
            }),
            status: None,
            hub: None,
        })
        .collect();
    Ok(works)
}
