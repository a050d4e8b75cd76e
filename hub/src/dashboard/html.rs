//! HTML building blocks: every value from the fleet is escaped on its way into a page
//! (cluster names, labels and messages come from spokes — hostile until proven otherwise), and
//! the page frame every view shares.

use std::fmt;

/// A value written into HTML text or a quoted attribute, escaped (`& < > " '`).
pub struct E<'a>(pub &'a str);

impl fmt::Display for E<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut last = 0;
        for (i, c) in self.0.char_indices() {
            let rep = match c {
                '&' => "&amp;",
                '<' => "&lt;",
                '>' => "&gt;",
                '"' => "&quot;",
                '\'' => "&#39;",
                _ => continue,
            };
            f.write_str(&self.0[last..i])?;
            f.write_str(rep)?;
            last = i + c.len_utf8();
        }
        f.write_str(&self.0[last..])
    }
}

/// A value written into a URL path segment or query value, percent-encoded (everything but
/// unreserved characters), so a hostile name can neither leave its segment nor its attribute.
pub struct U<'a>(pub &'a str);

impl fmt::Display for U<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for b in self.0.bytes() {
            if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
                write!(f, "{}", b as char)?;
            } else {
                write!(f, "%{b:02X}")?;
            }
        }
        Ok(())
    }
}

/// The views in the navigation bar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Nav {
    /// `/`.
    Overview,
    /// `/clusters`.
    Clusters,
    /// `/works`.
    Works,
    /// `/placements`.
    Placements,
    /// `/rollouts`.
    Rollouts,
    /// `/policies`.
    Policies,
    /// None highlighted (login, errors).
    None,
}

/// Who is looking, as the frame shows it.
pub struct Frame<'a> {
    /// The identity's name and role (`None`: not signed in).
    pub who: Option<(&'a str, &'a str)>,
    /// The CSRF token of the sign-out form.
    pub csrf: &'a str,
    /// Whether the viewer signed in with a session (and can sign out).
    pub session: bool,
}

/// A whole page: the frame around `body` (already HTML), with the live feed's script.
pub fn page(title: &str, nav: Nav, frame: &Frame<'_>, body: &str) -> String {
    let link = |n: Nav, href: &str, label: &str| {
        let class = if n == nav { " class=\"active\"" } else { "" };
        format!("<a href=\"{href}\"{class}>{label}</a>")
    };
    let who = match frame.who {
        Some((name, role)) => {
            let out = if frame.session {
                format!(
                    "<form method=\"post\" action=\"/logout\" class=\"inline\">\
                     <input type=\"hidden\" name=\"csrf\" value=\"{}\">\
                     <button type=\"submit\">Sign out</button></form>",
                    E(frame.csrf)
                )
            } else {
                String::new()
            };
            format!(
                "<span class=\"who\" id=\"who\">{} ({})</span>{out}",
                E(name),
                E(role)
            )
        }
        None => String::new(),
    };
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{} · Flotilla</title><link rel=\"stylesheet\" href=\"/assets/style.css\">\
         <script src=\"/assets/app.js\" defer></script></head><body>\
         <header><a class=\"brand\" href=\"/\">Flotilla</a><nav>{}{}{}{}{}{}</nav>\
         <span class=\"live\" id=\"live\" title=\"live updates\">●</span>{who}</header>\
         <main>{body}</main></body></html>\n",
        E(title),
        link(Nav::Overview, "/", "Overview"),
        link(Nav::Clusters, "/clusters", "Clusters"),
        link(Nav::Works, "/works", "Works"),
        link(Nav::Placements, "/placements", "Placements"),
        link(Nav::Rollouts, "/rollouts", "Rollouts"),
        link(Nav::Policies, "/policies", "Policies"),
    )
}

/// A status word as a badge whose class the stylesheet colours (`True` green, …); the
/// class is chosen from a fixed list, never taken from the value.
pub fn badge(status: &str) -> String {
    format!(
        "<span class=\"badge {}\">{}</span>",
        badge_class(status),
        E(status)
    )
}

/// The badge class of a status word.
pub fn badge_class(status: &str) -> &'static str {
    match status {
        "True" | "Available" | "Compliant" | "Applied" | "passed" | "selected" => "ok",
        "False" | "Unavailable" | "NonCompliant" | "Denied" | "failed" | "Degraded" => "bad",
        "Unknown" => "unknown",
        "Pending" | "Paused" | "Progressing" => "pending",
        _ => "neutral",
    }
}

/// A `time` as RFC 3339 (UTC, seconds), or `-` when unset.
pub fn timestamp(t: Option<&prost_types::Timestamp>) -> String {
    t.and_then(|t| time::OffsetDateTime::from_unix_timestamp(t.seconds).ok())
        .and_then(|t| {
            t.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_else(|| "-".into())
}

/// A condition's status as a badge coloured by what it means for that type: `True` is bad for
/// Degraded, …Misconfigured, …Denied, Contested; Progressing is neither good nor bad.
pub fn condition_badge(ty: &str, status: &str) -> String {
    let negative = ["Degraded", "Misconfigured", "Denied", "Contested"]
        .iter()
        .any(|w| ty.contains(w));
    let class = match (negative, status) {
        _ if ty == "Progressing" => "neutral",
        (true, "True") => "bad",
        (true, "False") => "ok",
        _ => badge_class(status),
    };
    format!("<span class=\"badge {class}\">{}</span>", E(status))
}

/// A table of conditions (type, status, reason, message, since).
pub fn conditions(conds: &[flotilla_api::v1::Condition]) -> String {
    if conds.is_empty() {
        return "<p class=\"muted\">No conditions.</p>".into();
    }
    let mut out = String::from(
        "<table class=\"conditions\"><thead><tr><th>Type</th><th>Status</th><th>Reason</th>\
         <th>Message</th><th>Since</th></tr></thead><tbody>",
    );
    for c in conds {
        out.push_str(&format!(
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            E(&c.r#type),
            condition_badge(&c.r#type, &c.status),
            E(&c.reason),
            E(&c.message),
            E(&timestamp(c.last_transition_time.as_ref()))
        ));
    }
    out.push_str("</tbody></table>");
    out
}

/// `key=value` pairs as a definition-like table (sorted).
pub fn pairs<'a>(items: impl IntoIterator<Item = (&'a String, &'a String)>) -> String {
    let mut items: Vec<_> = items.into_iter().collect();
    if items.is_empty() {
        return "<p class=\"muted\">None.</p>".into();
    }
    items.sort();
    let mut out = String::from("<table class=\"pairs\"><tbody>");
    for (k, v) in items {
        out.push_str(&format!("<tr><th>{}</th><td>{}</td></tr>", E(k), E(v)));
    }
    out.push_str("</tbody></table>");
    out
}

/// A system time as RFC 3339 (UTC, seconds).
pub fn system_time(t: std::time::SystemTime) -> String {
    let secs = t
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    timestamp(Some(&prost_types::Timestamp {
        seconds: secs,
        nanos: 0,
    }))
}
