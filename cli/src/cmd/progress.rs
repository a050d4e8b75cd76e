//! What `rollout status` and `addon status` share: progress bars, and following a rollout —
//! print once (for scripts), or with `--watch` redraw until it is over.

use anyhow::{Result, bail};
use flotilla_api::v1::DecisionGroupSummary;
use std::future::Future;
use std::time::Duration;

/// Width of a bar between its brackets.
const WIDTH: usize = 30;
/// Width of the label column before a bar.
pub const LABEL: usize = 20;
/// How often `--watch` looks again.
const POLL: Duration = Duration::from_secs(1);

/// `[#########.....................]`: `done` of `total` filled (full when `total` is 0).
pub fn bar(done: i32, total: i32) -> String {
    let filled = if total > 0 {
        ((done.clamp(0, total) as usize) * WIDTH) / total as usize
    } else {
        WIDTH
    };
    format!("[{}{}]", "#".repeat(filled), ".".repeat(WIDTH - filled))
}

/// `label [bar] done/total`, the label padded to [`LABEL`].
pub fn labelled_bar(label: &str, done: i32, total: i32) -> String {
    format!("{label:<LABEL$} {} {done}/{total}", bar(done, total))
}

/// A bar per decision group, indented under its placement's bar — none for a single group,
/// which the placement's bar already shows.
pub fn group_bars(groups: &[DecisionGroupSummary]) -> String {
    if groups.len() < 2 {
        return String::new();
    }
    let mut out = String::new();
    for g in groups {
        let label = if g.name.is_empty() {
            format!("  group {}", g.index)
        } else {
            format!("  group {} ({})", g.index, g.name)
        };
        out.push_str(&labelled_bar(&label, g.available, g.total));
        out.push('\n');
    }
    out
}

/// Where a followed rollout is after one look.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Not over: `--watch` looks again.
    Wait,
    /// Over, and it succeeded.
    Done,
    /// Over, and it failed: the command fails with this message.
    Failed(String),
}

/// Prints what `look` renders; with `watch`, looks again every second, redrawing in place on a
/// terminal (plain lines otherwise) when the text changed, until the rollout is over. Fails when
/// the rollout failed, or when a look fails.
pub async fn follow<F, Fut>(watch: bool, mut look: F) -> Result<()>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<(String, Step)>>,
{
    let mut last = String::new();
    loop {
        let (text, step) = look().await?;
        if text != last {
            if watch && !last.is_empty() && std::io::IsTerminal::is_terminal(&std::io::stdout()) {
                let lines = last.lines().count();
                print!("\x1b[{lines}A\x1b[J");
            }
            print!("{text}");
            last = text;
        }
        match step {
            Step::Failed(why) => bail!("{why}"),
            Step::Done => return Ok(()),
            Step::Wait if !watch => return Ok(()),
            Step::Wait => tokio::time::sleep(POLL).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bar_fills_in_proportion_and_an_empty_total_is_full() {
        assert_eq!(bar(0, 3), format!("[{}]", ".".repeat(WIDTH)));
        assert_eq!(bar(1, 3), format!("[{}{}]", "#".repeat(10), ".".repeat(20)));
        assert_eq!(bar(3, 3), format!("[{}]", "#".repeat(WIDTH)));
        assert_eq!(bar(0, 0), format!("[{}]", "#".repeat(WIDTH)));
        // Out of range counts never overflow the bar.
        assert_eq!(bar(5, 3), bar(3, 3));
        assert_eq!(bar(-1, 3), bar(0, 3));
    }

    #[test]
    fn a_labelled_bar_pads_its_label() {
        let line = labelled_bar("  group 0", 1, 2);
        assert!(line.starts_with("  group 0            ["), "{line}");
        assert!(line.ends_with("] 1/2"), "{line}");
    }

    #[test]
    fn groups_get_a_bar_each_only_when_there_are_several() {
        let group = |index, name: &str| DecisionGroupSummary {
            index,
            name: name.into(),
            total: 2,
            available: 1,
        };
        assert_eq!(group_bars(&[group(0, "")]), "");
        let text = group_bars(&[group(0, "canary"), group(1, "")]);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert!(lines[0].starts_with("  group 0 (canary)"), "{text}");
        assert!(
            lines[1].starts_with("  group 1 ") && lines[1].ends_with("1/2"),
            "{text}"
        );
    }
}
