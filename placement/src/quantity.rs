//! Kubernetes resource quantities (`"4"`, `"500m"`, `"16Gi"`, `"1.5G"`, `"2e3"`) as `f64`.
//!
//! Cluster allocatable arrives as quantity strings; the resource prioritizers only need an
//! approximate float, as OCM's `AsApproximateFloat64`.
//!
//! Grammar (from `k8s.io/apimachinery/pkg/api/resource`):
//! `[+-]<digits>[.<digits>]` followed by nothing, a binary suffix (`Ki Mi Gi Ti Pi Ei`), a
//! decimal suffix (`n u m k M G T P E`) or an exponent (`e3`, `E-2`).

/// Why a quantity string could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    /// The string is empty (or blank).
    #[error("empty quantity")]
    Empty,
    /// The numeric part is missing or malformed.
    #[error("quantity {0:?}: expected a number like 4, 0.5 or 1.5 before the unit")]
    Number(String),
    /// The part after the number is not a known unit.
    #[error(
        "quantity {quantity:?}: unknown unit {suffix:?} (want Ki Mi Gi Ti Pi Ei, n u m k M G T P E, or an exponent like e3)"
    )]
    Suffix {
        /// The whole input.
        quantity: String,
        /// The unrecognised tail.
        suffix: String,
    },
    /// The value does not fit an `f64` (infinite).
    #[error("quantity {0:?} is out of range")]
    Range(String),
}

/// Parses a Kubernetes quantity into its value in base units (cores, bytes, …).
///
/// ```
/// use flotilla_placement::parse_quantity;
/// assert_eq!(parse_quantity("500m").unwrap(), 0.5);
/// assert_eq!(parse_quantity("16Gi").unwrap(), 16.0 * 1024.0 * 1024.0 * 1024.0);
/// assert_eq!(parse_quantity("2e3").unwrap(), 2000.0);
/// ```
pub fn parse_quantity(input: &str) -> Result<f64, QuantityError> {
    let s = input.trim();
    if s.is_empty() {
        return Err(QuantityError::Empty);
    }
    let bytes = s.as_bytes();
    let mut i = 0;
    if matches!(bytes[0], b'+' | b'-') {
        i = 1;
    }
    let digits_start = i;
    let mut seen_digit = false;
    let mut seen_dot = false;
    while i < bytes.len() {
        match bytes[i] {
            b'0'..=b'9' => seen_digit = true,
            b'.' if !seen_dot => seen_dot = true,
            _ => break,
        }
        i += 1;
    }
    if !seen_digit {
        return Err(QuantityError::Number(input.to_owned()));
    }
    let number: f64 = s[..i]
        .parse()
        .map_err(|_| QuantityError::Number(input.to_owned()))?;
    debug_assert!(digits_start <= i);
    let suffix = &s[i..];
    let multiplier = match suffix {
        "" => 1.0,
        "Ki" => 1024f64,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        "n" => 1e-9,
        "u" => 1e-6,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        _ => exponent(suffix).ok_or_else(|| QuantityError::Suffix {
            quantity: input.to_owned(),
            suffix: suffix.to_owned(),
        })?,
    };
    let value = number * multiplier;
    if value.is_finite() {
        Ok(value)
    } else {
        Err(QuantityError::Range(input.to_owned()))
    }
}

/// `e3`, `E-2`, `e+10` → the power of ten; `None` for anything else.
fn exponent(suffix: &str) -> Option<f64> {
    let rest = suffix.strip_prefix(['e', 'E'])?;
    let digits = rest.strip_prefix(['+', '-']).unwrap_or(rest);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let exp: i32 = rest.parse().ok()?;
    Some(10f64.powi(exp))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_and_fractional_numbers() {
        assert_eq!(parse_quantity("4").unwrap(), 4.0);
        assert_eq!(parse_quantity("0.5").unwrap(), 0.5);
        assert_eq!(parse_quantity(".5").unwrap(), 0.5);
        assert_eq!(parse_quantity("+3").unwrap(), 3.0);
        assert_eq!(parse_quantity("-3").unwrap(), -3.0);
    }

    #[test]
    fn milli_cores() {
        assert_eq!(parse_quantity("500m").unwrap(), 0.5);
        assert_eq!(parse_quantity("1500m").unwrap(), 1.5);
    }

    #[test]
    fn binary_suffixes_are_powers_of_1024() {
        assert_eq!(parse_quantity("1024Ki").unwrap(), 1024.0 * 1024.0);
        assert_eq!(parse_quantity("16Gi").unwrap(), 16.0 * 1073741824.0);
        assert_eq!(parse_quantity("1Ei").unwrap(), 1024f64.powi(6));
    }

    #[test]
    fn decimal_suffixes_are_powers_of_1000() {
        assert_eq!(parse_quantity("1.5G").unwrap(), 1.5e9);
        assert_eq!(parse_quantity("2k").unwrap(), 2000.0);
        assert_eq!(parse_quantity("1E").unwrap(), 1e18);
        assert!((parse_quantity("3u").unwrap() - 3e-6).abs() < 1e-18);
    }

    #[test]
    fn exponent_form() {
        assert_eq!(parse_quantity("2e3").unwrap(), 2000.0);
        assert_eq!(parse_quantity("2E3").unwrap(), 2000.0);
        assert_eq!(parse_quantity("25e-2").unwrap(), 0.25);
        assert_eq!(parse_quantity("1e+2").unwrap(), 100.0);
    }

    #[test]
    fn errors_are_typed() {
        assert_eq!(parse_quantity(""), Err(QuantityError::Empty));
        assert!(matches!(
            parse_quantity("Gi"),
            Err(QuantityError::Number(_))
        ));
        assert!(matches!(
            parse_quantity("1.2.3"),
            Err(QuantityError::Suffix { .. })
        ));
        assert!(matches!(
            parse_quantity("4 cores"),
            Err(QuantityError::Suffix { .. })
        ));
        assert!(matches!(
            parse_quantity("1gi"),
            Err(QuantityError::Suffix { .. })
        ));
        assert!(matches!(
            parse_quantity("1e"),
            Err(QuantityError::Suffix { .. })
        ));
        assert!(matches!(
            parse_quantity("1e999"),
            Err(QuantityError::Range(_))
        ));
    }

    #[test]
    fn error_message_names_the_input_and_the_fix() {
        let e = parse_quantity("4 cores").unwrap_err().to_string();
        assert!(e.contains("\"4 cores\"") && e.contains("Ki Mi Gi"), "{e}");
    }
}
