#!/usr/bin/env python3
"""Check docs/architecture.md's code map ("Where the code is") against the tree, both ways.

Usage: scripts/codemap.py

Every file git tracks must be named in the map, and every path the map names must exist. In the
table's first column a path with a slash names a file and sets the directory for the bare names
after it (`shm/proc.c`, `proc.h`); a path ending in "/" names a directory whose files the second
column names, each by its path below that directory or by its last component (a name ending in
"/" there covers a whole subdirectory). Exits 1 and lists what does not match; 77 (skipped)
outside a git checkout.
"""
import fnmatch
import os
import re
import subprocess
import sys

os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
doc = open("docs/architecture.md", encoding="utf-8").read()
section = doc[doc.index("## Where the code is"):doc.index("## Layers")]
listing = subprocess.run(["git", "ls-files"], capture_output=True, text=True, check=False)
if listing.returncode != 0:
    print("codemap: not a git checkout (the tree is what git tracks): skipped", file=sys.stderr)
    sys.exit(77)
files = listing.stdout.split()
dirs = {f[:i + 1] for f in files for i, c in enumerate(f) if c == "/"}

patterns, unknown = [], []
for line in section.splitlines():
    if not line.startswith("| `"):
        continue
    cols = line.split("|")
    where = ""
    for item in re.findall(r"`([^`]+)`", cols[1]):
        if item.endswith("/"):
            if item not in dirs:
                unknown.append(item)
            for name in re.findall(r"`([^`]+)`", cols[2]):
                if name.endswith("/"):
                    patterns.append(item + "**/" + name + "*")
                    patterns.append(item + name + "*")
                elif re.fullmatch(r"[\w.+-]+(/[\w.+-]+)*", name) and "." in name:
                    patterns.append(item + "**/" + name)
                    patterns.append(item + name)
            continue
        path = item if "/" in item or not where else where + "/" + item
        if "/" in item:
            where = item.rsplit("/", 1)[0]
        if path not in files:
            unknown.append(path)
        patterns.append(path)

missing = [f for f in files if not any(fnmatch.fnmatch(f, p) for p in patterns)]
for f in missing:
    print(f"codemap: {f} is not in docs/architecture.md's code map", file=sys.stderr)
for p in unknown:
    print(f"codemap: docs/architecture.md's code map names {p}, which is not in the tree",
          file=sys.stderr)
if missing or unknown:
    sys.exit(1)
print(f"codemap: the map names every one of the {len(files)} files, and nothing else")
