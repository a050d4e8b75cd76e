//! Pictures as inline SVG (no script, no external file): availability over time, a score
//! distribution, progress bars. Only numbers and fixed words reach the markup.

use super::history::{Availability, Sample};
use maud::{Markup, PreEscaped, html};
use std::fmt::Write;

const W: f64 = 640.0;
const H: f64 = 160.0;
const PAD: f64 = 28.0;

/// The colour class of a series (the stylesheet's `.s-…`).
fn series_class(a: Availability) -> &'static str {
    match a {
        Availability::Available => "s-ok",
        Availability::Unavailable => "s-bad",
        Availability::Unknown => "s-unknown",
        Availability::Pending => "s-pending",
        Availability::Denied => "s-neutral",
    }
}

/// Clusters per state over time: one line per state that was ever non-zero.
/// (Only numbers and fixed words: written by hand, and marked pre-escaped here.)
pub fn availability(samples: &[Sample]) -> Markup {
    PreEscaped(availability_svg(samples))
}

/// The markup of [`availability`].
fn availability_svg(samples: &[Sample]) -> String {
    if samples.len() < 2 {
        return "<p class=\"muted\">The plot fills in as the hub runs (a sample every few \
                seconds).</p>"
            .into();
    }
    let max = samples
        .iter()
        .flat_map(|s| s.counts.0)
        .max()
        .unwrap_or(0)
        .max(1) as f64;
    let n = samples.len() as f64 - 1.0;
    let x = |i: usize| PAD + (W - 2.0 * PAD) * i as f64 / n;
    let y = |v: usize| H - PAD - (H - 2.0 * PAD) * v as f64 / max;
    let mut svg = format!(
        "<svg class=\"plot\" viewBox=\"0 0 {W} {H}\" role=\"img\" \
         aria-label=\"clusters by availability over time\">\
         <line class=\"axis\" x1=\"{PAD}\" y1=\"{}\" x2=\"{}\" y2=\"{}\"/>\
         <text x=\"2\" y=\"{}\" class=\"tick\">{}</text><text x=\"2\" y=\"{}\" class=\"tick\">0</text>",
        H - PAD,
        W - PAD,
        H - PAD,
        PAD + 4.0,
        max as usize,
        H - PAD + 4.0
    );
    for a in Availability::ALL {
        if samples.iter().all(|s| s.counts.get(a) == 0) {
            continue;
        }
        let points: Vec<String> = samples
            .iter()
            .enumerate()
            .map(|(i, s)| format!("{:.1},{:.1}", x(i), y(s.counts.get(a))))
            .collect();
        let _ = write!(
            svg,
            "<polyline class=\"{}\" fill=\"none\" points=\"{}\"><title>{}</title></polyline>",
            series_class(a),
            points.join(" "),
            a.as_str()
        );
    }
    let span = samples
        .last()
        .zip(samples.first())
        .and_then(|(l, f)| l.at.duration_since(f.at).ok())
        .map_or(0, |d| d.as_secs());
    let _ = write!(
        svg,
        "<text x=\"{}\" y=\"{}\" class=\"tick\" text-anchor=\"end\">last {}</text></svg>",
        W - PAD,
        H - 6.0,
        span_text(span)
    );
    let mut legend = String::from("<p class=\"legend\">");
    for a in Availability::ALL {
        let _ = write!(
            legend,
            "<span class=\"{}\">■</span> {} ",
            series_class(a),
            a.as_str()
        );
    }
    legend.push_str("</p>");
    svg + &legend
}

fn span_text(secs: u64) -> String {
    if secs >= 3600 {
        format!("{}h{:02}m", secs / 3600, secs % 3600 / 60)
    } else if secs >= 60 {
        format!("{}m{:02}s", secs / 60, secs % 60)
    } else {
        format!("{secs}s")
    }
}

/// A histogram of `values` in at most `bins` equal bins.
/// (Only numbers and fixed words: written by hand, and marked pre-escaped here.)
pub fn histogram(values: &[i64], bins: usize) -> Markup {
    PreEscaped(histogram_svg(values, bins))
}

/// The markup of [`histogram`].
fn histogram_svg(values: &[i64], bins: usize) -> String {
    let (Some(&lo), Some(&hi)) = (values.iter().min(), values.iter().max()) else {
        return "<p class=\"muted\">No scores.</p>".into();
    };
    let bins = bins.max(1);
    let width = ((hi - lo) as f64 / bins as f64).max(1.0);
    let mut counts = vec![0usize; bins];
    for v in values {
        let i = (((v - lo) as f64) / width) as usize;
        counts[i.min(bins - 1)] += 1;
    }
    let max = counts.iter().copied().max().unwrap_or(1).max(1) as f64;
    let bar = (W - 2.0 * PAD) / bins as f64;
    let mut svg = format!(
        "<svg class=\"plot\" viewBox=\"0 0 {W} {H}\" role=\"img\" aria-label=\"score distribution\">"
    );
    for (i, c) in counts.iter().enumerate() {
        let h = (H - 2.0 * PAD) * *c as f64 / max;
        let from = lo as f64 + width * i as f64;
        let _ = write!(
            svg,
            "<rect class=\"bar\" x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\">\
             <title>{:.0}–{:.0}: {c}</title></rect>",
            PAD + bar * i as f64 + 1.0,
            H - PAD - h,
            (bar - 2.0).max(1.0),
            h,
            from,
            from + width
        );
    }
    let _ = write!(
        svg,
        "<text x=\"{PAD}\" y=\"{}\" class=\"tick\">{lo}</text>\
         <text x=\"{}\" y=\"{}\" class=\"tick\" text-anchor=\"end\">{hi}</text></svg>",
        H - 8.0,
        W - PAD,
        H - 8.0
    );
    svg
}

/// A progress bar: `done` of `total`, with `bad` in the failure colour.
/// (Only numbers and fixed words: written by hand, and marked pre-escaped here.)
pub fn progress(done: i64, bad: i64, total: i64) -> Markup {
    PreEscaped(progress_svg(done, bad, total))
}

/// The markup of [`progress`].
fn progress_svg(done: i64, bad: i64, total: i64) -> String {
    let total = total.max(0);
    let pct = |v: i64| {
        if total == 0 {
            0.0
        } else {
            100.0 * v.clamp(0, total) as f64 / total as f64
        }
    };
    format!(
        "<span class=\"progress\" title=\"{done} of {total}\"><span class=\"done\" \
         style=\"width:{:.1}%\"></span><span class=\"failed\" style=\"width:{:.1}%\"></span>\
         </span> {done}/{total}",
        pct(done),
        pct(bad)
    )
}

/// One bar of [`groups`]: a decision group's label and its (done, failed, total).
pub struct GroupBar<'a> {
    /// What the bar is labelled with (the group's index and name).
    pub label: &'a str,
    /// Clusters done.
    pub done: i64,
    /// Clusters failed.
    pub failed: i64,
    /// Clusters in the group.
    pub total: i64,
}

/// A rollout's decision groups as horizontal bars, each as long as the group is large (the
/// largest group spans the plot), filled by what is done and what failed. The groups' names
/// come from the fleet, so this picture is written with maud (escaped), not by hand.
pub fn groups(bars: &[GroupBar<'_>]) -> Markup {
    if bars.is_empty() {
        return html! {};
    }
    const ROW: f64 = 22.0;
    const LABEL: f64 = 150.0;
    let h = ROW * bars.len() as f64 + 8.0;
    let max = bars.iter().map(|b| b.total).max().unwrap_or(1).max(1) as f64;
    let span = W - LABEL - 90.0;
    let f = |v: f64| format!("{v:.1}");
    html! {
        svg class="plot groups-plot" viewBox={ "0 0 " (W) " " (h) } role="img"
            aria-label="progress per decision group" {
            @for (i, b) in bars.iter().enumerate() {
                @let y = 4.0 + ROW * i as f64;
                @let len = |v: i64| span * v.clamp(0, b.total.max(0)) as f64 / max;
                g class="group-bar" data-done=(b.done) data-total=(b.total) {
                    title { (b.done) "/" (b.total) " done, " (b.failed) " failed" }
                    rect class="track" x=(LABEL) y=(f(y)) width=(f(len(b.total).max(1.0))) height=(f(ROW - 6.0)) {}
                    rect class="bar" x=(LABEL) y=(f(y)) width=(f(len(b.done))) height=(f(ROW - 6.0)) {}
                    rect class="bar-bad" x=(f(LABEL + len(b.done))) y=(f(y)) width=(f(len(b.failed))) height=(f(ROW - 6.0)) {}
                    text class="tick" x=(f(LABEL - 6.0)) y=(f(y + ROW - 10.0)) text-anchor="end" { (b.label) }
                    text class="tick" x=(f(LABEL + len(b.total) + 6.0)) y=(f(y + ROW - 10.0)) { (b.done) "/" (b.total) }
                }
            }
        }
    }
}

/// A rollout's progress over time: the share of its clusters done (and failed) at each point
/// the dashboard saw, drawn as steps (the value holds until the next change).
/// (Only numbers and fixed words: written by hand, and marked pre-escaped here.)
pub fn over_time(points: &[super::progress::Point]) -> Markup {
    PreEscaped(over_time_svg(points))
}

/// The markup of [`over_time`].
fn over_time_svg(points: &[super::progress::Point]) -> String {
    let Some(first) = points.first() else {
        return "<p class=\"muted\">No progress seen yet.</p>".into();
    };
    let last_at = points.last().map_or(first.at, |p| p.at);
    let now = std::time::SystemTime::now().max(last_at);
    let span = now
        .duration_since(first.at)
        .map_or(0.0, |d| d.as_secs_f64())
        .max(1.0);
    let x = |at: std::time::SystemTime| {
        PAD + (W - 2.0 * PAD) * at.duration_since(first.at).map_or(0.0, |d| d.as_secs_f64()) / span
    };
    let y = |v: i64, total: i64| {
        let share = if total <= 0 {
            0.0
        } else {
            v.clamp(0, total) as f64 / total as f64
        };
        H - PAD - (H - 2.0 * PAD) * share
    };
    let line = |pick: fn(&super::progress::Point) -> i64| {
        let mut pts = Vec::with_capacity(points.len() * 2 + 1);
        for (i, p) in points.iter().enumerate() {
            if i > 0 {
                let prev = &points[i - 1];
                pts.push(format!("{:.1},{:.1}", x(p.at), y(pick(prev), prev.total)));
            }
            pts.push(format!("{:.1},{:.1}", x(p.at), y(pick(p), p.total)));
        }
        let end = points.last().unwrap_or(first);
        pts.push(format!("{:.1},{:.1}", x(now), y(pick(end), end.total)));
        pts.join(" ")
    };
    let mut svg = format!(
        "<svg class=\"plot\" id=\"progress-over-time\" viewBox=\"0 0 {W} {H}\" role=\"img\" \
         aria-label=\"rollout progress over time\">\
         <line class=\"axis\" x1=\"{PAD}\" y1=\"{}\" x2=\"{}\" y2=\"{}\"/>\
         <text x=\"2\" y=\"{}\" class=\"tick\">100%</text><text x=\"2\" y=\"{}\" class=\"tick\">0</text>",
        H - PAD,
        W - PAD,
        H - PAD,
        PAD + 4.0,
        H - PAD + 4.0
    );
    let _ = write!(
        svg,
        "<polyline class=\"s-ok\" fill=\"none\" points=\"{}\"><title>done</title></polyline>",
        line(|p| p.done)
    );
    if points.iter().any(|p| p.failed > 0) {
        let _ = write!(
            svg,
            "<polyline class=\"s-bad\" fill=\"none\" points=\"{}\"><title>failed</title></polyline>",
            line(|p| p.failed)
        );
    }
    let _ = write!(
        svg,
        "<text x=\"{}\" y=\"{}\" class=\"tick\" text-anchor=\"end\">last {} · {} changes seen</text></svg>",
        W - PAD,
        H - 6.0,
        span_text(span as u64),
        points.len()
    );
    svg
}
