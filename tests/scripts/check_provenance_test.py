#!/usr/bin/env python3
"""scripts/dev/check_provenance.py on a made-up checkout: it reports commit-like tokens and issue
references in docs and in the comments and strings of code, and nothing else (identifiers, 0x
literals, UUIDs, numbers with exponents, 64-digit digests, shell's ${X#...}, the listed
exceptions, tests/ and docs/reports/); --code-only leaves the docs out; absent doc folders are
skipped. Runs under pytest or as a plain script."""
import os
import pathlib
import subprocess
import sys
import tempfile

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / 'scripts' / 'dev' / 'check_provenance.py'
SHA256_EMPTY = 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855'

# Written digits apart so that this file itself holds no finding for a scan of tests/.
HASH = 'abc' + '1234'
FILES = {
    'server/a.cc': (
        '// Why: see ' + 'issue ' + '12.\n'                      # line 1: issue
        'int abc1234f = 0xdeadbeef12;  // a UUID 123e4567-e89b-12d3-a456-426614174000\n'
        'const char* k = "built at ' + HASH + '";\n'            # line 3: commit
        '/* digest ' + SHA256_EMPTY + ', rate 1.5545285576849421e-05,\n'
        '   fixed by ' + 'fe' + 'dcba9 */\n'                    # line 5: commit
        'auto s = R"x(see ' + '#' + '41)x";\n'),               # line 6: issue
    'common/sha256.cc': 'static constexpr char kDigits[] = "0123456789abcdef";\n',
    'server/hex.cc': 'const char* t = "0123456789abcdef";\n',  # line 1: commit (not allowed here)
    'python/m.py': ('x = abc1234  # code, then a comment ' + 'cafe' + '123\n'   # line 1: commit
                    '"""Docstring, ' + 'Issue #' + '3."""\n'),                  # line 2: issue
    'scripts/s.sh': ('v=${MLP_TARGET#0.}\n'
                     'echo "see github.com/o/r/pull/' + '5"\n'),              # line 2: issue
    'README.md': 'Since ' + 'issue ' + '9 the README says so.\n',             # line 1: issue
    'docs/guides/G.md': 'Measured at ' + 'd00d' + 'f00d1.\n',                 # line 1: commit
    'docs/reports/R.md': 'Measured at ' + HASH + ' (' + 'issue ' + '4).\n',
    'tests/t.cc': '// ' + HASH + ' ' + 'issue ' + '4\n',
    'bench/b.sh': '# ' + HASH + '\n',
}
EXPECTED_CODE = [
    'python/m.py:1: ' + 'cafe' + '123 (commit)',
    'python/m.py:2: ' + 'Issue #' + '3 (issue)',
    'scripts/s.sh:2: github.com/o/r/pull/' + '5 (issue)',
    'server/a.cc:1: ' + 'issue ' + '12 (issue)',
    'server/a.cc:3: ' + HASH + ' (commit)',
    'server/a.cc:5: ' + 'fe' + 'dcba9 (commit)',
    'server/a.cc:6: ' + '#' + '41 (issue)',
    'server/hex.cc:1: 0123456789abcdef (commit)',
]
EXPECTED_DOCS = [
    'README.md:1: ' + 'issue ' + '9 (issue)',
    'docs/guides/G.md:1: ' + 'd00d' + 'f00d1 (commit)',
]


def run(root, *flags):
    result = subprocess.run([sys.executable, str(SCRIPT), '--root', root, *flags],
                            capture_output=True, text=True, check=False)
    return result.returncode, sorted(result.stdout.splitlines())


def make_checkout(root):
    for rel, text in FILES.items():
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, 'w', encoding='utf-8') as f:
            f.write(text)


def test_reports_docs_and_code():
    with tempfile.TemporaryDirectory() as root:
        make_checkout(root)
        code, lines = run(root)
        assert code == 1, lines
        assert lines == sorted(EXPECTED_CODE + EXPECTED_DOCS), lines


def test_code_only_leaves_docs_out():
    with tempfile.TemporaryDirectory() as root:
        make_checkout(root)
        code, lines = run(root, '--code-only')
        assert code == 1, lines
        assert lines == sorted(EXPECTED_CODE), lines


def test_clean_checkout_passes():
    with tempfile.TemporaryDirectory() as root:
        os.makedirs(os.path.join(root, 'server'))
        with open(os.path.join(root, 'server', 'ok.cc'), 'w', encoding='utf-8') as f:
            f.write('// The why, citing docs/ARCHITECTURE.md.\nint deadbee1 = 0x1f2e3d4c5b;\n')
        code, lines = run(root)
        assert code == 0, lines


if __name__ == '__main__':
    test_reports_docs_and_code()
    test_code_only_leaves_docs_out()
    test_clean_checkout_passes()
    print('PASS')
