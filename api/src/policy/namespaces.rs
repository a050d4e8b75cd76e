//! `namespaceSelector`: the namespaces a namespaced object template without
//! `metadata.namespace` is checked in, as config-policy-controller selects them:
//!
//! - neither `include` nor a label selector → no namespace (an empty selector selects nothing,
//!   and a namespaced template then reports that it has no namespace);
//! - `include` globs (`*`, `?`, `[a-z]`, as Go's `filepath.Match`) and the label selector are
//!   ANDed when both are given; either alone selects on its own;
//! - `exclude` globs remove names last.

use super::config::NamespaceSelector;
use std::collections::HashMap;

/// A glob as Go's `filepath.Match` reads it (no path separators in namespace names):
/// `*` any run, `?` one character, `[abc]`, `[a-z]`, `[^a-z]` classes, `\` escapes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Glob(Vec<Token>);

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Char(char),
    Any,
    Star,
    Class {
        negated: bool,
        ranges: Vec<(char, char)>,
    },
}

impl Glob {
    /// Parses a glob; an unterminated class or a trailing `\` is an error (Go's
    /// `ErrBadPattern`).
    pub fn new(pattern: &str) -> Result<Self, String> {
        let bad = |why: &str| format!("{pattern:?} is not a valid glob: {why}");
        let mut tokens = Vec::new();
        let mut chars = pattern.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '*' => tokens.push(Token::Star),
                '?' => tokens.push(Token::Any),
                '\\' => tokens.push(Token::Char(chars.next().ok_or_else(|| bad("trailing \\"))?)),
                '[' => {
                    let negated = chars.next_if_eq(&'^').is_some();
                    let mut ranges = Vec::new();
                    loop {
                        let lo = match chars.next() {
                            None => return Err(bad("unterminated [")),
                            Some(']') if !ranges.is_empty() => break,
                            Some(']') => return Err(bad("empty []")),
                            Some('\\') => chars.next().ok_or_else(|| bad("trailing \\"))?,
                            Some(c) => c,
                        };
                        let hi = if chars.next_if_eq(&'-').is_some() {
                            match chars.next() {
                                None | Some(']') => return Err(bad("unterminated range")),
                                Some('\\') => chars.next().ok_or_else(|| bad("trailing \\"))?,
                                Some(c) => c,
                            }
                        } else {
                            lo
                        };
                        ranges.push((lo, hi));
                    }
                    tokens.push(Token::Class { negated, ranges });
                }
                c => tokens.push(Token::Char(c)),
            }
        }
        Ok(Self(tokens))
    }

    /// Whether the whole of `name` matches.
    pub fn matches(&self, name: &str) -> bool {
        let chars: Vec<char> = name.chars().collect();
        matches_at(&self.0, &chars)
    }
}

fn matches_at(tokens: &[Token], name: &[char]) -> bool {
    match tokens.split_first() {
        None => name.is_empty(),
        Some((Token::Star, rest)) => (0..=name.len()).any(|i| matches_at(rest, &name[i..])),
        Some((t, rest)) => match name.split_first() {
            None => false,
            Some((c, name_rest)) => {
                let ok = match t {
                    Token::Char(want) => want == c,
                    Token::Any => true,
                    Token::Class { negated, ranges } => {
                        ranges.iter().any(|(lo, hi)| lo <= c && c <= hi) != *negated
                    }
                    // A star is the first arm's; it never reaches here.
                    Token::Star => false,
                };
                ok && matches_at(rest, name_rest)
            }
        },
    }
}

/// One namespace of the cluster: its name and labels.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Namespace {
    /// Name.
    pub name: String,
    /// Labels.
    pub labels: HashMap<String, String>,
}

/// The namespaces `selector` selects among `namespaces`, sorted by name. Globs that do not
/// parse select nothing (validation reports them).
pub fn select(selector: &NamespaceSelector, namespaces: &[Namespace]) -> Vec<String> {
    if selector.include.is_empty() && selector.labels.is_none() {
        return Vec::new();
    }
    let globs =
        |list: &[String]| -> Vec<Glob> { list.iter().filter_map(|g| Glob::new(g).ok()).collect() };
    let include = globs(&selector.include);
    let exclude = globs(&selector.exclude);
    let mut out: Vec<String> = namespaces
        .iter()
        .filter(|ns| selector.include.is_empty() || include.iter().any(|g| g.matches(&ns.name)))
        .filter(|ns| {
            selector
                .labels
                .as_ref()
                .is_none_or(|sel| crate::selector::matches_labels(sel, &ns.labels))
        })
        .filter(|ns| !exclude.iter().any(|g| g.matches(&ns.name)))
        .map(|ns| ns.name.clone())
        .collect();
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::v1::LabelSelector;

    fn ns(name: &str, labels: &[(&str, &str)]) -> Namespace {
        Namespace {
            name: name.into(),
            labels: labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    fn fleet() -> Vec<Namespace> {
        vec![
            ns("default", &[]),
            ns("kube-system", &[]),
            ns("kube-public", &[]),
            ns("prod-a", &[("env", "prod")]),
            ns("prod-b", &[("env", "prod")]),
            ns("dev", &[("env", "dev")]),
        ]
    }

    fn selector(include: &[&str], exclude: &[&str]) -> NamespaceSelector {
        NamespaceSelector {
            include: include.iter().map(|s| s.to_string()).collect(),
            exclude: exclude.iter().map(|s| s.to_string()).collect(),
            labels: None,
        }
    }

    #[test]
    fn globs_match_as_go_filepath_match() {
        let cases = [
            ("kube-*", "kube-system", true),
            ("kube-*", "kube", false),
            ("*", "", true),
            ("prod-?", "prod-a", true),
            ("prod-?", "prod-ab", false),
            ("prod-[a-b]", "prod-b", true),
            ("prod-[^a]", "prod-a", false),
            ("prod-[^a]", "prod-c", true),
            ("a\\*", "a*", true),
            ("a\\*", "ab", false),
            ("*-*-*", "a-b-c", true),
        ];
        for (glob, name, want) in cases {
            assert_eq!(
                Glob::new(glob).unwrap().matches(name),
                want,
                "{glob} ~ {name}"
            );
        }
        for bad in ["[abc", "a\\", "[]", "[a-"] {
            assert!(Glob::new(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn an_empty_selector_selects_no_namespace() {
        assert!(select(&NamespaceSelector::default(), &fleet()).is_empty());
        // exclude alone selects nothing either.
        assert!(select(&selector(&[], &["kube-*"]), &fleet()).is_empty());
    }

    #[test]
    fn include_then_exclude_by_glob() {
        assert_eq!(
            select(&selector(&["*"], &["kube-*"]), &fleet()),
            ["default", "dev", "prod-a", "prod-b"]
        );
        assert_eq!(select(&selector(&["default"], &[]), &fleet()), ["default"]);
        // A name that does not exist selects nothing.
        assert!(select(&selector(&["missing"], &[]), &fleet()).is_empty());
    }

    #[test]
    fn labels_alone_or_anded_with_include() {
        let mut s = selector(&[], &[]);
        s.labels = Some(LabelSelector {
            match_labels: [("env".to_string(), "prod".to_string())].into(),
            match_expressions: vec![],
        });
        assert_eq!(select(&s, &fleet()), ["prod-a", "prod-b"]);
        s.include = vec!["*-a".into(), "dev".into()];
        assert_eq!(select(&s, &fleet()), ["prod-a"]);
        s.include.clear();
        s.exclude = vec!["prod-b".into()];
        assert_eq!(select(&s, &fleet()), ["prod-a"]);
    }
}
