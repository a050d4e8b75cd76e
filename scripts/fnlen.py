#!/usr/bin/env python3
"""Report Rust functions longer than N lines (issue 44: "no non-test function over 120 lines").

Usage: scripts/fnlen.py [--max N] DIR_OR_FILE...

Scans every `.rs` file under the given paths, skipping `tests.rs` files, anything under a
`tests/` directory and every item marked `#[cfg(test)]` (test modules, test-only helpers).
Comments, string, byte-string, raw-string and char literals are blanked first so braces inside
them do not count; then each `fn name` body is brace-matched and its length taken from the line
of `fn` to the line of its closing brace, both included (a nested fn counts on its own and
inside its parent). Prints `path:line name lines` for every function over N lines (default 120)
and exits 1 when any is found, 0 otherwise. No dependencies beyond python3.
"""

import argparse
import os
import re
import sys

FN_RE = re.compile(r"\bfn\s+(r#)?([A-Za-z_][A-Za-z0-9_]*)")
CFG_TEST_RE = re.compile(r"#\s*\[\s*cfg\s*\(\s*test\s*\)\s*\]")


def blank(src):
    """Return `src` with comments and literal contents replaced by spaces (newlines kept)."""
    out = list(src)
    n = len(src)
    i = 0

    def wipe(a, b):
        for k in range(a, min(b, n)):
            if out[k] != "\n":
                out[k] = " "

    while i < n:
        c = src[i]
        nxt = src[i + 1] if i + 1 < n else ""
        if c == "/" and nxt == "/":
            j = src.find("\n", i)
            j = n if j < 0 else j
            wipe(i, j)
            i = j
        elif c == "/" and nxt == "*":
            depth, j = 1, i + 2
            while j < n and depth:
                if src.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif src.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            wipe(i, j)
            i = j
        elif c in "rb" and not (i > 0 and (src[i - 1].isalnum() or src[i - 1] == "_")):
            m = re.compile(r"(br|rb|r)(#*)\"").match(src, i)
            if m:
                close = '"' + m.group(2)
                j = src.find(close, m.end())
                j = n if j < 0 else j + len(close)
                wipe(i, j)
                i = j
            elif c == "b" and nxt in "\"'":
                i += 1  # the literal itself is handled on the next round
            else:
                i += 1
        elif c == '"':
            j = i + 1
            while j < n and src[j] != '"':
                j += 2 if src[j] == "\\" else 1
            wipe(i, j + 1)
            i = j + 1
        elif c == "'":
            # A char literal ('x', '\n', '\u{..}') or a lifetime ('a, 'static).
            if nxt == "\\":
                j = i + 2
                while j < n and src[j] != "'":
                    j += 1
                wipe(i, j + 1)
                i = j + 1
            elif i + 2 < n and src[i + 2] == "'":
                wipe(i, i + 3)
                i += 3
            else:
                i += 1
        else:
            i += 1
    return "".join(out)


def match_brace(text, open_at):
    """Index of the `}` closing the `{` at `open_at` (or len(text) when unbalanced)."""
    depth = 0
    for k in range(open_at, len(text)):
        if text[k] == "{":
            depth += 1
        elif text[k] == "}":
            depth -= 1
            if depth == 0:
                return k
    return len(text)


def item_body(text, start):
    """The `{` opening the item that starts at `start`, or None if a `;` ends it first.

    Parentheses and brackets are skipped, so `[u8; 4]` or `fn(a; b)` do not end it early.
    """
    depth = 0
    for k in range(start, len(text)):
        ch = text[k]
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif depth == 0 and ch == ";":
            return None
        elif depth == 0 and ch == "{":
            return k
    return None


def strip_cfg_test(text):
    """Blank every brace-bodied item marked `#[cfg(test)]`."""
    out = list(text)
    for m in CFG_TEST_RE.finditer(text):
        open_at = item_body(text, m.end())
        if open_at is None:
            continue
        close = match_brace(text, open_at)
        for k in range(m.start(), min(close + 1, len(text))):
            if out[k] != "\n":
                out[k] = " "
    return "".join(out)


def long_fns(path, limit):
    with open(path, encoding="utf-8", errors="replace") as f:
        text = strip_cfg_test(blank(f.read()))
    found = []
    for m in FN_RE.finditer(text):
        open_at = item_body(text, m.end())
        if open_at is None:
            continue
        close = match_brace(text, open_at)
        first = text.count("\n", 0, m.start()) + 1
        last = text.count("\n", 0, close) + 1
        lines = last - first + 1
        if lines > limit:
            found.append((first, m.group(2), lines))
    return found


def rust_files(root):
    if os.path.isfile(root):
        yield root
        return
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in ("tests", "target"))
        for name in sorted(filenames):
            if name.endswith(".rs") and name != "tests.rs":
                yield os.path.join(dirpath, name)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--max", type=int, default=120, help="longest allowed body, in lines")
    ap.add_argument("paths", nargs="+", help="directories or .rs files to scan")
    args = ap.parse_args()
    any_found = False
    for root in args.paths:
        for path in rust_files(root):
            for line, name, lines in long_fns(path, args.max):
                print(f"{path}:{line} {name} {lines}")
                any_found = True
    return 1 if any_found else 0


if __name__ == "__main__":
    sys.exit(main())
