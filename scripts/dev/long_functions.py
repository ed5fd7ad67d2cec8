#!/usr/bin/env python3
"""Lists functions whose bodies run over N lines (default 80) in our C++ sources.

A textual check, not a parser: a function opens with a line at indent 0 or 2 that ends in '{'
after a ')' (not if/for/while/switch/namespace/class/struct) and closes at the '}' of the same
indent; its length counts from the first line of its signature. Lambdas count toward the
function that holds them.

Usage: python3 scripts/dev/long_functions.py [N] [DIR...]   (default dirs: server client sim
secagg common). Exits 1 when it lists any function, 0 otherwise.
"""
import os
import re
import sys

OPEN = re.compile(r'^(\s*)\S.*\)\s*(const)?\s*(override)?\s*(->.*)?\{\s*$')
NOT_FUNCTION = re.compile(r'^\s*(if|for|while|switch|else|do|namespace|class|struct)\b')


def long_functions(path, limit):
    lines = open(path, errors='ignore').read().split('\n')
    i = 0
    while i < len(lines):
        m = OPEN.match(lines[i])
        if m and not NOT_FUNCTION.match(lines[i]) and len(m.group(1)) <= 2:
            indent = m.group(1)
            j = i + 1
            while j < len(lines) and lines[j] != indent + '}' and \
                    not lines[j].startswith(indent + '};'):
                j += 1
            start = i
            while start > 0 and lines[start - 1].strip() and \
                    not lines[start - 1].strip().endswith((';', '}', '{')) and \
                    not lines[start - 1].lstrip().startswith('//'):
                start -= 1
            if j - start + 1 > limit:
                yield start + 1, j - start + 1, lines[start].strip()[:70]
            i = j
        i += 1


def main(argv):
    limit = int(argv[1]) if len(argv) > 1 and argv[1].isdigit() else 80
    dirs = [a for a in argv[1:] if not a.isdigit()] or ['server', 'client', 'sim', 'secagg',
                                                        'common']
    found = 0
    for root in dirs:
        for dirpath, _, files in os.walk(root):
            for name in sorted(files):
                if name.endswith(('.cc', '.h', '.inc')):
                    path = os.path.join(dirpath, name)
                    for line, length, text in long_functions(path, limit):
                        print(f'{path}:{line}: {length} lines: {text}')
                        found += 1
    return 1 if found else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
