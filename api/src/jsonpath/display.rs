//! The canonical form of a [`JsonPath`]: what its `Display` prints.

use std::fmt::{self, Write as _};

use super::parser::is_plain;
use super::{CmpOp, JsonPath, Literal, Segment, Selector};

impl fmt::Display for JsonPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.segments.is_empty() {
            return f.write_str("$");
        }
        write_segments(f, &self.segments)
    }
}

fn write_segments(f: &mut fmt::Formatter<'_>, segments: &[Segment]) -> fmt::Result {
    for segment in segments {
        match segment {
            Segment::Child(Selector::Name(name)) if is_plain_name(name) => {
                f.write_char('.')?;
                f.write_str(name)?;
            }
            Segment::Child(selector) => write_bracket(f, selector)?,
            Segment::Descendant(selector) => {
                f.write_str("..")?;
                match selector {
                    Selector::Name(name) if is_plain_name(name) => f.write_str(name)?,
                    Selector::Wildcard => f.write_char('*')?,
                    other => write_bracket(f, other)?,
                }
            }
        }
    }
    Ok(())
}

fn is_plain_name(name: &str) -> bool {
    !name.is_empty() && name.chars().all(is_plain)
}

fn write_bracket(f: &mut fmt::Formatter<'_>, selector: &Selector) -> fmt::Result {
    match selector {
        Selector::Name(name) => {
            f.write_char('[')?;
            write_quoted(f, name, '\'')?;
            f.write_char(']')
        }
        Selector::Wildcard => f.write_str("[*]"),
        Selector::Index(i) => write!(f, "[{i}]"),
        Selector::Slice { start, end, step } => {
            f.write_char('[')?;
            if let Some(start) = start {
                write!(f, "{start}")?;
            }
            f.write_char(':')?;
            if let Some(end) = end {
                write!(f, "{end}")?;
            }
            if *step != 1 {
                write!(f, ":{step}")?;
            }
            f.write_char(']')
        }
        Selector::Filter(filter) => {
            f.write_str("[?(@")?;
            write_segments(f, &filter.path)?;
            if let Some((op, literal)) = &filter.test {
                f.write_str(match op {
                    CmpOp::Eq => "==",
                    CmpOp::Ne => "!=",
                    CmpOp::Lt => "<",
                    CmpOp::Le => "<=",
                    CmpOp::Gt => ">",
                    CmpOp::Ge => ">=",
                })?;
                match literal {
                    Literal::String(s) => write_quoted(f, s, '"')?,
                    Literal::Number(n) => write!(f, "{n}")?,
                    Literal::Bool(b) => write!(f, "{b}")?,
                }
            }
            f.write_str(")]")
        }
    }
}

fn write_quoted(f: &mut fmt::Formatter<'_>, s: &str, quote: char) -> fmt::Result {
    f.write_char(quote)?;
    for c in s.chars() {
        if c == quote || c == '\\' {
            f.write_char('\\')?;
        }
        f.write_char(c)?;
    }
    f.write_char(quote)
}
