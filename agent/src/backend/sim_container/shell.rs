//! The simulated container's `sh -c` (pure): a script parsed into lists of pipelines, as dash
//! reads them — `;` and newlines, `&&`, `||`, `|`, redirections (`>`, `>>`, `<`, `N>`, `>&N`,
//! `N>&M`), single and double quotes, backslashes, `$NAME` and `${NAME}` (expanded from the
//! environment as the script is read), `#` comments. Not: background jobs, subshells,
//! functions, globs, assignments, `$?`.

use std::collections::BTreeMap;

/// How a pipeline is joined to the one after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Join {
    /// `;` or a newline (or the end): always run the next.
    Then,
    /// `&&`: run the next if this one succeeded.
    And,
    /// `||`: run the next if this one failed.
    Or,
}

/// A redirection of one command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Redirect {
    /// `N>FILE` or `N>>FILE`.
    Out {
        /// The descriptor (1 or 2).
        fd: u8,
        /// The file.
        path: String,
        /// `>>`.
        append: bool,
    },
    /// `N>&M`.
    Dup {
        /// The descriptor redirected.
        fd: u8,
        /// Where it goes.
        to: u8,
    },
    /// `<FILE`.
    In(String),
}

/// One command: its words and redirections.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Command {
    /// The command and its arguments, expanded.
    pub words: Vec<String>,
    /// Its redirections, in order.
    pub redirects: Vec<Redirect>,
}

/// Commands joined by `|`.
pub type Pipeline = Vec<Command>;

/// A parsed script: pipelines and how each joins the next.
pub type Script = Vec<(Pipeline, Join)>;

/// A script dash would refuse (`sh: 1: Syntax error: …`, exit 2).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("Syntax error: {0}")]
pub struct SyntaxError(pub String);

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Word(String),
    Op(&'static str),
    /// A redirection operator with its descriptor (`2>` → (2, ">")).
    Redir(u8, &'static str),
}

/// Reads `$NAME` or `${NAME}` after the `$` at `chars[i]`; returns the value and the index
/// after it.
fn variable(chars: &[char], i: usize, env: &BTreeMap<String, String>) -> (String, usize) {
    let mut j = i + 1;
    let braced = chars.get(j) == Some(&'{');
    if braced {
        j += 1;
    }
    let start = j;
    while j < chars.len() && (chars[j].is_ascii_alphanumeric() || chars[j] == '_') {
        j += 1;
    }
    let name: String = chars[start..j].iter().collect();
    if braced && chars.get(j) == Some(&'}') {
        j += 1;
    }
    if name.is_empty() && !braced {
        return ("$".into(), i + 1);
    }
    (env.get(&name).cloned().unwrap_or_default(), j)
}

fn tokens(script: &str, env: &BTreeMap<String, String>) -> Result<Vec<Token>, SyntaxError> {
    let mut lexer = Lexer {
        chars: script.chars().collect(),
        i: 0,
        env,
        out: Vec::new(),
        word: String::new(),
        in_word: false,
    };
    while lexer.i < lexer.chars.len() {
        lexer.step()?;
    }
    lexer.end_word();
    Ok(lexer.out)
}

/// The script's characters being cut into tokens: where it is, the tokens so far and the word
/// being built (quotes and `$VAR` expand into it).
struct Lexer<'a> {
    chars: Vec<char>,
    i: usize,
    env: &'a BTreeMap<String, String>,
    out: Vec<Token>,
    word: String,
    in_word: bool,
}

impl Lexer<'_> {
    /// Ends the word being built, if any.
    fn end_word(&mut self) {
        if self.in_word {
            self.out.push(Token::Word(std::mem::take(&mut self.word)));
            self.in_word = false;
        }
    }

    /// Reads what starts at the current character.
    fn step(&mut self) -> Result<(), SyntaxError> {
        let c = self.chars[self.i];
        match c {
            ' ' | '\t' => {
                self.end_word();
                self.i += 1;
            }
            '\n' | ';' => {
                self.end_word();
                self.out.push(Token::Op(";"));
                self.i += 1;
            }
            '#' if !self.in_word => {
                while self.i < self.chars.len() && self.chars[self.i] != '\n' {
                    self.i += 1;
                }
            }
            '&' | '|' => self.operator(c)?,
            '>' | '<' => self.redirection(c),
            '\'' => self.single_quoted()?,
            '"' => self.double_quoted()?,
            '\\' => {
                self.in_word = true;
                if let Some(next) = self.chars.get(self.i + 1)
                    && *next != '\n'
                {
                    self.word.push(*next);
                }
                self.i += 2;
            }
            '$' => {
                self.in_word = true;
                let (value, next) = variable(&self.chars, self.i, self.env);
                self.word.push_str(&value);
                self.i = next;
            }
            '(' | ')' | '`' => {
                return Err(SyntaxError(format!("\"{c}\" unexpected (not simulated)")));
            }
            other => {
                self.in_word = true;
                self.word.push(other);
                self.i += 1;
            }
        }
        Ok(())
    }

    /// `&&`, `||` or `|` (a lone `&` would start a background job).
    fn operator(&mut self, c: char) -> Result<(), SyntaxError> {
        self.end_word();
        let double = self.chars.get(self.i + 1) == Some(&c);
        match (c, double) {
            ('&', true) => self.out.push(Token::Op("&&")),
            ('|', true) => self.out.push(Token::Op("||")),
            ('|', false) => self.out.push(Token::Op("|")),
            _ => return Err(SyntaxError("background jobs (&) are not simulated".into())),
        }
        self.i += if double { 2 } else { 1 };
        Ok(())
    }

    /// `>`, `>>`, `>&` or `<`, with the descriptor a word of digits right before it names.
    fn redirection(&mut self, c: char) {
        let word = &self.word;
        let fd = if self.in_word && !word.is_empty() && word.chars().all(|d| d.is_ascii_digit()) {
            let fd = word.parse::<u8>().unwrap_or(1);
            self.word.clear();
            self.in_word = false;
            fd
        } else {
            self.end_word();
            if c == '<' { 0 } else { 1 }
        };
        let op = match (c, self.chars.get(self.i + 1)) {
            ('>', Some('>')) => ">>",
            ('>', Some('&')) => ">&",
            ('>', _) => ">",
            _ => "<",
        };
        self.out.push(Token::Redir(fd, op));
        self.i += op.len();
    }

    /// `'…'`: every character as it is.
    fn single_quoted(&mut self) -> Result<(), SyntaxError> {
        self.in_word = true;
        let start = self.i + 1;
        let close = self.chars[start..]
            .iter()
            .position(|c| *c == '\'')
            .ok_or_else(|| SyntaxError("Unterminated quoted string".into()))?;
        self.word.extend(&self.chars[start..start + close]);
        self.i += close + 2;
        Ok(())
    }

    /// `"…"`: `$VAR` expanded, `\"`, `\\` and `\$` escaped.
    fn double_quoted(&mut self) -> Result<(), SyntaxError> {
        self.in_word = true;
        self.i += 1;
        loop {
            match self.chars.get(self.i) {
                None => return Err(SyntaxError("Unterminated quoted string".into())),
                Some('"') => {
                    self.i += 1;
                    return Ok(());
                }
                Some('\\') if matches!(self.chars.get(self.i + 1), Some('"' | '\\' | '$')) => {
                    self.word.push(self.chars[self.i + 1]);
                    self.i += 2;
                }
                Some('$') => {
                    let (value, next) = variable(&self.chars, self.i, self.env);
                    self.word.push_str(&value);
                    self.i = next;
                }
                Some(other) => {
                    self.word.push(*other);
                    self.i += 1;
                }
            }
        }
    }
}

/// Parses a script, expanding variables from `env`.
pub fn parse(script: &str, env: &BTreeMap<String, String>) -> Result<Script, SyntaxError> {
    let mut script_out: Script = Vec::new();
    let mut pipeline: Pipeline = Vec::new();
    let mut command = Command::default();
    let mut tokens = tokens(script, env)?.into_iter().peekable();
    let unexpected = |what: &str| SyntaxError(format!("\"{what}\" unexpected"));
    while let Some(token) = tokens.next() {
        match token {
            Token::Word(w) => command.words.push(w),
            Token::Redir(fd, op) => {
                let Some(Token::Word(target)) = tokens.next() else {
                    return Err(SyntaxError("redirection unexpected".into()));
                };
                command.redirects.push(match op {
                    ">&" => Redirect::Dup {
                        fd,
                        to: target
                            .parse()
                            .map_err(|_| SyntaxError(format!("Bad fd number: {target}")))?,
                    },
                    "<" => Redirect::In(target),
                    _ => Redirect::Out {
                        fd,
                        path: target,
                        append: op == ">>",
                    },
                });
            }
            Token::Op("|") => {
                if command.words.is_empty() {
                    return Err(unexpected("|"));
                }
                pipeline.push(std::mem::take(&mut command));
            }
            Token::Op(op) => {
                if command.words.is_empty() && command.redirects.is_empty() {
                    if op == ";" && pipeline.is_empty() {
                        continue;
                    }
                    return Err(unexpected(op));
                }
                pipeline.push(std::mem::take(&mut command));
                let join = match op {
                    "&&" => Join::And,
                    "||" => Join::Or,
                    _ => Join::Then,
                };
                script_out.push((std::mem::take(&mut pipeline), join));
            }
        }
    }
    if !command.words.is_empty() || !command.redirects.is_empty() {
        pipeline.push(command);
    } else if !pipeline.is_empty() {
        return Err(SyntaxError("end of file unexpected".into()));
    }
    if !pipeline.is_empty() {
        script_out.push((pipeline, Join::Then));
    } else if let Some((_, join)) = script_out.last()
        && *join != Join::Then
    {
        return Err(SyntaxError("end of file unexpected".into()));
    }
    Ok(script_out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env() -> BTreeMap<String, String> {
        BTreeMap::from([("GREETING".to_string(), "hello world".to_string())])
    }

    fn words(c: &Command) -> Vec<&str> {
        c.words.iter().map(String::as_str).collect()
    }

    #[test]
    fn lists_pipelines_quotes_and_variables_parse_as_dash_reads_them() {
        let script = parse(
            r#"echo "$GREETING" '$GREETING' ${GREETING}x \; # comment
cat /etc/hostname | wc -c && false || echo oops >&2; tar cf - /tmp | tail -c +10"#,
            &env(),
        )
        .unwrap();
        assert_eq!(script.len(), 5);
        assert_eq!(
            words(&script[0].0[0]),
            ["echo", "hello world", "$GREETING", "hello worldx", ";"]
        );
        assert_eq!(script[1].0.len(), 2);
        assert_eq!(script[1].1, Join::And);
        assert_eq!(script[2].1, Join::Or);
        assert_eq!(script[3].0[0].redirects, [Redirect::Dup { fd: 1, to: 2 }]);
        assert_eq!(words(&script[4].0[1]), ["tail", "-c", "+10"]);
    }

    #[test]
    fn redirections_name_their_descriptors() {
        let script = parse("cat < /in > /out 2>>/err 2>&1", &env()).unwrap();
        assert_eq!(
            script[0].0[0].redirects,
            [
                Redirect::In("/in".into()),
                Redirect::Out {
                    fd: 1,
                    path: "/out".into(),
                    append: false
                },
                Redirect::Out {
                    fd: 2,
                    path: "/err".into(),
                    append: true
                },
                Redirect::Dup { fd: 2, to: 1 },
            ]
        );
    }

    #[test]
    fn broken_scripts_are_syntax_errors() {
        for bad in [
            "echo 'x",
            "| cat",
            "echo &&",
            "sleep 1 &",
            "echo $(id)",
            "cat >",
        ] {
            assert!(parse(bad, &env()).is_err(), "{bad}");
        }
        assert!(parse("", &env()).unwrap().is_empty());
        assert!(parse(";;\n", &env()).unwrap().is_empty());
    }
}
