//! PNG plots of a run (`--out DIR`): the latency CDF, convergence over time and the hub's RSS
//! over time, drawn with `plotters`. Text needs a TrueType font: the first of the usual system
//! paths found (DejaVu Sans on Debian), or `FLOTILLA_PLOT_FONT`.

use crate::report::Sample;
use anyhow::{Context, Result};
use plotters::prelude::*;
use std::path::Path;
use std::sync::Once;

const FONTS: [&str; 3] = [
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
];

fn register_font() -> Result<()> {
    static ONCE: Once = Once::new();
    let path = std::env::var("FLOTILLA_PLOT_FONT").ok().or_else(|| {
        FONTS
            .iter()
            .find(|p| Path::new(p).is_file())
            .map(|p| (*p).to_string())
    });
    let path = path.context(
        "no TrueType font for the plots: install fonts-dejavu-core or set FLOTILLA_PLOT_FONT",
    )?;
    let bytes = std::fs::read(&path).with_context(|| format!("reading {path}"))?;
    let mut result = Ok(());
    ONCE.call_once(|| {
        let leaked: &'static [u8] = Box::leak(bytes.into_boxed_slice());
        if plotters::style::register_font("sans-serif", FontStyle::Normal, leaked).is_err() {
            result = Err(anyhow::anyhow!("{path} is not a usable TrueType font"));
        }
    });
    result
}

/// Writes `<scenario>-latency-cdf.png`, `<scenario>-convergence.png` and
/// `<scenario>-hub-rss.png` into `out` (nothing without `out`). Returns the files written.
pub fn write(
    out: Option<&Path>,
    scenario: &str,
    latencies_ms: &[f64],
    samples: &[Sample],
) -> Result<Vec<String>> {
    let Some(out) = out else {
        return Ok(Vec::new());
    };
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    register_font()?;
    let cdf: Vec<(f64, f64)> = latencies_ms
        .iter()
        .enumerate()
        .map(|(i, ms)| (ms / 1000.0, (i + 1) as f64 / latencies_ms.len() as f64))
        .collect();
    let converged: Vec<(f64, f64)> = samples.iter().map(|s| (s.t, s.converged as f64)).collect();
    let rss: Vec<(f64, f64)> = samples
        .iter()
        .map(|s| (s.t, s.hub_rss_bytes as f64 / 1_048_576.0))
        .collect();
    let files = [
        (
            format!("{scenario}-latency-cdf.png"),
            "latency CDF",
            "seconds",
            "share of clusters",
            cdf,
        ),
        (
            format!("{scenario}-convergence.png"),
            "clusters converged",
            "seconds",
            "clusters",
            converged,
        ),
        (
            format!("{scenario}-hub-rss.png"),
            "hub RSS",
            "seconds",
            "MiB",
            rss,
        ),
    ];
    let mut written = Vec::new();
    for (file, title, x, y, points) in files {
        let path = out.join(&file);
        line_chart(&path, &format!("{scenario}: {title}"), x, y, &points)
            .with_context(|| format!("drawing {}", path.display()))?;
        written.push(path.display().to_string());
    }
    Ok(written)
}

fn line_chart(path: &Path, title: &str, x: &str, y: &str, points: &[(f64, f64)]) -> Result<()> {
    let root = BitMapBackend::new(path, (900, 540)).into_drawing_area();
    root.fill(&WHITE)?;
    let x_max = points.iter().map(|p| p.0).fold(0.0, f64::max).max(1e-3) * 1.05;
    let y_max = points.iter().map(|p| p.1).fold(0.0, f64::max).max(1e-3) * 1.05;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 24))
        .margin(16)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..x_max, 0.0..y_max)?;
    chart
        .configure_mesh()
        .x_desc(x)
        .y_desc(y)
        .label_style(("sans-serif", 14))
        .draw()?;
    chart.draw_series(LineSeries::new(points.iter().copied(), &BLUE))?;
    root.present()?;
    Ok(())
}
