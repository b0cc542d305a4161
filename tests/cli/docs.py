#!/usr/bin/env python3
"""Docs cannot drift from the option tables: every swift-* command line in README.md, docs/*.md,
pipelines/ and each command's --help examples may use only options that command accepts
(its --list-options, with '_' and '-' spellings both valid). Prints one line per problem and
exits 1 if there is any. Usage: docs.py BIN_DIR FILE..."""
import re
import subprocess
import sys

bindir, files = sys.argv[1], sys.argv[2:]
known = {}


def options(cmd):
    if cmd not in known:
        out = subprocess.run([f"{bindir}/{cmd}", "--list-options"], capture_output=True,
                             text=True, check=True).stdout
        known[cmd] = {o.rstrip("=").replace("_", "-") for o in out.split()}
    return known[cmd]


def check(text, where):
    bad = 0
    # join shell continuations, then look at each command segment of each line
    text = re.sub(r"\\\n\s*", " ", text)
    for lineno, line in enumerate(text.splitlines(), 1):
        for seg in re.split(r"[|;]|&&|\$\(", line):
            # each command's words run to the next command name or the end of a `code span`
            for m in re.finditer(r"(?:^|[\s/`(])(swift-(?:download|preprocess|train|eval|export|"
                                 r"trace-analyze))\b([^`]*?)(?=swift-(?:download|preprocess|train|"
                                 r"eval|export|trace-analyze)\b|`|$)", seg):
                cmd, rest = m.group(1), m.group(2)
                for flag in re.findall(r"(?<![\w-])(--[a-zA-Z][\w-]*)", rest):
                    if flag.replace("_", "-") not in options(cmd):
                        print(f"{where}:{lineno}: {cmd} has no option {flag}")
                        bad += 1
    return bad


bad = 0
for f in files:
    bad += check(open(f, encoding="utf-8").read(), f)
for cmd in ["swift-download", "swift-preprocess", "swift-train", "swift-eval", "swift-export",
            "swift-trace-analyze"]:
    helptext = subprocess.run([f"{bindir}/{cmd}", "--help"], capture_output=True, text=True).stdout
    ex = helptext.split("Examples:", 1)
    if len(ex) == 2:
        bad += check(ex[1], f"{cmd} --help")
print(f"docs: {len(files)} files and 6 --help texts checked, {bad} problems")
sys.exit(1 if bad else 0)
