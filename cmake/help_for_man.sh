#!/bin/sh
# Prints a fedsched tool's --help in the layout help2man reads (cmake/install_tools.cmake makes
# the man pages with it): abseil's "--flag (text); default: value;" entries, wrapped over
# several lines, become one "  --flag  text Default: value." line each; the "Flags from
# <source file>" headings and the --helpfull hint are dropped. Exits 0 (abseil's --help
# exits 1, which help2man would take for a failure).
# Usage: help_for_man.sh BINARY --help
set -u
bin=$1
shift
"$bin" "$@" 2>&1 | awk '
  function flush() {
    if (opt == "") return
    name = opt; sub(/ .*/, "", name)
    text = substr(opt, length(name) + 2)
    def = ""
    if (match(text, /; default: .*;$/)) {
      def = substr(text, RSTART + 11, RLENGTH - 12)
      text = substr(text, 1, RSTART - 1)
    }
    sub(/^\(/, "", text); sub(/\)$/, "", text)
    if (def != "" && def != "\"\"") text = text " Default: " def "."
    printf "  %s  %s\n", name, text
    opt = ""
  }
  /^  Flags from / { flush(); next }
  /^Try --helpfull/ { flush(); skip = 1 }
  skip { next }
  /^    --/ { flush(); opt = $0; sub(/^ +/, "", opt); next }
  /^      / && opt != "" { line = $0; sub(/^ +/, "", line); opt = opt " " line; next }
  { flush(); print }
  END { flush() }'
exit 0
