#!/usr/bin/env python3
"""Check the man pages (man/) against their sources of truth, both ways.

Usage: tests/man_check.py SOURCE_DIR SHMSCHED_BINARY

- shmsched(1): every command `shmsched --help` lists is a subsection of COMMANDS and every one
  there is a command; in each, the options (short and long, paired) of the command's `--help`
  are exactly its .It lines' options; every option of docs/cli.md's table for the command
  appears there; every variable the code reads with getenv is under ENVIRONMENT; every exit
  code of supervisor/cli/cli.h is under EXIT STATUS.
- shmsched.conf(5): every section and key of docs/config.md's tables is an .It line, and every
  key there is in docs/config.md.
- shmsched(3): every function include/shmsched.h declares is in the SYNOPSIS (.Fo) and described
  (an .It Fn line), and every shms_ name and SHMS_ constant the page names is in the header.
Exits 1 and lists each difference.
"""
import glob
import os
import re
import subprocess
import sys

src, binary = sys.argv[1], sys.argv[2]
errors = []


def read(path):
    with open(os.path.join(src, path), encoding="utf-8") as f:
        return f.read()


def helptext(*args):
    out = subprocess.run([binary, *args], capture_output=True, text=True, check=False)
    if out.returncode != 0:
        errors.append(f"'shmsched {' '.join(args)}' exited {out.returncode}")
    return out.stdout


def block(text, title):
    """The lines after a line equal to title, up to the next blank line."""
    lines = text.splitlines()
    if title not in lines:
        return []
    rest = lines[lines.index(title) + 1:]
    return rest[:rest.index("")] if "" in rest else rest


def sections(page, macro):
    """{first word of each `.Sh`/`.Ss` title: its lines}."""
    out, name = {}, None
    for line in page.splitlines():
        if line.startswith(macro + " "):
            name = line.split()[1]
            out[name] = []
        elif line.startswith(".Sh "):
            name = None
        elif name is not None:
            out[name].append(line)
    return out


def help_options(text):
    """{(short or None, --long)} of a --help's Options block."""
    opts = set()
    for line in block(text, "Options:"):
        m = re.match(r"\s+(?:(-\w),\s*)?(--[a-z][a-z0-9-]*)", line)
        if m:
            opts.add((m.group(1), m.group(2)))
    return opts


def item_options(lines):
    """{(short or None, --long)} of the .It lines of a subsection's option lists."""
    opts = set()
    for line in lines:
        if line.startswith(".It Fl "):
            flags = re.findall(r"Fl (-?[\w-]+)", line)
            longs = [f for f in flags if f.startswith("-")]
            shorts = ["-" + f for f in flags if not f.startswith("-")]
            for lg in longs:
                opts.add((shorts[0] if shorts else None, "-" + lg))
    return opts


# ---- shmsched(1) ----------------------------------------------------------------------------
page1 = read("man/shmsched.1")
sh1 = sections(page1, ".Sh")
top_help = helptext("--help")
commands = {m.group(1) for line in block(top_help, "Commands:")
            if (m := re.match(r"  ([a-z]+)\b", line))}
subs = sections("\n".join(sh1.get("COMMANDS", [])), ".Ss")
for c in sorted(commands - set(subs)):
    errors.append(f"shmsched.1: command '{c}' (shmsched --help) has no subsection in COMMANDS")
for c in sorted(set(subs) - commands):
    errors.append(f"shmsched.1: subsection '{c}' is not a command of shmsched --help")
for s, lg in sorted(help_options(top_help) ^ item_options(sh1.get("DESCRIPTION", [])), key=str):
    errors.append(f"shmsched.1: option {s + ', ' if s else ''}{lg} is in one of "
                  "'shmsched --help' and DESCRIPTION's list, not the other")
for c in sorted(commands & set(subs) - {"help"}):  # help --help is the list of commands
    text = helptext(c, "--help")
    want = help_options(text)
    have = item_options(subs[c])
    if not text.startswith(f"Usage: shmsched {c} "):
        # A command whose help is another's page (resume: drain's): only what it takes.
        want &= have
    for s, lg in sorted(want - have, key=str):
        errors.append(f"shmsched.1: {c}: option {s + ', ' if s else ''}{lg} of "
                      f"'shmsched {c} --help' is not an .It line of its subsection")
    for s, lg in sorted(have - want, key=str):
        errors.append(f"shmsched.1: {c}: option {s + ', ' if s else ''}{lg} is not in "
                      f"'shmsched {c} --help'")

# docs/cli.md: each `## shmsched X` section's option table.
cli = read("docs/cli.md")
documented_commands = set()
for m in re.finditer(r"^## `shmsched ([a-z]+)`\n(.*?)(?=^## |\Z)", cli, re.M | re.S):
    c, body = m.group(1), m.group(2)
    documented_commands.add(c)
    if c not in subs:
        errors.append(f"shmsched.1: docs/cli.md's command '{c}' has no subsection")
        continue
    text = "\n".join(subs[c])
    for row in re.findall(r"^\| `(-[^|]*)\|", body, re.M):
        for lg in re.findall(r"--([a-z][a-z0-9-]*)", row):
            if not re.search(r"Fl -" + re.escape(lg) + r"\b", text):
                errors.append(f"shmsched.1: {c}: docs/cli.md's option --{lg} is not in "
                              "its subsection")

# resume is told in drain's section (as its --help is drain's).
for c in sorted(commands - documented_commands - {"resume"}):
    errors.append(f"docs/cli.md: command '{c}' has no '## `shmsched {c}`' section to check against")

env = "\n".join(sh1.get("ENVIRONMENT", []))
for d in ("shm", "client", "supervisor", "worker", "core"):
    # supervisor/ keeps its files in rooms (supervisor/cli/, supervisor/run/, ...).
    for f in glob.glob(os.path.join(src, d, "**", "*.c"), recursive=True):
        with open(f, encoding="utf-8") as fh:
            for var in sorted(set(re.findall(r'getenv\("([A-Z_]+)"\)', fh.read()))):
                if not re.search(r"^\.It Ev " + var + r"$", env, re.M):
                    errors.append(f"shmsched.1: {os.path.relpath(f, src)} reads {var}, "
                                  "which ENVIRONMENT does not list")
status = "\n".join(sh1.get("EXIT", []))
for code in re.findall(r"CLI_EXIT_\w+ = (\d+)", read("supervisor/cli/cli.h")):
    if not re.search(r"^\.It " + code + r"$", status, re.M):
        errors.append(f"shmsched.1: exit code {code} (supervisor/cli/cli.h) is not in EXIT STATUS")

# ---- shmsched.conf(5) -----------------------------------------------------------------------
page5 = read("man/shmsched.conf.5")
config = read("docs/config.md")
fields = config[config.index("## Fields"):config.index("## Tenants and identities")]
keys = set(re.findall(r"^\| `([a-z-]+)` \|", fields, re.M))
ini = config[config.index("## The INI file"):]
heads = set(re.findall(r"^- `\[([a-z]+)[ \]]", ini, re.M))
# The keys of [tenant NAME] and [team NAME], as their bullets name them: "`weight` (1..1000)".
for bullet in re.findall(r"^- `\[(?:tenant|team) NAME\]` holds (.*?)(?=^- )", ini, re.M | re.S):
    keys |= set(re.findall(r"`([a-z-]+)` \(", bullet))
items5 = set(re.findall(r"^\.It Cm ([a-z-]+)", page5, re.M))
heads5 = set(re.findall(r"^\.It Ic \[([a-z]+)", page5, re.M))
for k in sorted(keys - items5):
    errors.append(f"shmsched.conf.5: key '{k}' of docs/config.md is not an .It Cm line")
for k in sorted(items5 - keys):
    errors.append(f"shmsched.conf.5: key '{k}' is not in docs/config.md")
for h in sorted(heads ^ heads5):
    errors.append(f"shmsched.conf.5: section [{h}] is in one of docs/config.md's INI file and "
                  "the page's .It Ic lines, not the other")

# ---- shmsched(3) ----------------------------------------------------------------------------
page3 = read("man/shmsched.3")
declared = set(re.findall(r"^SHMS_EXTERN\b[^;]*?\b(shms_\w+)\(", read("include/shmsched.h"),
                          re.M | re.S))
documented = set(re.findall(r"^\.F[no] (shms_\w+)", page3, re.M))
described = set(re.findall(r"^\.It Fn (shms_\w+)$", page3, re.M))
named = set(re.findall(r"\b(shms_[a-z0-9_]+)\b", page3))
for f in sorted(declared - described):
    errors.append(f"shmsched.3: {f} (include/shmsched.h) has no .It Fn entry in DESCRIPTION")
for f in sorted(declared - documented):
    errors.append(f"shmsched.3: {f} (include/shmsched.h) is not documented (.Fn or .Fo)")
in_header = set(re.findall(r"\b(shms_[a-z0-9_]+)\b", read("include/shmsched.h")))
for f in sorted(named - in_header):
    errors.append(f"shmsched.3: names {f}, which include/shmsched.h does not have")

for k in sorted(set(re.findall(r"\b(SHMS_[A-Z0-9_]+)\b(?!\*)", page3)) - set(
        re.findall(r"\b(SHMS_[A-Z0-9_]+)\b", read("include/shmsched.h")))):
    errors.append(f"shmsched.3: names {k}, which include/shmsched.h does not have")

for e in errors:
    print("man_check: " + e, file=sys.stderr)
sys.exit(1 if errors else 0)
