#!/usr/bin/env python3
"""Writes docs/reference/CONFIG.md, the config reference, from the config protos' comments.

Every message and enum of proto/fedsched/v1/config.proto, and every one the server, client,
simulator and job files reach from their root messages (ServerConfig, ClientConfig, SimConfig,
JobSpec, JobTrace), gets a section: each field's name, type, default and comment, each enum's
values. protoc compiles the protos with their comments (--include_source_info
--descriptor_set_out); Python's protobuf module (Debian's python3-protobuf) reads the result.
A field's default is the text after "Default:" in its comment; a field of JobSpec without a
comment has the meaning and default of the ServerConfig field of the same name.

Usage: gen_config_reference.py [--out FILE] [--check] [--protoc PROTOC]
  --out FILE   where to write (default: ROOT/docs/reference/CONFIG.md)
  --check      write nothing; exit 1 if FILE differs from what would be written (the CTest
               config_reference_test), naming the command that regenerates it
Run by another python3 than Debian's /usr/bin/python3 (which python3-protobuf belongs to), the
script runs itself again with /usr/bin/python3 when its own interpreter lacks the module.
Exit status 0 on success, 1 when --check finds FILE stale, 2 when protoc fails, 77 when protoc
or the protobuf module is missing (the message says which).
"""

import argparse
import os
import re
import shutil
import subprocess
import sys

from generated_doc import check_or_write
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROTO_DIR = os.path.join(ROOT, "proto")
# The protos whose messages config files hold, and the roots: (message, what reads it).
FILES = ["fedsched/v1/config.proto", "fedsched/v1/sim.proto", "fedsched/v1/jobs.proto"]
ROOTS = [
    ("ServerConfig", "`fedsched-server --config` (a flat server, a root or an aggregator: "
     "`configs/server.textproto`, `configs/aggregator.textproto`)"),
    ("ClientConfig", "`fedsched-client --config` and the SDK's `ClientOptions.config` "
     "(`configs/client.textproto`)"),
    ("SimConfig", "`fedsched-sim --config` (`configs/sim/*.textproto`)"),
    ("JobSpec", "`fedsched-ctl submit FILE` (`configs/jobs/*.textproto`)"),
    ("JobTrace", "`SimConfig.job_trace_path`, a simulated job trace"),
]
# A JobSpec field without a comment means what the ServerConfig field of its name means.
INHERITS = {"JobSpec": "ServerConfig"}
PACKAGE = "fedsched.v1"
DEBIAN_PYTHON = "/usr/bin/python3"
MISSING = 77  # CTest's SKIP_RETURN_CODE: the machine lacks protoc or python3-protobuf
DEFAULT = re.compile(r"Default(?: \([^)]*\))?:\s*(.*?)(?:\.(?:\s|$)|$)")
SCALARS = {1: "double", 2: "float", 3: "int64", 4: "uint64", 5: "int32", 6: "fixed64",
           7: "fixed32", 8: "bool", 9: "string", 12: "bytes", 13: "uint32", 15: "sfixed32",
           16: "sfixed64", 17: "sint32", 18: "sint64"}
TYPE_MESSAGE, TYPE_ENUM, LABEL_REPEATED = 11, 14, 3


def compile_protos(protoc):
    """Returns the FileDescriptorSet of FILES with source info, or exits 2 naming the problem."""
    try:
        from google.protobuf import descriptor_pb2
    except ImportError:
        # Debian's python3-protobuf belongs to /usr/bin/python3; another python3 on PATH (pyenv,
        # a venv without system site packages) lacks it: run this script with Debian's.
        if os.path.exists(DEBIAN_PYTHON) and os.path.realpath(sys.executable) != \
                os.path.realpath(DEBIAN_PYTHON) and not os.environ.get("FEDSCHED_GEN_REEXEC"):
            os.environ["FEDSCHED_GEN_REEXEC"] = "1"
            os.execv(DEBIAN_PYTHON, [DEBIAN_PYTHON] + sys.argv)
        print("gen_config_reference: Python's protobuf module is missing (apt-get install "
              "python3-protobuf; scripts/install_deps.sh installs it)", file=sys.stderr)
        sys.exit(MISSING)
    if not shutil.which(protoc):
        print("gen_config_reference: %s not found (apt-get install protobuf-compiler)" % protoc,
              file=sys.stderr)
        sys.exit(MISSING)
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "config.pb")
        done = subprocess.run([protoc, "--include_source_info", "--include_imports",
                               "--descriptor_set_out=" + out, "-I" + PROTO_DIR, "-I/usr/include"]
                              + FILES, capture_output=True, text=True)
        if done.returncode != 0:
            sys.exit("gen_config_reference: protoc failed:\n" + done.stderr)
        fds = descriptor_pb2.FileDescriptorSet()
        with open(out, "rb") as f:
            fds.ParseFromString(f.read())
    return fds


def clean(comment):
    """A comment's lines joined into one paragraph."""
    return " ".join(line.strip() for line in comment.strip().splitlines() if line.strip())


class Index:
    """Every message and enum of the package by full name, with their comments."""

    def __init__(self, fds):
        # order: (file, line, full name) of every type, sorted into declaration order below.
        self.messages, self.enums, self.comments, self.order = {}, {}, {}, []
        for f in fds.file:
            if f.package != PACKAGE:
                continue
            docs, self.lines = {}, {}
            for loc in f.source_code_info.location:
                self.lines[(f.name,) + tuple(loc.path)] = loc.span[0]
                text = clean(loc.leading_comments + " " + loc.trailing_comments)
                if text:
                    docs[tuple(loc.path)] = text
            for i, m in enumerate(f.message_type):
                self.add_message(f.name, m, "." + PACKAGE, (4, i), docs)
            for i, e in enumerate(f.enum_type):
                self.add_enum(f.name, e, "." + PACKAGE, (5, i), docs)
        self.order = [name for _, _, name in sorted(self.order)]

    def add_message(self, file, m, scope, path, docs):
        name = scope + "." + m.name
        self.messages[name] = (file, m)
        self.order.append((file, self.lines.get((file,) + path, 0), name))
        self.comments[name] = docs.get(path, "")
        for i, field in enumerate(m.field):
            self.comments[name + "#" + field.name] = docs.get(path + (2, i), "")
        for i, nested in enumerate(m.nested_type):
            self.add_message(file, nested, name, path + (3, i), docs)
        for i, e in enumerate(m.enum_type):
            self.add_enum(file, e, name, path + (4, i), docs)

    def add_enum(self, file, e, scope, path, docs):
        name = scope + "." + e.name
        self.enums[name] = (file, e)
        self.order.append((file, self.lines.get((file,) + path, 0), name))
        self.comments[name] = docs.get(path, "")
        for i, v in enumerate(e.value):
            self.comments[name + "#" + v.name] = docs.get(path + (2, i), "")

    def reachable(self):
        """Full names of config.proto's types and of every type the roots reach, in file and
        declaration order (roots first)."""
        seen, stack = set(), ["." + PACKAGE + "." + r for r, _ in ROOTS]
        for name in self.order:
            if self.file_of(name) == FILES[0]:
                stack.append(name)
        while stack:
            name = stack.pop()
            if name in seen or (name not in self.messages and name not in self.enums):
                continue
            seen.add(name)
            if name in self.messages:
                m = self.messages[name][1]
                stack += [f.type_name for f in m.field if f.type_name]
        roots = ["." + PACKAGE + "." + r for r, _ in ROOTS]
        rest = [n for n in self.order if n in seen and n not in roots and not self.is_map(n)]
        return roots + rest

    def file_of(self, name):
        return (self.messages.get(name) or self.enums.get(name))[0]

    def is_map(self, name):
        return name in self.messages and self.messages[name][1].options.map_entry


def short(name):
    return name[len(PACKAGE) + 2:]


def anchor(name):
    return re.sub(r"[^a-z0-9_-]", "", short(name).lower())


def cell(text):
    return text.replace("|", "\\|") if text else ""


def type_text(index, field):
    if field.type in (TYPE_MESSAGE, TYPE_ENUM):
        if index.is_map(field.type_name):
            key, value = index.messages[field.type_name][1].field
            return "map<%s, %s>" % (type_text(index, key), type_text(index, value))
        text = "[%s](#%s)" % (short(field.type_name), anchor(field.type_name))
    else:
        text = SCALARS.get(field.type, "?")
    return ("repeated " + text) if field.label == LABEL_REPEATED else text


def field_rows(index, name):
    m = index.messages[name][1]
    parent = INHERITS.get(m.name)
    rows = []
    for field in m.field:
        comment = index.comments[name + "#" + field.name]
        if not comment and parent:
            parent_name = "." + PACKAGE + "." + parent
            if any(f.name == field.name for f in index.messages[parent_name][1].field):
                inherited = index.comments[parent_name + "#" + field.name]
                found = DEFAULT.search(inherited)
                comment = "As [%s.%s](#%s)%s" % (parent, field.name, anchor(parent_name),
                                                  (". Default: " + found.group(1) + ".")
                                                  if found else ".")
        found = DEFAULT.search(comment)
        default = "`%s`" % found.group(1).strip("` ") if found else ""
        rows.append("| `%s` | %s | %s | %s |" % (field.name, type_text(index, field),
                                                 cell(default), cell(comment)))
    return rows


def render(index):
    out = ["# Configuration reference", "",
           "<!-- Generated by scripts/gen_config_reference.py from the comments of "
           "proto/fedsched/v1/*.proto; do not edit. -->", "",
           "Generated from the comments of `proto/fedsched/v1/config.proto`, `sim.proto` and "
           "`jobs.proto` by `python3 scripts/gen_config_reference.py` (CTest "
           "`config_reference_test` fails when this page is stale). Config files are protobuf "
           "text format: an unknown or misspelt key is an error naming the key and the line, and "
           "every binary prints its effective config at start. A field that is not set takes "
           "the default its row names; \"Default\" is empty where the comment names none (the "
           "protobuf zero value: 0, false, empty, the enum's first value).", "",
           "| File | Message | Read by |", "|---|---|---|"]
    for root, reader in ROOTS:
        full = "." + PACKAGE + "." + root
        out.append("| `%s` | [%s](#%s) | %s |" % (index.file_of(full).split("/")[-1], root,
                                                  anchor(full), reader))
    out.append("")
    names = index.reachable()
    roots, rest = names[:len(ROOTS)], names[len(ROOTS):]
    sections = [("Config files", roots)]
    for file in sorted({index.file_of(n) for n in rest},
                       key=lambda f: (FILES.index(f) if f in FILES else len(FILES), f)):
        sections.append(("Messages and enums of `%s`" % file.split("/")[-1],
                         [n for n in rest if index.file_of(n) == file]))
    for title, section in sections:
        out += ["## " + title, ""]
        for name in section:
            out += render_type(index, name)
    return "\n".join(out)


def render_type(index, name):
    """One message's or enum's section: heading, comment, table."""
    out = []
    file = index.file_of(name)
    kind = "message" if name in index.messages else "enum"
    out += ["### %s" % short(name), "", "*%s in `proto/%s`*" % (kind, file), ""]
    if index.comments[name]:
        out += [index.comments[name], ""]
    if kind == "message":
        rows = field_rows(index, name)
        if rows:
            out += ["| Field | Type | Default | Description |", "|---|---|---|---|"] + rows
        else:
            out.append("No fields.")
    else:
        out += ["| Value | Number | Description |", "|---|---|---|"]
        for v in index.enums[name][1].value:
            out.append("| `%s` | %d | %s |" % (v.name, v.number,
                                               cell(index.comments[name + "#" + v.name])))
    out.append("")
    return out


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=os.path.join(ROOT, "docs", "reference", "CONFIG.md"))
    p.add_argument("--check", action="store_true",
                   help="exit 1 if --out is not what this script writes")
    p.add_argument("--protoc", default="protoc")
    args = p.parse_args(argv)
    text = render(Index(compile_protos(args.protoc)))
    return check_or_write(
        args.out, text, args.check,
        "it does not match the comments of proto/fedsched/v1/*.proto.\n"
        "Run scripts/gen_config_reference.py (python3 scripts/gen_config_reference.py) "
        "and commit the result.")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
