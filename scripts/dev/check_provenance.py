#!/usr/bin/env python3
"""Finds provenance left in user docs and production code: commit hashes and issue references.

User docs and code say what the product does and why, citing docs/ files or papers; the history
of how it got there (which commit, which issue) belongs in git and in docs/reports/, where each
benchmark or experiment is dated with its commit and command.

What it reports, as PATH:LINE: TOKEN (KIND):
  commit   a token of 7-40 lowercase hex digits with at least one digit and one letter, standing
           alone (not inside a longer word or number, not after 0x, not part of a UUID);
  issue    the word issue/issues followed by a number, a '#' followed by a number (at the start
           of a word), or a link to a GitHub issue or pull request.

What it scans (a path that does not exist is skipped, so the check runs before and after the
docs move):
  docs     README.md, docs/README.md (the docs' index), docs/guides/, docs/reference/,
           docs/ARCHITECTURE.md, docs/ALGORITHMS.md: every line;
  code     the files git tracks under server/ client/ sim/ common/ secagg/ proto/ python/
           examples/ models/ cmake/ deploy/ scripts/ configs/ and CMakeLists.txt: in C, C++ and
           proto sources, their comments and string literals; in Python, its comments and
           strings (tokenize); in every other file (shell, CMake, YAML, text formats), every line.
  Never tests/, bench/ or docs/reports/, which keep their provenance.

Tokens that look like a hash but are not one are listed in ALLOWED below, each with its file
and reason; nothing else is exempt.

Usage: python3 scripts/dev/check_provenance.py [--code-only] [--root DIR]
  --code-only  scan production code only (not README.md and docs/)
  --root       the checkout to scan (default: the one holding this script)
Exit: 0 when nothing is found, 1 when anything is (each finding printed), 2 on a usage error.
"""
import argparse
import io
import os
import re
import subprocess
import sys
import tokenize

DOC_PATHS = ['README.md', 'docs/README.md', 'docs/guides', 'docs/reference',
             'docs/ARCHITECTURE.md', 'docs/ALGORITHMS.md']
CODE_PATHS = ['server', 'client', 'sim', 'common', 'secagg', 'proto', 'python', 'examples',
              'models', 'cmake', 'deploy', 'scripts', 'configs', 'CMakeLists.txt']
C_LIKE = ('.c', '.cc', '.cpp', '.h', '.hpp', '.inc', '.proto')
SELF = 'scripts/dev/check_provenance.py'
TEXT_LIMIT = 2_000_000  # bytes; larger files are data, not prose or code

# (path relative to the root, token, why it is not a commit hash). Each token may also appear in
# this list itself.
ALLOWED = [
    ('common/sha256.cc', '0123456789abcdef', 'the hex digit table of ToHex'),
]

HEX = re.compile(r'(?<![0-9A-Za-z_])(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}'
                 r'(?![0-9A-Za-z_])')
# Numbers with an exponent ("1.5545e-05", "3e+10"), whose digits and 'e' look like hex.
FLOAT = re.compile(r'(?<![0-9A-Za-z_])(?:[0-9]*\.[0-9]+[eE][+-]?|[0-9]+[eE][+-])[0-9]+'
                   r'(?![0-9A-Za-z_])')
UUID = re.compile(r'\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-'
                  r'[0-9a-fA-F]{12}\b')
ISSUE = re.compile(r'\b[Ii]ssues?\s*#?\s*[0-9]+\b'
                   r'|(?<![\w$&#{/])#[0-9]+\b'
                   r'|github\.com/[\w.-]+/[\w.-]+/(?:issues|pull)/[0-9]+')


def findings_in_text(text):
    """Yields (token, kind) for every commit-like token and issue reference in `text`."""
    text = FLOAT.sub(' ', UUID.sub(' ', text))
    for m in HEX.finditer(text):
        yield m.group(0), 'commit'
    for m in ISSUE.finditer(text):
        yield m.group(0), 'issue'


def c_like_spans(source):
    """Yields (line, text) for each comment and string literal of C, C++ or proto `source`.

    A small scanner, not a parser: it knows // and /* */ comments, "..." and '...' literals with
    backslash escapes, and C++ raw strings R"delim(...)delim"."""
    i, line, n = 0, 1, len(source)
    while i < n:
        c = source[i]
        if c == '\n':
            line += 1
            i += 1
        elif source.startswith('//', i):
            end = source.find('\n', i)
            end = n if end < 0 else end
            yield line, source[i:end]
            i = end
        elif source.startswith('/*', i):
            end = source.find('*/', i + 2)
            end = n if end < 0 else end + 2
            yield from _split_lines(line, source[i:end])
            line += source.count('\n', i, end)
            i = end
        elif c == 'R' and source.startswith('"', i + 1) and (i == 0 or not _word(source[i - 1])):
            open_paren = source.find('(', i + 2)
            delim = source[i + 2:open_paren] if open_paren >= 0 else ''
            end = source.find(')' + delim + '"', open_paren)
            end = n if open_paren < 0 or end < 0 else end + len(delim) + 2
            yield from _split_lines(line, source[i:end])
            line += source.count('\n', i, end)
            i = end
        elif c in '"\'':
            j = i + 1
            while j < n and source[j] != c and source[j] != '\n':
                j += 2 if source[j] == '\\' else 1
            end = min(j + 1, n)
            yield line, source[i:end]
            i = end
        else:
            i += 1


def _word(ch):
    return ch.isalnum() or ch == '_'


def _split_lines(first_line, text):
    for k, part in enumerate(text.split('\n')):
        yield first_line + k, part


def python_spans(source):
    """Yields (line, text) for each comment and string token of Python `source`; all lines when
    the file does not tokenize."""
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type in (tokenize.COMMENT, tokenize.STRING):
                yield from _split_lines(tok.start[0], tok.string)
    except (tokenize.TokenError, SyntaxError, IndentationError):
        yield from _split_lines(1, source)


def spans(path, source, code):
    """The (line, text) pieces of `source` to scan: comments and strings of code, else lines."""
    if code and path.endswith(C_LIKE):
        return c_like_spans(source)
    if code and path.endswith('.py'):
        return python_spans(source)
    return _split_lines(1, source)


def files_under(root, rel_paths, use_git):
    """Files (relative to root) under rel_paths that exist: git-tracked ones when use_git."""
    present = [p for p in rel_paths if os.path.exists(os.path.join(root, p))]
    if not present:
        return []
    if use_git:
        try:
            out = subprocess.run(['git', '-C', root, 'ls-files', '-z', '--', *present],
                                 check=True, capture_output=True).stdout
            return sorted(f for f in out.decode().split('\0') if f)
        except (OSError, subprocess.CalledProcessError):
            pass
    result = []
    for p in present:
        full = os.path.join(root, p)
        if os.path.isfile(full):
            result.append(p)
            continue
        for dirpath, dirnames, filenames in os.walk(full):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith('.'))
            for f in sorted(filenames):
                result.append(os.path.relpath(os.path.join(dirpath, f), root))
    return result


def scan(root, code_only=False):
    """Returns the findings under `root` as sorted (path, line, token, kind) tuples."""
    use_git = os.path.exists(os.path.join(root, '.git'))
    targets = [(f, True) for f in files_under(root, CODE_PATHS, use_git)]
    if not code_only:
        targets += [(f, False) for f in files_under(root, DOC_PATHS, use_git) if f.endswith('.md')]
    allowed = {(path, token) for path, token, _ in ALLOWED}
    allowed |= {(SELF, token) for _, token, _ in ALLOWED}  # the list itself
    found = []
    for rel, code in targets:
        full = os.path.join(root, rel)
        if not os.path.isfile(full) or os.path.getsize(full) > TEXT_LIMIT:
            continue
        try:
            with open(full, encoding='utf-8') as f:
                source = f.read()
        except (UnicodeDecodeError, OSError):
            continue  # binary
        for line, text in spans(rel, source, code):
            for token, kind in findings_in_text(text):
                if (rel, token) not in allowed:
                    found.append((rel, line, token, kind))
    return sorted(set(found))


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--code-only', action='store_true',
                        help='scan production code only, not README.md and docs/')
    parser.add_argument('--root', default=os.path.dirname(os.path.dirname(
        os.path.dirname(os.path.abspath(__file__)))), help='the checkout to scan')
    args = parser.parse_args(argv)
    if not os.path.isdir(args.root):
        print(f'check_provenance: no folder {args.root}', file=sys.stderr)
        return 2
    found = scan(args.root, args.code_only)
    for path, line, token, kind in found:
        print(f'{path}:{line}: {token} ({kind})')
    what = 'production code' if args.code_only else 'README.md, docs and production code'
    if found:
        print(f'check_provenance: {len(found)} commit hash(es) or issue reference(s) in {what}; '
              'cite a docs/ file or a paper instead (docs/reports/ keeps provenance)',
              file=sys.stderr)
        return 1
    print(f'check_provenance: no commit hash or issue reference in {what}')
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
