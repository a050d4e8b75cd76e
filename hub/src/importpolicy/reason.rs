//! Why something failed, as the import policies keep it for a status (pure): a message cut to
//! [`MAX_ERROR_LEN`] bytes.

use std::fmt;

/// An error kept for a status is at most this long.
pub const MAX_ERROR_LEN: usize = 300;

/// Why something failed, as the hub keeps it for a status: the message, cut to
/// [`MAX_ERROR_LEN`] bytes (errors print values a spoke chooses, and lists and verdicts are
/// kept between polls). The cause's type is gone by design: only its text is shown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reason(String);

impl Reason {
    /// The message of `e`, cut.
    pub fn new(e: impl fmt::Display) -> Self {
        Self(cut(e.to_string()))
    }

    /// `s` whole, past the bound: for tests of what holds reasons (list weights).
    #[cfg(test)]
    pub(crate) fn uncut(s: String) -> Self {
        Self(s)
    }
}

impl std::ops::Deref for Reason {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Reason {}

impl From<&str> for Reason {
    fn from(s: &str) -> Self {
        Self(cut(s.to_string()))
    }
}

impl From<String> for Reason {
    fn from(s: String) -> Self {
        Self(cut(s))
    }
}

/// An error cut to [`MAX_ERROR_LEN`] bytes (on a character boundary).
pub fn cut(mut s: String) -> String {
    if s.len() > MAX_ERROR_LEN {
        let mut end = MAX_ERROR_LEN;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
        s.push('…');
    }
    s
}
