//! What Go's `text/template` checks or prints from the parse tree and `gotmpl` does not: a
//! function not defined is a *parse* error in Go (even in a branch never taken), and an
//! execution error names the command where it happened (`tmpl:4:20: executing "tmpl" at
//! <env "HOME">`). Both are computed here from `gotmpl`'s public tree.

use gotmpl::parse::{CommandNode, Expr, ListNode, Node, Number, PipeNode};

/// Go's built-in functions (`text/template` `builtins()`).
pub const GO_BUILTINS: &[&str] = &[
    "and", "call", "html", "index", "slice", "js", "len", "not", "or", "print", "printf",
    "println", "urlquery", "eq", "ge", "gt", "le", "lt", "ne",
];

/// The first function (by position) that is neither a Go built-in nor `defined`, with its
/// 1-based line: Go's `template: tmpl:<line>: function "<f>" not defined`.
pub fn undefined_function(
    body: &ListNode,
    defines: &[gotmpl::parse::DefineNode],
    defined: &dyn Fn(&str) -> bool,
) -> Option<(String, usize)> {
    let mut found: Option<(String, usize, usize)> = None;
    let mut visit = |cmd: &CommandNode| {
        for e in &cmd.args {
            each_identifier(e, &mut |name, pos| {
                if GO_BUILTINS.contains(&name) || defined(name) {
                    return;
                }
                if found.as_ref().is_none_or(|(_, off, _)| pos.offset < *off) {
                    found = Some((name.to_string(), pos.offset, pos.line));
                }
            });
        }
    };
    walk_list_ref(body, &mut visit);
    for d in defines {
        walk_list_ref(&d.body, &mut visit);
    }
    found.map(|(name, _, line)| (name, line))
}

/// The first command (by position) that calls `function`, as Go's error context gives it:
/// `(line, column, text)`, the column counted in bytes from 0 as Go's `ErrorContext` does.
pub fn call_site(body: &ListNode, source: &str, function: &str) -> Option<(usize, usize, String)> {
    let mut all: Vec<&CommandNode> = Vec::new();
    walk_list_ref(body, &mut |cmd| all.push(cmd));
    let cmd = all
        .into_iter()
        .filter(|c| calls(c, function))
        .min_by_key(|c| c.pos.offset)?;
    let (line, col) = line_col(source, cmd.pos.offset);
    Some((line, col, command_text(cmd)))
}

/// Go's line (from 1) and byte column (from 0) of an offset.
fn line_col(source: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(source.len());
    let before = &source[..offset];
    let line = before.matches('\n').count() + 1;
    let col = before.rfind('\n').map_or(offset, |nl| offset - nl - 1);
    (line, col)
}

/// The first read (by position) of a field of the root context that `known` does not name —
/// `.X` where dot is still the root (outside `range` and `with` bodies) or `$.X` anywhere —
/// as `(line, column, node, field)`. Go's context is a struct, so such a read is its execution
/// error `can't evaluate field X in type …`, never the `<no value>` a map would print.
pub fn unknown_root_field(
    body: &ListNode,
    source: &str,
    known: &dyn Fn(&str) -> bool,
) -> Option<(usize, usize, String, String)> {
    let mut found: Vec<&Expr> = Vec::new();
    root_list(body, true, &mut |e| found.push(e));
    let e = found
        .into_iter()
        .filter(|e| match e {
            Expr::Field(_, f) | Expr::Variable(_, _, f) => f.first().is_some_and(|f| !known(f)),
            _ => false,
        })
        .min_by_key(|e| e.pos().offset)?;
    let field = match e {
        Expr::Field(_, f) | Expr::Variable(_, _, f) => f.first()?.to_string(),
        _ => return None,
    };
    let (line, col) = line_col(source, e.pos().offset);
    Some((line, col, expr_text(e), field))
}

/// Hands `f` every root field read: `.X` while `root`, `$.X` always.
fn root_list<'a>(list: &'a ListNode, root: bool, f: &mut dyn FnMut(&'a Expr)) {
    for n in &list.nodes {
        match n {
            Node::List(l) => root_list(l, root, f),
            Node::Action(a) => root_pipe(&a.pipe, root, f),
            Node::If(b) => {
                root_pipe(&b.pipe, root, f);
                root_list(&b.body, root, f);
                if let Some(e) = &b.else_body {
                    root_list(e, root, f);
                }
            }
            Node::Range(b) | Node::With(b) => {
                root_pipe(&b.pipe, root, f);
                root_list(&b.body, false, f);
                if let Some(e) = &b.else_body {
                    root_list(e, root, f);
                }
            }
            Node::Template(t) => {
                if let Some(p) = &t.pipe {
                    root_pipe(p, root, f);
                }
            }
            Node::Define(d) => root_list(&d.body, false, f),
            Node::Text(_) | Node::Break(_) | Node::Continue(_) => {}
        }
    }
}

fn root_pipe<'a>(p: &'a PipeNode, root: bool, f: &mut dyn FnMut(&'a Expr)) {
    for c in &p.commands {
        for a in &c.args {
            root_expr(a, root, f);
        }
    }
}

fn root_expr<'a>(e: &'a Expr, root: bool, f: &mut dyn FnMut(&'a Expr)) {
    match e {
        Expr::Field(..) if root => f(e),
        Expr::Variable(_, name, fields) if name.as_str() == "$" && !fields.is_empty() => f(e),
        Expr::Pipe(_, p) => root_pipe(p, root, f),
        Expr::Chain(_, inner, _) => root_expr(inner, root, f),
        _ => {}
    }
}

fn calls(cmd: &CommandNode, function: &str) -> bool {
    match cmd.args.first() {
        Some(Expr::Identifier(_, name)) => name.as_str() == function,
        Some(Expr::Chain(_, inner, _)) => {
            matches!(inner.as_ref(), Expr::Identifier(_, name) if name.as_str() == function)
        }
        _ => false,
    }
}

fn each_identifier(e: &Expr, f: &mut dyn FnMut(&str, gotmpl::parse::Pos)) {
    match e {
        Expr::Identifier(pos, name) => f(name, *pos),
        Expr::Chain(_, inner, _) => each_identifier(inner, f),
        Expr::Pipe(_, pipe) => {
            for c in &pipe.commands {
                for a in &c.args {
                    each_identifier(a, f);
                }
            }
        }
        _ => {}
    }
}

// The walk hands out references that live as long as the tree.
fn walk_list_ref<'a>(list: &'a ListNode, f: &mut dyn FnMut(&'a CommandNode)) {
    for n in &list.nodes {
        match n {
            Node::List(l) => walk_list_ref(l, f),
            Node::Action(a) => walk_pipe_ref(&a.pipe, f),
            Node::If(b) | Node::Range(b) | Node::With(b) => {
                walk_pipe_ref(&b.pipe, f);
                walk_list_ref(&b.body, f);
                if let Some(e) = &b.else_body {
                    walk_list_ref(e, f);
                }
            }
            Node::Template(t) => {
                if let Some(p) = &t.pipe {
                    walk_pipe_ref(p, f);
                }
            }
            Node::Define(d) => walk_list_ref(&d.body, f),
            Node::Text(_) | Node::Break(_) | Node::Continue(_) => {}
        }
    }
}

fn walk_pipe_ref<'a>(p: &'a PipeNode, f: &mut dyn FnMut(&'a CommandNode)) {
    for c in &p.commands {
        f(c);
        for a in &c.args {
            walk_expr_ref(a, f);
        }
    }
}

fn walk_expr_ref<'a>(e: &'a Expr, f: &mut dyn FnMut(&'a CommandNode)) {
    match e {
        Expr::Pipe(_, p) => walk_pipe_ref(p, f),
        Expr::Chain(_, inner, _) => walk_expr_ref(inner, f),
        _ => {}
    }
}

/// A command as Go's `CommandNode.String()` prints it: arguments separated by spaces, a
/// pipeline argument in parentheses, strings Go-quoted.
pub fn command_text(cmd: &CommandNode) -> String {
    cmd.args.iter().map(expr_text).collect::<Vec<_>>().join(" ")
}

fn pipe_text(p: &PipeNode) -> String {
    let mut out = String::new();
    if !p.decl.is_empty() {
        let vars: Vec<&str> = p.decl.iter().map(|d| d.as_str()).collect();
        out.push_str(&vars.join(", "));
        out.push_str(if p.is_assign { " = " } else { " := " });
    }
    let cmds: Vec<String> = p.commands.iter().map(command_text).collect();
    out.push_str(&cmds.join(" | "));
    out
}

fn expr_text(e: &Expr) -> String {
    match e {
        Expr::Dot(_) => ".".into(),
        Expr::Field(_, fields) => fields.iter().map(|f| format!(".{f}")).collect(),
        Expr::Variable(_, name, fields) => {
            let mut s = name.to_string();
            for f in fields {
                s.push('.');
                s.push_str(f);
            }
            s
        }
        Expr::Identifier(_, name) => name.to_string(),
        Expr::String(_, s) => go_quote(s),
        Expr::Number(_, n) => match n {
            Number::Int(i) => i.to_string(),
            Number::Uint(u) => u.to_string(),
            Number::Float(f) => f.to_string(),
        },
        Expr::Bool(_, b) => b.to_string(),
        Expr::Nil(_) => "nil".into(),
        Expr::Pipe(_, p) => format!("({})", pipe_text(p)),
        Expr::Chain(_, inner, fields) => {
            let mut s = match inner.as_ref() {
                Expr::Pipe(_, p) => format!("({})", pipe_text(p)),
                other => expr_text(other),
            };
            for f in fields {
                s.push('.');
                s.push_str(f);
            }
            s
        }
    }
}

/// Go's `strconv.Quote` for the printable text templates hold.
pub fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The line of the first `{{define}}`, `{{template}}` or `{{block}}`: Flotilla refuses them,
/// since a template calling itself recurses with no function call to stop it (none of
/// policy-collection's managed-cluster templates defines one).
pub fn template_call(body: &ListNode, defines: &[gotmpl::parse::DefineNode]) -> Option<usize> {
    let mut lines: Vec<(usize, usize)> =
        defines.iter().map(|d| (d.pos.offset, d.pos.line)).collect();
    each_node(body, &mut |n| match n {
        Node::Template(t) => lines.push((t.pos.offset, t.pos.line)),
        Node::Define(d) => lines.push((d.pos.offset, d.pos.line)),
        _ => {}
    });
    lines.into_iter().min().map(|(_, line)| line)
}

/// The nodes of the largest `{{range}}` body (its pipeline, body and `else`): what one
/// iteration may walk at most.
pub fn largest_loop(body: &ListNode) -> u64 {
    let mut largest = 0;
    each_node(body, &mut |n| {
        if let Node::Range(b) = n {
            largest = largest.max(branch_size(b));
        }
    });
    largest
}

fn branch_size(b: &gotmpl::parse::BranchNode) -> u64 {
    pipe_size(&b.pipe) + list_size(&b.body) + b.else_body.as_ref().map_or(0, list_size)
}

fn list_size(list: &ListNode) -> u64 {
    list.nodes
        .iter()
        .map(|n| {
            1 + match n {
                Node::List(l) => list_size(l),
                Node::Action(a) => pipe_size(&a.pipe),
                Node::If(b) | Node::Range(b) | Node::With(b) => branch_size(b),
                Node::Template(t) => t.pipe.as_ref().map_or(0, pipe_size),
                Node::Define(d) => list_size(&d.body),
                Node::Text(_) | Node::Break(_) | Node::Continue(_) => 0,
            }
        })
        .sum()
}

fn pipe_size(p: &PipeNode) -> u64 {
    p.commands
        .iter()
        .map(|c| 1 + c.args.iter().map(expr_size).sum::<u64>())
        .sum()
}

fn expr_size(e: &Expr) -> u64 {
    1 + match e {
        Expr::Pipe(_, p) => pipe_size(p),
        Expr::Chain(_, inner, _) => expr_size(inner),
        _ => 0,
    }
}

/// Every node of the tree, branches' bodies included.
fn each_node<'a>(list: &'a ListNode, f: &mut dyn FnMut(&'a Node)) {
    for n in &list.nodes {
        f(n);
        match n {
            Node::List(l) => each_node(l, f),
            Node::If(b) | Node::Range(b) | Node::With(b) => {
                each_node(&b.body, f);
                if let Some(e) = &b.else_body {
                    each_node(e, f);
                }
            }
            Node::Define(d) => each_node(&d.body, f),
            _ => {}
        }
    }
}
