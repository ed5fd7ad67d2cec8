#!/usr/bin/env python3
"""Marks functions that return absl::Status or absl::StatusOr<T> as [[nodiscard]].

Scans the headers (.h) of fedsched's modules (server, client, sim, secagg, common) for
declarations and inline definitions of free and member functions whose return type is exactly
`absl::Status` or `absl::StatusOr<...>` (by value; references and pointers are left alone) and puts
`[[nodiscard]]` at the front of each declaration, so that a caller dropping a Status is a compiler
warning (an error in fedsched's build: -Werror=unused-result).

`[[nodiscard]]` rather than ABSL_MUST_USE_RESULT: in the installed abseil (20220623) that macro
expands to nothing under GCC, which builds fedsched, so it would check nothing.

Idempotent: a declaration already carrying [[nodiscard]] or ABSL_MUST_USE_RESULT is left alone, so
the script can be re-run after merging code that adds new functions. Comments, string literals and
preprocessor lines are ignored; friend declarations are skipped (an attribute there needs a
definition). A declaration spanning several lines or pushed past 100 columns is re-wrapped with
clang-format (only that declaration's lines; the repository's .clang-format), when it is installed.

  scripts/dev/mark_must_use.py            edits the headers in place, prints what it changed
  scripts/dev/mark_must_use.py --check    changes nothing; exits 1 if a declaration is unmarked
"""

import argparse
import pathlib
import re
import shutil
import subprocess
import sys

MODULES = ("server", "client", "sim", "secagg", "common")
MARK = "[[nodiscard]]"
COLUMNS = 100
# Specifiers that may precede the return type; the mark goes in front of all of them.
SPECIFIERS = ("static", "virtual", "inline", "constexpr", "explicit", "extern")
RETURN_TYPE = re.compile(r"(?<![\w:])(?:::)?absl::Status(?:(Or\s*<)|(?!\w))")
NAME = re.compile(r"\s*((?:\w+::)*~?\w+)\s*\(")


def blank_non_code(text):
    """Returns text with comments, string/char literals and preprocessor lines replaced by spaces.

    Offsets and newlines are preserved, so positions found in the result index into text.
    """
    out = list(text)
    i, n = 0, len(text)
    line_start = True
    while i < n:
        c = text[i]
        if line_start and c == "#":
            j = i
            while j < n and text[j] != "\n":  # a directive, with its backslash continuations
                if text[j] == "\\" and j + 1 < n and text[j + 1] == "\n":
                    j += 1
                j += 1
            _blank(out, i, j)
            i = j
            continue
        if c == "\n":
            line_start = True
            i += 1
            continue
        if not c.isspace():
            line_start = False
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            _blank(out, i, j)
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            _blank(out, i, j)
            i = j
        elif c == 'R' and text.startswith('R"', i):
            m = re.match(r'R"([^(\s]*)\(', text[i:])
            end = text.find(")" + m.group(1) + '"', i) if m else -1
            j = n if end < 0 else end + len(m.group(1)) + 2
            _blank(out, i, j)
            i = j
        elif c in "\"'" and not (c == "'" and i > 0 and text[i - 1].isalnum()):
            j = i + 1  # (a ' after a digit or letter is a digit separator or part of a prefix)
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            _blank(out, i, j + 1)
            i = j + 1
        else:
            i += 1
    return "".join(out)


def _blank(out, start, end):
    for k in range(start, min(end, len(out))):
        if out[k] != "\n":
            out[k] = " "


def skip_angles(code, i):
    """Given code[i] just after a '<', returns the index after its matching '>' (or -1)."""
    depth = 1
    while i < len(code):
        if code[i] == "<":
            depth += 1
        elif code[i] == ">":
            depth -= 1
            if depth == 0:
                return i + 1
        elif code[i] in ";{}":
            return -1
        i += 1
    return -1


def declaration_start(code, i):
    """Walks back from the return type at code[i] over specifiers and marks.

    Returns (start, already_marked), or None when the type is not at the start of a declaration
    (a parameter, a template argument, a friend declaration, an expression).
    """
    start, marked = i, False
    while True:
        j = start
        while j > 0 and code[j - 1].isspace():
            j -= 1
        word = re.search(r"(\w+|\[\[nodiscard\]\])$", code[:j])
        if word and word.group(1) in SPECIFIERS + ("ABSL_MUST_USE_RESULT", MARK):
            marked = marked or word.group(1) in ("ABSL_MUST_USE_RESULT", MARK)
            start = word.start(1)
            continue
        if word and word.group(1) == "friend":
            return None
        break
    prev = code[:start].rstrip()
    if not prev or prev[-1] in ";{}" or re.search(r"\b(public|private|protected)\s*:$", prev):
        return start, marked
    if prev.endswith(">") and re.search(r"\btemplate\s*<[^;{}]*>$", prev):
        return start, marked
    return None


def find_unmarked(text):
    """Returns the offsets where a mark must be inserted, in increasing order."""
    code = blank_non_code(text)
    found = []
    for m in RETURN_TYPE.finditer(code):
        end = m.end()
        if m.group(1):  # StatusOr<...>
            end = skip_angles(code, end)
            if end < 0:
                continue
        name = NAME.match(code, end)
        if not name or name.group(1) in ("operator",) or not code[end].isspace():
            continue
        where = declaration_start(code, m.start())
        if where and not where[1]:
            found.append(where[0])
    return found


def mark(text, offsets):
    for off in reversed(offsets):
        text = text[:off] + MARK + " " + text[off:]
    return text


def long_declarations(text, offsets):
    """1-based line ranges of the marked declarations that may need re-wrapping.

    Those spanning several lines (their continuation lines were aligned to the old position of
    the parenthesis) and those now past the column limit.
    """
    ranges = []
    code = blank_non_code(text)
    shift = 0
    for off in offsets:
        start = off + shift
        shift += len(MARK) + 1
        ends = [k for k in (code.find(";", start), code.find("{", start)) if k >= 0]
        end = min(ends) if ends else len(code)
        first = text.count("\n", 0, start) + 1
        last = text.count("\n", 0, end) + 1
        lines = text.split("\n")[first - 1:last]
        if last > first or any(len(line) > COLUMNS for line in lines):
            ranges.append((first, last))
    return ranges


def headers(root):
    for module in MODULES:
        yield from sorted((root / module).rglob("*.h"))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="report unmarked declarations only")
    args = parser.parse_args()
    root = pathlib.Path(__file__).resolve().parents[2]
    clang_format = shutil.which("clang-format")
    unmarked = 0
    for path in headers(root):
        text = path.read_text()
        offsets = find_unmarked(text)
        if not offsets:
            continue
        unmarked += len(offsets)
        rel = path.relative_to(root)
        for off in offsets:
            print(f"{rel}:{text.count(chr(10), 0, off) + 1}: {MARK}")
        if args.check:
            continue
        new_text = mark(text, offsets)
        path.write_text(new_text)
        ranges = long_declarations(new_text, offsets)
        if ranges and clang_format:
            lines = [f"--lines={a}:{b}" for a, b in ranges]
            subprocess.run([clang_format, "-i", "--style=file", *lines, str(path)], check=True,
                           cwd=root)
    verb = "unmarked" if args.check else "marked"
    print(f"mark_must_use: {unmarked} declarations {verb}", file=sys.stderr)
    return 1 if args.check and unmarked else 0


if __name__ == "__main__":
    sys.exit(main())
