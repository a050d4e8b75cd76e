//! The least OpenAPI v3 an in-memory cluster serves (pure) so that `kubectl apply`, `create -f` and
//! `replace` work: a root listing every group version, and per group version the PATCH
//! operations of its kinds with the `fieldValidation` query parameter. kubectl then leaves
//! validation to the server (which, in memory, accepts what it can store) instead of
//! downloading schemas; without schemas its client-side apply computes strategic merge
//! patches from its built-in types (JSON merge patches for other kinds), as against any server.

use crate::resources::Resource;
use serde_json::{Map, Value, json};

/// The `/openapi/v3` root: `api/v1`, `apis/<group>/<version>` → their documents.
pub fn root(resources: &[Resource]) -> Value {
    let mut paths = Map::new();
    for r in resources {
        let key = gv_path(r);
        paths
            .entry(key.clone())
            .or_insert_with(|| json!({"serverRelativeURL": format!("/openapi/v3/{key}")}));
    }
    json!({"paths": paths})
}

/// `api/v1` or `apis/apps/v1`.
fn gv_path(r: &Resource) -> String {
    if r.group.is_empty() {
        format!("api/{}", r.version)
    } else {
        format!("apis/{}/{}", r.group, r.version)
    }
}

/// The document of one group version (`api/v1`, `apis/apps/v1`); `None` when unknown.
pub fn group_version(path: &str, resources: &[Resource]) -> Option<Value> {
    let mut paths = Map::new();
    for r in resources.iter().filter(|r| gv_path(r) == path) {
        let object = if r.namespaced {
            format!("/{path}/namespaces/{{namespace}}/{}/{{name}}", r.plural)
        } else {
            format!("/{path}/{}/{{name}}", r.plural)
        };
        paths.insert(
            object,
            json!({"patch": {
                "operationId": format!("patch{}", r.kind),
                "x-kubernetes-action": "patch",
                "x-kubernetes-group-version-kind": {"group": r.group, "version": r.version, "kind": r.kind},
                "parameters": [
                    {"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
                    {"name": "fieldManager", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
                    {"name": "dryRun", "in": "query", "schema": {"type": "string", "uniqueItems": true}}
                ],
                "responses": {"200": {"description": "OK"}}
            }}),
        );
    }
    (!paths.is_empty()).then(|| {
        json!({
            "openapi": "3.0.0",
            "info": {"title": "Kubernetes (simulated by Flotilla)", "version": "unversioned"},
            "paths": paths,
            "components": {"schemas": {}},
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::builtin;

    #[test]
    fn every_group_version_has_a_document_with_its_patch_operations() {
        let all = builtin();
        let root = root(&all);
        assert_eq!(
            root["paths"]["apis/apps/v1"]["serverRelativeURL"],
            "/openapi/v3/apis/apps/v1"
        );
        let doc = group_version("apis/apps/v1", &all).unwrap();
        let op = &doc["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]["patch"];
        assert_eq!(op["x-kubernetes-group-version-kind"]["kind"], "Deployment");
        assert_eq!(op["parameters"][0]["name"], "fieldValidation");
        assert!(group_version("apis/nope/v1", &all).is_none());
    }
}
