//! HTML building blocks (pure): the page frame every view shares and the small components
//! views repeat (badges, condition tables, `key=value` tables). Pages are written with
//! [`maud`]: every `(value)` spliced into a page is escaped at compile-time-generated call
//! sites, so a value from the fleet (cluster names, labels and messages come from spokes —
//! hostile until proven otherwise) cannot be written unescaped by accident. `PreEscaped`
//! appears only for markup this crate builds itself (the SVG plots).

use maud::{DOCTYPE, Markup, html};
use std::fmt;

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
    /// `/gitrepos`.
    GitRepos,
    /// None highlighted (login, errors).
    None,
}

/// The navigation bar's links, in order.
const NAV: [(Nav, &str, &str); 7] = [
    (Nav::Overview, "/", "Overview"),
    (Nav::Clusters, "/clusters", "Clusters"),
    (Nav::Works, "/works", "Works"),
    (Nav::Placements, "/placements", "Placements"),
    (Nav::Rollouts, "/rollouts", "Rollouts"),
    (Nav::Policies, "/policies", "Policies"),
    (Nav::GitRepos, "/gitrepos", "Git"),
];

/// Who is looking, as the frame shows it.
pub struct Frame<'a> {
    /// The identity's name and role (`None`: not signed in).
    pub who: Option<(&'a str, &'a str)>,
    /// The CSRF token of the sign-out form.
    pub csrf: &'a str,
    /// Whether the viewer signed in with a session (and can sign out).
    pub session: bool,
    /// What every page says on top while it is so (a recovery window is open).
    pub banner: Option<&'a str>,
}

/// The frame's viewer: name, role, and the sign-out form of a session.
fn who(frame: &Frame<'_>) -> Markup {
    html! {
        @if let Some((name, role)) = frame.who {
            span class="who" id="who" { (name) " (" (role) ")" }
            @if frame.session {
                form method="post" action="/logout" class="inline" {
                    input type="hidden" name="csrf" value=(frame.csrf);
                    button type="submit" { "Sign out" }
                }
            }
        }
    }
}

/// A whole page: the frame around `body`, with the live feed's script.
pub fn page(title: &str, nav: Nav, frame: &Frame<'_>, body: Markup) -> Markup {
    html! {
        (DOCTYPE) "\n"
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · Flotilla" }
                link rel="stylesheet" href="/assets/style.css";
                script src="/assets/app.js" defer {}
            }
            body {
                header {
                    a class="brand" href="/" { "Flotilla" }
                    nav {
                        @for (n, href, label) in NAV {
                            a href=(href) class=[(n == nav).then_some("active")] { (label) }
                        }
                    }
                    span class="live" id="live" title="live updates" { "●" }
                    (who(frame))
                }
                @if let Some(banner) = frame.banner {
                    div class="banner" id="banner" role="alert" { (banner) }
                }
                main { (body) }
            }
        }
        "\n"
    }
}

/// A status word as a badge whose class the stylesheet colours (`True` green, …); the
/// class is chosen from a fixed list, never taken from the value.
pub fn badge(status: &str) -> Markup {
    html! { span class={ "badge " (badge_class(status)) } { (status) } }
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
pub fn condition_badge(ty: &str, status: &str) -> Markup {
    let negative = ["Degraded", "Misconfigured", "Denied", "Contested"]
        .iter()
        .any(|w| ty.contains(w));
    let class = match (negative, status) {
        _ if ty == "Progressing" => "neutral",
        (true, "True") => "bad",
        (true, "False") => "ok",
        _ => badge_class(status),
    };
    html! { span class={ "badge " (class) } { (status) } }
}

/// A table of conditions (type, status, reason, message, since).
pub fn conditions(conds: &[flotilla_api::v1::Condition]) -> Markup {
    html! {
        @if conds.is_empty() {
            p.muted { "No conditions." }
        } @else {
            table.conditions {
                thead { tr { th { "Type" } th { "Status" } th { "Reason" } th { "Message" } th { "Since" } } }
                tbody {
                    @for c in conds {
                        tr {
                            td { (c.r#type) }
                            td { (condition_badge(&c.r#type, &c.status)) }
                            td { (c.reason) }
                            td { (c.message) }
                            td { (timestamp(c.last_transition_time.as_ref())) }
                        }
                    }
                }
            }
        }
    }
}

/// `key=value` pairs as a definition-like table (sorted).
pub fn pairs<'a>(items: impl IntoIterator<Item = (&'a String, &'a String)>) -> Markup {
    let mut items: Vec<_> = items.into_iter().collect();
    items.sort();
    html! {
        @if items.is_empty() {
            p.muted { "None." }
        } @else {
            table.pairs { tbody { @for (k, v) in items { tr { th { (k) } td { (v) } } } } }
        }
    }
}

/// "None." in the muted style: what an empty section says.
pub fn none() -> Markup {
    html! { p.muted { "None." } }
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
