//! What the families' flags share: their value parsers (pure).

/// A rate per second: a finite number above 0, at most 1,000,000 (a clap value parser; the
/// text is the flag's error).
pub fn positive_rate(s: &str) -> Result<f64, String> {
    let rate: f64 = s.parse().map_err(|e| format!("{s:?}: {e}"))?;
    if rate.is_finite() && rate > 0.0 && rate <= 1e6 {
        Ok(rate)
    } else {
        Err(format!(
            "{s:?}: a rate above 0 and at most 1000000 per second"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::positive_rate;

    #[test]
    fn a_rate_is_a_finite_number_above_0_and_at_most_a_million() {
        assert_eq!(positive_rate("2.5"), Ok(2.5));
        assert_eq!(positive_rate("1000000"), Ok(1e6));
        for bad in ["0", "-1", "1000001", "inf", "NaN"] {
            let e = positive_rate(bad).unwrap_err();
            assert!(
                e.contains("a rate above 0 and at most 1000000"),
                "{bad}: {e}"
            );
        }
        assert!(positive_rate("fast").unwrap_err().starts_with("\"fast\": "));
    }
}
