//! Pre-delete hooks: whether a template that cannot render has any.

use super::*;

#[test]
fn a_template_that_cannot_render_still_tells_whether_it_has_hooks() {
    let hashes = no_hashes();
    let hooked = raw_template_of(&[
        r#"{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"j","namespace":"ns","annotations":{"addon.open-cluster-management.io/addon-pre-delete":""}},"spec":{"backoffLimit":{{LIMIT}}}}"#,
    ]);
    assert!(pre_delete(&input(&hooked, None, &hashes)).is_err());
    assert!(may_have_pre_delete_hooks(&hooked));
    let labelled = template_of(vec![json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ns", "labels": {PRE_DELETE_HOOK_LABEL: "true"}}})]);
    assert!(may_have_pre_delete_hooks(&labelled));
    let plain = template_of(vec![json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "c", "namespace": "ns"}})]);
    assert!(!may_have_pre_delete_hooks(&plain));
}
