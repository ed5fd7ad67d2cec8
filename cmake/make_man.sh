#!/bin/sh
# Makes OUT.1.gz, the man page of a fedsched tool, from its --help (help2man; the page's NAME
# line is the first line of --help). WRAPPER is an executable named after the tool that prints
# its help (cmake/help_for_man.sh). Usage: make_man.sh HELP2MAN WRAPPER VERSION OUT
set -eu
help2man=$1 wrapper=$2 version=$3 out=$4
name=$("$wrapper" --help | head -n 1 | sed 's/^[^:]*: *//; s/\.$//')
"$help2man" --no-info --no-discard-stderr --section=1 --version-string="$version" \
  --source=fedsched --name="$name" --output="$out.1" "$wrapper"
gzip -9nf "$out.1"
