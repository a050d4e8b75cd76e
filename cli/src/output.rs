//! Output: kubectl-style tables, and JSON/YAML in the OCM shapes. What each kind shows lives in
//! [`crate::kind`]; this module only lays it out.

use crate::kind::Kind;
use flotilla_api::ocm;
use serde::Serialize;

/// Why objects could not be rendered in the chosen format.
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    /// A table was asked of the structured serialiser (a caller's mistake: tables are laid out
    /// by [`render`] and [`kind_table`]).
    #[error("a table is not a structured format")]
    NotStructured,
    /// The objects do not serialise as JSON.
    #[error("serialising as JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// The objects do not serialise as YAML.
    #[error("serialising as YAML: {0}")]
    Yaml(#[from] serde_yaml::Error),
}

/// Output format (`-o`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Aligned columns.
    Table,
    /// JSON in the OCM shape.
    Json,
    /// YAML in the OCM shape.
    Yaml,
    /// Aligned columns with the kind's extra columns (`get clusters -o wide` adds the agent key
    /// fingerprints).
    Wide,
}

impl Format {
    /// Whether this is one of the table formats.
    pub fn is_table(self) -> bool {
        matches!(self, Format::Table | Format::Wide)
    }
}

/// `text` with every control character written as `\u{..}`: a value from the hub (a name an
/// agent reported, a message) cannot move the cursor, clear the screen or set the clipboard
/// of the terminal it is printed on.
pub fn escaped(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(char::is_control) {
        return std::borrow::Cow::Borrowed(text);
    }
    text.chars()
        .map(|c| {
            if c.is_control() {
                c.escape_unicode().to_string()
            } else {
                c.to_string()
            }
        })
        .collect::<String>()
        .into()
}

/// Renders rows as left-aligned columns separated by three spaces (kubectl's layout); control
/// characters in a cell are [`escaped`].
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let rows: Vec<Vec<String>> = rows
        .iter()
        .map(|r| r.iter().map(|c| escaped(c).into_owned()).collect())
        .collect();
    let rows = rows.as_slice();
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for r in rows {
        for (i, cell) in r.iter().enumerate() {
            if i < widths.len() {
                widths[i] = widths[i].max(cell.chars().count());
            }
        }
    }
    let line = |cells: Vec<&str>| {
        let mut s = String::new();
        for (i, c) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                s.push_str(c);
            } else {
                s.push_str(&format!("{c:<w$}   ", w = widths[i]));
            }
        }
        s.trim_end().to_string()
    };
    let mut out = line(header.to_vec());
    out.push('\n');
    for r in rows {
        out.push_str(&line(r.iter().map(String::as_str).collect()));
        out.push('\n');
    }
    out
}

/// Every line of `text` indented by two spaces: a table nested in a `describe`.
pub fn indented(text: &str) -> String {
    text.lines().map(|line| format!("  {line}\n")).collect()
}

/// Serialises one object or a List in the chosen structured format.
pub fn structured<T: Serialize>(
    format: Format,
    items: Vec<T>,
    single: bool,
) -> Result<String, RenderError> {
    let to = |v: &dyn erased::Ser| -> Result<String, RenderError> {
        match format {
            Format::Json => Ok(v.json()?),
            Format::Yaml => Ok(v.yaml()?),
            Format::Table | Format::Wide => Err(RenderError::NotStructured),
        }
    };
    if single && items.len() == 1 {
        let item = items.into_iter().next().expect("one item");
        to(&item)
    } else {
        to(&ocm::List::new(items))
    }
}

mod erased {
    use serde::Serialize;

    pub trait Ser {
        fn json(&self) -> Result<String, serde_json::Error>;
        fn yaml(&self) -> Result<String, serde_yaml::Error>;
    }

    impl<T: Serialize> Ser for T {
        fn json(&self) -> Result<String, serde_json::Error> {
            serde_json::to_string_pretty(self).map(|s| s + "\n")
        }
        fn yaml(&self) -> Result<String, serde_yaml::Error> {
            serde_yaml::to_string(self)
        }
    }
}

/// Renders objects of one kind as a table of the kind's columns, or as OCM-shaped JSON/YAML (a
/// single named object prints alone when `single`, otherwise a `kind: List`).
pub fn render<K: Kind>(format: Format, items: &[K], single: bool) -> Result<String, RenderError> {
    match format {
        Format::Table => Ok(kind_table(items)),
        Format::Wide => Ok(wide_table(items)),
        f => structured(f, items.iter().map(Kind::to_ocm).collect(), single),
    }
}

/// The kind's table: its columns, one row per object.
pub fn kind_table<K: Kind>(items: &[K]) -> String {
    let rows: Vec<_> = items.iter().map(Kind::row).collect();
    table(K::COLUMNS, &rows)
}

/// The kind's table with its extra (`-o wide`) columns.
pub fn wide_table<K: Kind>(items: &[K]) -> String {
    let mut header = K::COLUMNS.to_vec();
    header.extend(K::WIDE_COLUMNS);
    let rows: Vec<_> = items
        .iter()
        .map(|item| {
            let mut row = item.row();
            row.extend(item.wide_row());
            row
        })
        .collect();
    table(&header, &rows)
}

/// The kind's table with a leading NAMESPACE column, for a list that spans namespaces.
pub fn namespaced_table<K: Kind>(items: &[K]) -> String {
    let mut header = vec!["NAMESPACE"];
    header.extend(K::COLUMNS);
    let rows: Vec<_> = items
        .iter()
        .map(|item| {
            let mut row = vec![item.namespace()];
            row.extend(item.row());
            row
        })
        .collect();
    table(&header, &rows)
}

/// The first lines of a `describe` of a namespaced object, values aligned at column 15: its
/// name, its scope (`("Namespace:", ns)`, or `("Cluster:", cluster)` for a work), its
/// generation and its creation time.
pub fn describe_head(name: &str, scope: (&str, &str), generation: i64, created: &str) -> String {
    let (scope_label, scope) = scope;
    [
        ("Name:", name.to_string()),
        (scope_label, scope.to_string()),
        ("Generation:", generation.to_string()),
        ("Created:", created.to_string()),
    ]
    .iter()
    .map(|(label, value)| format!("{label:<15}{value}\n"))
    .collect()
}

/// The `Conditions:` section of a `describe`: an indented table of type, status, reason, when
/// the status last changed and message.
pub fn conditions_block(conditions: &[ocm::Condition]) -> String {
    let rows: Vec<Vec<String>> = conditions
        .iter()
        .map(|c| {
            vec![
                c.type_.clone(),
                c.status.clone(),
                c.reason.clone(),
                c.last_transition_time.clone(),
                c.message.clone(),
            ]
        })
        .collect();
    let header = ["TYPE", "STATUS", "REASON", "SINCE", "MESSAGE"];
    format!("Conditions:\n{}", indented(&table(&header, &rows)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_cell_cannot_move_the_cursor_or_clear_the_screen() {
        let rows = vec![vec!["c1".to_string(), "x\r\u{1b}[2Kfake-row".to_string()]];
        let out = table(&["CLUSTER", "NAME"], &rows);
        assert!(!out.contains('\u{1b}') && !out.contains('\r'), "{out:?}");
        assert!(out.contains("x\\u{d}\\u{1b}[2Kfake-row"), "{out}");
        assert_eq!(escaped("plain-name"), "plain-name");
    }
}
