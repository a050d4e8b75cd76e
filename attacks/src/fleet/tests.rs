use super::*;

#[test]
fn table_cells_are_found_by_header() {
    let t = "NAME     ACCEPTED   KUBERNETES VERSION   KEY\nedge-1   true       v1.30.2              SHA256:ab12\n";
    assert_eq!(
        table_cell(t, "edge-1", "KEY").as_deref(),
        Some("SHA256:ab12")
    );
    assert_eq!(
        table_cell(t, "edge-1", "KUBERNETES VERSION").as_deref(),
        Some("v1.30.2")
    );
    assert_eq!(table_cell(t, "edge-2", "KEY"), None);
    assert_eq!(table_cell(t, "edge-1", "NOPE"), None);
}

#[test]
fn metric_samples_are_summed_over_labels() {
    let text = "# HELP x\nflotilla_hub_limit_refusals_total{limit=\"pending\"} 3\nflotilla_hub_limit_refusals_total{limit=\"status\"} 2\nflotilla_hub_limit_refusals_totalx 9\n";
    assert_eq!(metric_sum(text, "flotilla_hub_limit_refusals_total"), 5.0);
}
