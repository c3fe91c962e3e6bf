#!/usr/bin/env python3
"""The reference side of the TOML differential test: Python's tomllib (3.11+).

Usage: toml_reference.py FILE...  — prints one JSON line per file, in order:
{"records": [...]} for a document tomllib reads, {"error": "..."} for one it refuses.

The records list the value tree in document order, one per node, so key order, container
kinds and exact values are all compared while the JSON stays flat however deep the TOML is:

  [path, "table"]   [path, "array"]   [path, "string", s]   [path, "bool", b]
  [path, "integer", "<decimal>"]      [path, "float", "<IEEE 754 bits, unsigned decimal>" or "nan"]
  [path, "date-time"]   [path, "date"]   [path, "time"]

A path is a list of keys (strings) and array indices (numbers). Integers and float bits travel
as strings: JSON numbers would lose precision.
"""
import datetime
import json
import math
import struct
import sys
import tomllib


def records(value, path, out):
    if isinstance(value, dict):
        out.append([path, "table"])
        for k, v in value.items():
            records(v, path + [k], out)
    elif isinstance(value, list):
        out.append([path, "array"])
        for i, v in enumerate(value):
            records(v, path + [i], out)
    elif isinstance(value, str):
        out.append([path, "string", value])
    elif isinstance(value, bool):  # before int: bool is an int in Python
        out.append([path, "bool", value])
    elif isinstance(value, int):
        out.append([path, "integer", str(value)])
    elif isinstance(value, float):
        bits = "nan" if math.isnan(value) else str(struct.unpack("<Q", struct.pack("<d", value))[0])
        out.append([path, "float", bits])
    elif isinstance(value, datetime.datetime):  # before date: a datetime is a date
        out.append([path, "date-time"])
    elif isinstance(value, datetime.date):
        out.append([path, "date"])
    elif isinstance(value, datetime.time):
        out.append([path, "time"])
    else:
        raise TypeError(f"unexpected {type(value)}")
    return out


def main():
    sys.setrecursionlimit(10_000)
    for path in sys.argv[1:]:
        with open(path, "rb") as f:
            data = f.read()
        try:
            out = {"records": records(tomllib.loads(data.decode("utf-8")), [], [])}
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
            out = {"error": f"{type(e).__name__}: {e}"}
        print(json.dumps(out, ensure_ascii=True))


if __name__ == "__main__":
    main()
