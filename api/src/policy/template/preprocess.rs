//! The text rewrites go-template-utils makes before parsing (`processForDataTypes`,
//! `processForAutoIndent`), with the same regular expressions (RE2 and Rust's `regex` agree on
//! these: no look-around, leftmost-first). `\s` is spelled `[\t\n\f\r ]`, RE2's ASCII class.

use regex::Regex;

/// The delimiters of one side: `{{hub` / `hub}}` on the hub, `{{` / `}}` on the spoke.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Delims {
    /// Start delimiter.
    pub start: &'static str,
    /// Stop delimiter.
    pub stop: &'static str,
}

/// Managed-cluster templates.
pub const SPOKE: Delims = Delims {
    start: "{{",
    stop: "}}",
};
/// Hub templates.
pub const HUB: Delims = Delims {
    start: "{{hub",
    stop: "hub}}",
};

const WS: &str = r"[\t\n\f\r ]";

/// Whether `text` holds a template for these delimiters (go-template-utils' `HasTemplate`; the
/// spoke also resolves `$ocm_encrypted:` values, which the hub sealed).
pub fn has_template(text: &str, delims: Delims) -> bool {
    text.contains(delims.start) || (delims == SPOKE && text.contains("$ocm_encrypted:"))
}

/// Removes the quotes YAML put around a template ending in `toInt`, `toBool` or `toLiteral`,
/// or calling `copyConfigMapData`/`copySecretData`, so the value keeps its type
/// (`replicas: '{{ "6" | toInt }}'` → `replicas: {{ "6" | toInt }}`).
pub fn data_types(text: &str, delims: Delims) -> String {
    let d1 = regex::escape(delims.start);
    let d2 = regex::escape(delims.stop);
    let expression = format!(
        r":{WS}+(?:[\|>]-?{WS}+)?(?:'?{WS}*)({d1}-?(?:.*\|{WS}*(?:toInt|toBool|toLiteral)|(?:.*(?:copyConfigMapData|copySecretData))).*{d2})(?:{WS}*'?)"
    );
    let Ok(re) = Regex::new(&expression) else {
        return text.to_string();
    };
    re.replace_all(text, ": $1").into_owned()
}

/// Turns `| autoindent` into `| indent N`, N the spaces before the template on its line (each
/// match replaces the first occurrence of its text, as go-template-utils does).
pub fn autoindent(text: &str, delims: Delims) -> String {
    if !text.contains("autoindent") {
        return text.to_string();
    }
    let d1 = regex::escape(delims.start);
    let d2 = regex::escape(delims.stop);
    let Ok(re) = Regex::new(&format!(r#"( *)(?:'|")?({d1}.*\| *autoindent *-?{d2})"#)) else {
        return text.to_string();
    };
    let mut out = text.to_string();
    for caps in re.captures_iter(text) {
        let spaces = caps.get(1).map_or(0, |m| m.len());
        let Some(found) = caps.get(2) else { continue };
        let replaced = found
            .as_str()
            .replacen("autoindent", &format!("indent {spaces}"), 1);
        out = out.replacen(found.as_str(), &replaced, 1);
    }
    out
}
