//! Parsing the kubectl JSONPath dialect into a [`JsonPath`].

use serde_json::Number;

use super::{
    CmpOp, Filter, JsonPath, JsonPathError, JsonPathErrorKind, Literal, MAX_FILTER_DEPTH,
    MAX_STEPS, Result, Segment, Selector,
};

/// Parses a kubectl-style JSONPath (see the [module docs](super) for the syntax).
///
/// Surrounding whitespace, one pair of surrounding `{` `}` and a leading `$` are accepted and
/// dropped. Errors carry the 1-based character position of the problem.
pub fn parse(path: &str) -> Result<JsonPath> {
    let mut p = Parser { src: path, pos: 0 };
    p.skip_ws();
    let brace = (p.peek() == Some('{')).then_some(p.pos);
    if brace.is_some() {
        p.bump();
        p.skip_ws();
    }
    let rooted = p.eat('$') || p.eat('@');
    if !rooted && matches!(p.peek(), None | Some('}')) {
        if let (Some(open), None) = (brace, p.peek()) {
            return Err(p.err_at(open, JsonPathErrorKind::UnclosedBrace));
        }
        return Err(p.err_at(p.pos, JsonPathErrorKind::Empty));
    }
    let segments = p.segments(0)?;
    p.skip_ws();
    if let Some(open) = brace {
        match p.peek() {
            Some('}') => {
                p.bump();
                p.skip_ws();
            }
            None => return Err(p.err_at(open, JsonPathErrorKind::UnclosedBrace)),
            Some(_) => return Err(p.unexpected("'.', '[' or '}'")),
        }
    }
    if p.peek().is_some() {
        return Err(p.unexpected("'.', '[' or the end of the path"));
    }
    Ok(JsonPath { segments })
}

struct Parser<'s> {
    src: &'s str,
    /// Byte offset of the next character.
    pos: usize,
}

/// Characters allowed in a member name written in dot form without a `\` escape.
pub(super) fn is_plain(c: char) -> bool {
    !c.is_whitespace()
        && !c.is_control()
        && !matches!(
            c,
            '.' | '['
                | ']'
                | '('
                | ')'
                | '{'
                | '}'
                | ','
                | '$'
                | '@'
                | '='
                | '!'
                | '<'
                | '>'
                | '\''
                | '"'
                | '*'
                | '\\'
        )
}

fn is_operator_char(c: char) -> bool {
    matches!(c, '=' | '!' | '<' | '>')
}

impl<'s> Parser<'s> {
    fn peek(&self) -> Option<char> {
        self.src[self.pos..].chars().next()
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.pos += c.len_utf8();
        Some(c)
    }

    fn eat(&mut self, c: char) -> bool {
        let found = self.peek() == Some(c);
        if found {
            self.pos += c.len_utf8();
        }
        found
    }

    fn skip_ws(&mut self) {
        while self.peek().is_some_and(char::is_whitespace) {
            self.bump();
        }
    }

    fn err_at(&self, byte: usize, kind: JsonPathErrorKind) -> JsonPathError {
        JsonPathError {
            path: self.src.to_owned(),
            position: self.src[..byte].chars().count() + 1,
            kind,
        }
    }

    /// Error for whatever is at the current position when `expected` was wanted.
    fn unexpected(&self, expected: &'static str) -> JsonPathError {
        let kind = match self.peek() {
            Some(found) => JsonPathErrorKind::UnexpectedChar { found, expected },
            None => JsonPathErrorKind::UnexpectedEnd { expected },
        };
        self.err_at(self.pos, kind)
    }

    /// Steps until something that cannot start one; `depth` counts enclosing filters.
    fn segments(&mut self, depth: usize) -> Result<Vec<Segment>> {
        let mut out = Vec::new();
        loop {
            let start = self.pos;
            let segment = match self.peek() {
                Some('.') => {
                    self.bump();
                    if self.eat('.') {
                        Segment::Descendant(self.descendant_selector(depth)?)
                    } else {
                        Segment::Child(self.dot_selector()?)
                    }
                }
                Some('[') => Segment::Child(self.bracket(depth)?),
                _ => return Ok(out),
            };
            if out.len() == MAX_STEPS {
                return Err(self.err_at(start, JsonPathErrorKind::TooManySteps));
            }
            out.push(segment);
        }
    }

    fn dot_selector(&mut self) -> Result<Selector> {
        match self.peek() {
            Some('*') => {
                self.bump();
                Ok(Selector::Wildcard)
            }
            Some(c) if c == '\\' || is_plain(c) => Ok(Selector::Name(self.name()?)),
            _ => Err(self.unexpected("a member name or '*' after '.'")),
        }
    }

    fn descendant_selector(&mut self, depth: usize) -> Result<Selector> {
        match self.peek() {
            Some('*') => {
                self.bump();
                Ok(Selector::Wildcard)
            }
            Some('[') => self.bracket(depth),
            Some(c) if c == '\\' || is_plain(c) => Ok(Selector::Name(self.name()?)),
            _ => Err(self.unexpected("a member name, '*' or '[' after '..'")),
        }
    }

    /// A dot-form member name: plain characters and `\`-escaped ones.
    fn name(&mut self) -> Result<String> {
        let mut name = String::new();
        loop {
            match self.peek() {
                Some('\\') => {
                    let at = self.pos;
                    self.bump();
                    match self.bump() {
                        Some(c) => name.push(c),
                        None => return Err(self.err_at(at, JsonPathErrorKind::DanglingEscape)),
                    }
                }
                Some(c) if is_plain(c) => {
                    self.bump();
                    name.push(c);
                }
                _ => return Ok(name),
            }
        }
    }

    fn bracket(&mut self, depth: usize) -> Result<Selector> {
        let open = self.pos;
        self.bump();
        self.skip_ws();
        let selector = match self.peek() {
            None => return Err(self.err_at(open, JsonPathErrorKind::UnclosedBracket)),
            Some('?') => return self.filter(open, depth),
            Some(']') => return Err(self.err_at(open, JsonPathErrorKind::EmptyBrackets)),
            Some(quote @ ('\'' | '"')) => Selector::Name(self.quoted(quote)?),
            Some('*') => {
                self.bump();
                Selector::Wildcard
            }
            Some(c) if c == '-' || c == ':' || c.is_ascii_digit() => self.index_or_slice()?,
            Some(_) => {
                return Err(
                    self.unexpected("an index, a slice, '*', a quoted name or a filter after '['")
                );
            }
        };
        self.skip_ws();
        match self.peek() {
            Some(']') => {
                self.bump();
                Ok(selector)
            }
            Some(',') => Err(self.err_at(self.pos, JsonPathErrorKind::UnsupportedUnion)),
            None => Err(self.err_at(open, JsonPathErrorKind::UnclosedBracket)),
            Some(_) => Err(self.unexpected("']'")),
        }
    }

    fn index_or_slice(&mut self) -> Result<Selector> {
        let start = self.integer()?;
        self.skip_ws();
        if !self.eat(':') {
            return match start {
                Some(index) => Ok(Selector::Index(index)),
                None => Err(self.unexpected("an index or ':'")),
            };
        }
        self.skip_ws();
        let end = self.integer()?;
        self.skip_ws();
        let mut step = 1;
        if self.eat(':') {
            self.skip_ws();
            let at = self.pos;
            if let Some(s) = self.integer()? {
                if s < 1 {
                    return Err(self.err_at(at, JsonPathErrorKind::InvalidStep(s)));
                }
                step = s;
            }
        }
        Ok(Selector::Slice { start, end, step })
    }

    /// An optional signed 64-bit integer.
    fn integer(&mut self) -> Result<Option<i64>> {
        let at = self.pos;
        if !matches!(self.peek(), Some('-' | '0'..='9')) {
            return Ok(None);
        }
        self.eat('-');
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.bump();
        }
        let text = &self.src[at..self.pos];
        text.parse()
            .map(Some)
            .map_err(|_| self.err_at(at, JsonPathErrorKind::InvalidIndex(text.to_owned())))
    }

    /// A `'…'` or `"…"` string; `\` escapes the next character.
    fn quoted(&mut self, quote: char) -> Result<String> {
        let open = self.pos;
        self.bump();
        let mut out = String::new();
        loop {
            match self.bump() {
                None => return Err(self.err_at(open, JsonPathErrorKind::UnclosedString)),
                Some('\\') => match self.bump() {
                    Some(c) => out.push(c),
                    None => return Err(self.err_at(open, JsonPathErrorKind::UnclosedString)),
                },
                Some(c) if c == quote => return Ok(out),
                Some(c) => out.push(c),
            }
        }
    }

    /// `[?( … )]`; `open` is the byte offset of the `[`.
    fn filter(&mut self, open: usize, depth: usize) -> Result<Selector> {
        self.bump(); // '?'
        if !self.eat('(') {
            return Err(self.unexpected("'(' after '[?'"));
        }
        if depth >= MAX_FILTER_DEPTH {
            return Err(self.err_at(open, JsonPathErrorKind::FilterTooDeep));
        }
        self.skip_ws();
        if !self.eat('@') {
            return Err(match self.peek() {
                None => self.err_at(open, JsonPathErrorKind::UnclosedFilter),
                Some(_) => self.err_at(self.pos, JsonPathErrorKind::FilterWithoutCurrent),
            });
        }
        let path = self.segments(depth + 1)?;
        self.skip_ws();
        let test = match self.peek() {
            Some(')') => None,
            Some(c) if is_operator_char(c) => {
                let at = self.pos;
                while self.peek().is_some_and(is_operator_char) {
                    self.bump();
                }
                let op = match &self.src[at..self.pos] {
                    "==" => CmpOp::Eq,
                    "!=" => CmpOp::Ne,
                    "<" => CmpOp::Lt,
                    "<=" => CmpOp::Le,
                    ">" => CmpOp::Gt,
                    ">=" => CmpOp::Ge,
                    other => {
                        let kind = JsonPathErrorKind::UnknownOperator(other.to_owned());
                        return Err(self.err_at(at, kind));
                    }
                };
                self.skip_ws();
                let literal = self.literal()?;
                self.skip_ws();
                Some((op, literal))
            }
            None | Some(']') => return Err(self.err_at(open, JsonPathErrorKind::UnclosedFilter)),
            Some(_) => return Err(self.unexpected("a comparison operator or ')'")),
        };
        match self.peek() {
            Some(')') => {
                self.bump();
            }
            None | Some(']') => return Err(self.err_at(open, JsonPathErrorKind::UnclosedFilter)),
            Some(_) => return Err(self.unexpected("')'")),
        }
        if !self.eat(']') {
            return Err(self.err_at(open, JsonPathErrorKind::UnclosedFilter));
        }
        Ok(Selector::Filter(Box::new(Filter { path, test })))
    }

    fn literal(&mut self) -> Result<Literal> {
        const EXPECTED: &str = "a quoted string, a number, true or false";
        let at = self.pos;
        match self.peek() {
            Some(quote @ ('\'' | '"')) => Ok(Literal::String(self.quoted(quote)?)),
            Some(c) if c == '-' || c.is_ascii_digit() => {
                // JSON number grammar (leading zeros tolerated).
                self.eat('-');
                let mut well_formed = self.digits() > 0;
                let mut integral = true;
                if self.eat('.') {
                    integral = false;
                    well_formed &= self.digits() > 0;
                }
                if self.eat('e') || self.eat('E') {
                    integral = false;
                    let _ = self.eat('+') || self.eat('-');
                    well_formed &= self.digits() > 0;
                }
                let text = &self.src[at..self.pos];
                well_formed
                    .then(|| number(text, integral))
                    .flatten()
                    .map(Literal::Number)
                    .ok_or_else(|| {
                        self.err_at(at, JsonPathErrorKind::InvalidNumber(text.to_owned()))
                    })
            }
            Some(c) if c.is_alphabetic() => {
                while self.peek().is_some_and(|c| c.is_alphanumeric() || c == '_') {
                    self.bump();
                }
                match &self.src[at..self.pos] {
                    "true" => Ok(Literal::Bool(true)),
                    "false" => Ok(Literal::Bool(false)),
                    word => {
                        Err(self.err_at(at, JsonPathErrorKind::InvalidLiteral(word.to_owned())))
                    }
                }
            }
            _ => Err(self.unexpected(EXPECTED)),
        }
    }

    /// Skips ASCII digits, returning how many.
    fn digits(&mut self) -> usize {
        let start = self.pos;
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.bump();
        }
        self.pos - start
    }
}

/// A well-formed JSON number: exact for integers that fit 64 bits, otherwise the nearest finite
/// `f64`. `f64::from_str` rounds correctly, unlike serde_json without `float_roundtrip`, so the
/// canonical form parses back to the same number.
fn number(text: &str, integral: bool) -> Option<Number> {
    if integral {
        if let Ok(i) = text.parse::<i64>() {
            return Some(i.into());
        }
        if let Ok(u) = text.parse::<u64>() {
            return Some(u.into());
        }
    }
    Number::from_f64(text.parse::<f64>().ok()?)
}
