//! Paths inside a repository, checked without trusting the repository: file-name components,
//! the GitRepo's `paths` globs, and symlinks resolved lexically. Pure; used by the worker on
//! every tree entry and by the hub when it checks the worker's answer again.

use thiserror::Error;

/// The longest file-name component accepted (bytes), as common file systems allow.
pub const MAX_COMPONENT_BYTES: usize = 255;

/// Links followed in one chain before it counts as a loop.
pub const MAX_LINK_CHAIN: usize = 8;

/// A path or name that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PathError {
    /// A file-name component that is empty, `.`, `..`, `.git`, holds a separator or a control
    /// character, is not UTF-8, or is too long.
    #[error("{path}: not a usable file name ({why})")]
    Component {
        /// The path up to and including the component, escaped for display.
        path: String,
        /// What is wrong with it.
        why: &'static str,
    },
    /// A `paths` entry that is absolute, leaves the repository or is otherwise malformed.
    #[error("paths entry {spec:?}: {why}")]
    Spec {
        /// The entry as given.
        spec: String,
        /// What is wrong with it.
        why: &'static str,
    },
    /// A symlink whose target is absolute or leaves the directory it must stay in.
    #[error("{link} is a symlink to {target}, outside {root}")]
    LinkEscapes {
        /// The link's path.
        link: String,
        /// Its target as written in the repository (escaped).
        target: String,
        /// The directory the link must stay in.
        root: String,
    },
    /// A chain of symlinks longer than [`MAX_LINK_CHAIN`] (or a loop).
    #[error("{link}: more than {MAX_LINK_CHAIN} symlinks in a chain (a loop?)")]
    LinkChain {
        /// The first link of the chain.
        link: String,
    },
    /// A symlink that ends at nothing, a directory or a submodule.
    #[error("{link} is a symlink to {target}, which is not a file in the repository")]
    LinkDangling {
        /// The link's path.
        link: String,
        /// The path it resolved to.
        target: String,
    },
}

/// Checks one file-name component of a path found in a tree. `parent` is the path of the
/// directory holding it (for the error only).
pub fn check_component(parent: &str, name: &[u8]) -> Result<(), PathError> {
    let fail = |why| PathError::Component {
        path: join(parent, &escape(name)),
        why,
    };
    if name.is_empty() {
        return Err(fail("empty"));
    }
    if name == b"." || name == b".." {
        return Err(fail("a relative step"));
    }
    if name.len() > MAX_COMPONENT_BYTES {
        return Err(fail("longer than 255 bytes"));
    }
    if name.iter().any(|b| *b == b'/' || *b == b'\\') {
        return Err(fail("holds a path separator"));
    }
    if name.iter().any(|b| b.is_ascii_control()) {
        return Err(fail("holds a control character"));
    }
    let Ok(text) = std::str::from_utf8(name) else {
        return Err(fail("not UTF-8"));
    };
    // `.git` in any case, and the forms file systems fold onto it (trailing dots and spaces).
    if text
        .trim_end_matches(['.', ' '])
        .eq_ignore_ascii_case(".git")
    {
        return Err(fail("names the repository's own directory"));
    }
    Ok(())
}

/// One component of a `paths` entry: a literal name or a glob with `*` and `?`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SpecPart {
    /// Matches exactly this name.
    Literal(String),
    /// Matches names by `*` (any run) and `?` (one character).
    Glob(String),
}

impl SpecPart {
    /// Whether `name` matches this part.
    pub fn matches(&self, name: &str) -> bool {
        match self {
            SpecPart::Literal(l) => l == name,
            SpecPart::Glob(g) => glob_match(g, name),
        }
    }
}

/// Parses a GitRepo `paths` entry: relative, `/`-separated, no `.`/`..` steps, `*` and `?`
/// within one component, no `**`. `""`, `"/"` and `"."` mean the repository root (no parts).
pub fn parse_spec(spec: &str) -> Result<Vec<SpecPart>, PathError> {
    let fail = |why| PathError::Spec {
        spec: spec.to_owned(),
        why,
    };
    let trimmed = spec.trim_end_matches('/');
    if trimmed.is_empty() || trimmed == "." {
        return Ok(Vec::new());
    }
    if trimmed.starts_with('/') {
        return Err(fail("must be relative to the repository root"));
    }
    let mut parts = Vec::new();
    for part in trimmed.split('/') {
        if part.contains("**") {
            return Err(fail(
                "`**` is not supported: name each directory level with `*`",
            ));
        }
        if part.contains(['[', ']', '{', '}']) {
            return Err(fail("only `*` and `?` are glob characters here"));
        }
        if part.contains(['*', '?']) {
            if part.bytes().any(|b| b.is_ascii_control() || b == b'\\') {
                return Err(fail("holds an unusable component"));
            }
            parts.push(SpecPart::Glob(part.to_owned()));
        } else {
            check_component("", part.as_bytes()).map_err(|_| {
                fail("holds an empty, `.`, `..`, `.git` or otherwise unusable component")
            })?;
            parts.push(SpecPart::Literal(part.to_owned()));
        }
    }
    Ok(parts)
}

/// Glob match of one component: `*` any run of characters, `?` exactly one.
pub fn glob_match(pattern: &str, name: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let n: Vec<char> = name.chars().collect();
    // Iterative matcher with one backtrack point (the last `*`): linear-ish, no recursion.
    let (mut pi, mut ni) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == n[ni]) {
            pi += 1;
            ni += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ni));
            pi += 1;
        } else if let Some((sp, sn)) = star {
            pi = sp + 1;
            ni = sn + 1;
            star = Some((sp, sn + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

/// Joins a directory path and a name (`""` is the root).
pub fn join(dir: &str, name: &str) -> String {
    if dir.is_empty() {
        name.to_owned()
    } else {
        format!("{dir}/{name}")
    }
}

/// Whether `path` is `root` or lies under it (component-wise; `""` is the whole repository).
pub fn within(root: &str, path: &str) -> bool {
    root.is_empty()
        || path == root
        || (path.starts_with(root) && path.as_bytes().get(root.len()) == Some(&b'/'))
}

/// Resolves one symlink's target lexically from the directory of `link`: relative only,
/// `.` and `..` applied without touching any file system. Returns the path from the repository
/// root, or an error when it is absolute or climbs above `root`.
pub fn resolve_link(link: &str, target: &[u8], root: &str) -> Result<String, PathError> {
    let escapes = || PathError::LinkEscapes {
        link: link.to_owned(),
        target: escape(target),
        root: display_root(root),
    };
    let Ok(target_text) = std::str::from_utf8(target) else {
        return Err(escapes());
    };
    if target_text.is_empty() || target_text.starts_with('/') || target_text.contains('\\') {
        return Err(escapes());
    }
    let mut parts: Vec<&str> = link.split('/').collect();
    parts.pop(); // the link's own name
    for step in target_text.split('/') {
        match step {
            "" | "." => {}
            ".." => {
                if parts.pop().is_none() {
                    return Err(escapes());
                }
            }
            name => {
                check_component(&parts.join("/"), name.as_bytes()).map_err(|_| escapes())?;
                parts.push(name);
            }
        }
    }
    let resolved = parts.join("/");
    if resolved.is_empty() || !within(root, &resolved) {
        return Err(escapes());
    }
    Ok(resolved)
}

/// What a path in the tree is, as far as link resolution needs to know.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    /// A file (regular or executable).
    File,
    /// A symlink with this raw target.
    Link(Vec<u8>),
    /// A directory, a submodule, or nothing.
    Other,
}

/// Follows a chain of links from `link` (whose raw target is `target`) through `lookup` until a
/// file, at most [`MAX_LINK_CHAIN`] links, every step staying under `root`.
pub fn follow_links(
    link: &str,
    target: &[u8],
    root: &str,
    mut lookup: impl FnMut(&str) -> Found,
) -> Result<String, PathError> {
    let mut at = resolve_link(link, target, root)?;
    for _ in 0..MAX_LINK_CHAIN {
        match lookup(&at) {
            Found::File => return Ok(at),
            Found::Link(next) => at = resolve_link(&at, &next, root)?,
            Found::Other => {
                return Err(PathError::LinkDangling {
                    link: link.to_owned(),
                    target: at,
                });
            }
        }
    }
    Err(PathError::LinkChain {
        link: link.to_owned(),
    })
}

/// A name for display: UTF-8 as is, anything else and control characters escaped.
pub fn escape(name: &[u8]) -> String {
    match std::str::from_utf8(name) {
        Ok(text) if !text.chars().any(char::is_control) => text.to_owned(),
        _ => name.escape_ascii().to_string(),
    }
}

fn display_root(root: &str) -> String {
    if root.is_empty() {
        "the repository".to_owned()
    } else {
        root.to_owned()
    }
}

#[cfg(test)]
mod tests;
