#!/usr/bin/env python3
"""Writes a generated section into a Markdown file between <!-- NAME:start --> and
<!-- NAME:end -->, leaving the rest alone; appended at the end the first time.
Usage: doc-section.py FILE NAME TEXT (TEXT includes both markers). Used by bench.sh, bench-board.sh."""
import re
import sys

path, name, section = sys.argv[1:4]
text = open(path).read()
start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
if start in text:
    text = re.sub(re.escape(start) + ".*?" + re.escape(end), lambda m: section, text, flags=re.S)
else:
    text = text.rstrip("\n") + "\n\n" + section + "\n"
open(path, "w").write(text)
