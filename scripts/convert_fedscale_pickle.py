#!/usr/bin/env python3
"""Converts FedScale's pickled device traces to fedsched's CSV / JSON Lines trace formats.

FedScale (Lai et al., ICML 2022) ships two pickles (docs/ALGORITHMS.md §7):
  client_device_capacity: {client_id: {"computation": ms/sample, "communication": kbit/s}}
      (values are numpy float64 scalars)
  client_behave_trace:    {client_id: {"active": [s], "inactive": [s], "finish_time": s,
                                        "duration": s, "model": str}}

Python 3 standard library only: a restricted Unpickler resolves exactly the two numpy globals
these files reference (numpy.core.multiarray.scalar and numpy.dtype) to small stand-ins that
decode the scalar's raw bytes with `struct`, so numpy is never imported and no other global
(hence no arbitrary code) can be loaded.

Usage:
  convert_fedscale_pickle.py INPUT.pkl --out OUT.{csv,jsonl} [--kind auto|capacity|availability]
                             [--windows-out WINDOWS.csv]
Capacity CSV:       client_id,computation_ms_per_sample,communication_kbps
Capacity JSONL:     {"client_id", "computation", "communication"}
Availability CSV:   OUT = client_id,model,duration_s,finish_time_s,n_windows,active_fraction
                    WINDOWS = client_id,window_idx,active_start_s,active_end_s,length_s
Availability JSONL: {"client_id", "model", "duration", "finish_time", "active", "inactive"}
Exit status 0 on success, 1 on a malformed file (message on stderr naming the file).
"""

import argparse
import io
import json
import math
import pickle
import struct
import sys

# numpy dtype names -> struct codes, for the scalars FedScale's files hold.
_STRUCT_CODES = {
    "f8": "d", "f4": "f", "f2": "e", "i8": "q", "i4": "i", "i2": "h", "i1": "b",
    "u8": "Q", "u4": "I", "u2": "H", "u1": "B", "b1": "?",
}


class _DType:
    """Stand-in for numpy.dtype: remembers the type name and byte order."""

    def __init__(self, name, align=False, copy=False):
        self.name = str(name)
        self.order = "<"

    def __setstate__(self, state):
        # numpy pickles dtype state as (version, byteorder, ...).
        if isinstance(state, tuple) and len(state) > 1 and state[1] in ("<", ">"):
            self.order = state[1]


def _scalar(dtype, data=None):
    """Stand-in for numpy.core.multiarray.scalar: decodes raw bytes to a Python number."""
    if not isinstance(dtype, _DType):
        raise pickle.UnpicklingError("scalar() without a dtype")
    code = _STRUCT_CODES.get(dtype.name.lstrip("<>=|"))
    if code is None or not isinstance(data, (bytes, bytearray)):
        raise pickle.UnpicklingError("unsupported numpy scalar dtype %r" % dtype.name)
    (value,) = struct.unpack(dtype.order + code, bytes(data))
    return float(value) if code in "dfe" else int(value)


class _RestrictedUnpickler(pickle.Unpickler):
    _ALLOWED = {
        ("numpy.core.multiarray", "scalar"): _scalar,
        ("numpy._core.multiarray", "scalar"): _scalar,
        ("numpy", "dtype"): _DType,
    }

    def find_class(self, module, name):
        try:
            return self._ALLOWED[(module, name)]
        except KeyError:
            raise pickle.UnpicklingError("global %s.%s is not allowed" % (module, name))


def load(path):
    with open(path, "rb") as f:
        return _RestrictedUnpickler(io.BytesIO(f.read())).load()


def _num(value, what):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError("%s is not a finite number: %r" % (what, value))
    return value


def _fmt(value):
    return repr(float(value)) if isinstance(value, float) else str(value)


def detect_kind(data):
    for entry in data.values():
        if isinstance(entry, dict) and "computation" in entry:
            return "capacity"
        if isinstance(entry, dict) and "active" in entry:
            return "availability"
    raise ValueError("neither a capacity nor an availability trace")


def convert_capacity(data, out_path):
    jsonl = out_path.endswith(".jsonl")
    with open(out_path, "w") as out:
        if not jsonl:
            out.write("client_id,computation_ms_per_sample,communication_kbps\n")
        for cid in sorted(data):
            e = data[cid]
            comp = _num(e.get("computation"), "client %s computation" % cid)
            comm = _num(e.get("communication"), "client %s communication" % cid)
            if jsonl:
                out.write(json.dumps({"client_id": cid, "computation": comp,
                                      "communication": comm}) + "\n")
            else:
                out.write("%s,%s,%s\n" % (cid, _fmt(comp), _fmt(comm)))


def convert_availability(data, out_path, windows_path):
    jsonl = out_path.endswith(".jsonl")
    if not jsonl and not windows_path:
        raise ValueError("availability to CSV needs --windows-out")
    with open(out_path, "w") as out:
        win = None if jsonl else open(windows_path, "w")
        try:
            if win:
                out.write("client_id,model,duration_s,finish_time_s,n_windows,active_fraction\n")
                win.write("client_id,window_idx,active_start_s,active_end_s,length_s\n")
            for cid in sorted(data):
                e = data[cid]
                active = [_num(v, "client %s active" % cid) for v in e.get("active", [])]
                inactive = [_num(v, "client %s inactive" % cid) for v in e.get("inactive", [])]
                if len(active) != len(inactive):
                    raise ValueError("client %s: %d active but %d inactive entries"
                                     % (cid, len(active), len(inactive)))
                finish = _num(e.get("finish_time"), "client %s finish_time" % cid)
                duration = _num(e.get("duration", sum(b - a for a, b in zip(active, inactive))),
                                "client %s duration" % cid)
                model = str(e.get("model", ""))
                if jsonl:
                    out.write(json.dumps({"client_id": cid, "model": model, "duration": duration,
                                          "finish_time": finish, "active": active,
                                          "inactive": inactive}) + "\n")
                    continue
                if "," in model or '"' in model:
                    model = '"' + model.replace('"', '""') + '"'
                on = sum(b - a for a, b in zip(active, inactive))
                out.write("%s,%s,%s,%s,%d,%r\n" % (cid, model, _fmt(duration), _fmt(finish),
                                                      len(active),
                                                      round(on / finish, 6) if finish else 0.0))
                for k, (a, b) in enumerate(zip(active, inactive)):
                    win.write("%s,%d,%s,%s,%s\n" % (cid, k, _fmt(a), _fmt(b), _fmt(b - a)))
        finally:
            if win:
                win.close()


def main(argv):
    p = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        # The docstring's format table and exit status, after "Capacity CSV:".
        epilog="output formats:\nCapacity CSV:" + __doc__.split("Capacity CSV:", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("input", metavar="INPUT.pkl",
                   help="one of FedScale's pickles: client_device_capacity (per-client compute "
                        "ms/sample and bandwidth kbit/s) or client_behave_trace (per-client "
                        "active/inactive times in seconds)")
    p.add_argument("--out", required=True, metavar="OUT.{csv,jsonl}",
                   help="file to write; the extension picks the format: .csv (fedsched's CSV "
                        "trace) or .jsonl (JSON Lines, one client per line)")
    p.add_argument("--kind", choices=["auto", "capacity", "availability"], default="auto",
                   help="which pickle INPUT is; auto (default) tells them apart by their keys "
                        "(computation/communication vs active/inactive)")
    p.add_argument("--windows-out", metavar="WINDOWS.csv",
                   help="availability only, with a .csv OUT: also write one row per active "
                        "window (client_id,window_idx,active_start_s,active_end_s,length_s)")
    args = p.parse_args(argv)
    try:
        data = load(args.input)
        if not isinstance(data, dict):
            raise ValueError("top level is %s, expected a dict" % type(data).__name__)
        kind = detect_kind(data) if args.kind == "auto" else args.kind
        if kind == "capacity":
            convert_capacity(data, args.out)
        else:
            convert_availability(data, args.out, args.windows_out)
    except (OSError, ValueError, pickle.UnpicklingError, EOFError, struct.error) as e:
        sys.stderr.write("%s: %s\n" % (args.input, e))
        return 1
    sys.stderr.write("%s: %d %s rows -> %s\n" % (args.input, len(data), kind, args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
