#!/usr/bin/env python3
"""The docs name only files and functions that exist: every `path/File.ext` quoted in README.md,
docs/*.md and rpc/README.md is a file of the tree (or one CMake generates), and every quoted
`Class::member` or `function()` is a name the code has, and every link between the docs reaches
a file and, with an #anchor, a heading. A renamed file or function then fails
here instead of leaving the architecture doc describing code that is gone.
Usage: docs_names_test.py SOURCE_DIR"""
import glob
import os
import re
import subprocess
import sys

root = sys.argv[1]
os.chdir(root)
try:
    tracked = subprocess.check_output(["git", "ls-files"], text=True,
                                      stderr=subprocess.DEVNULL).split()
except (OSError, subprocess.CalledProcessError):  # not a git checkout: every file but the builds
    tracked = [os.path.relpath(os.path.join(d, f)) for d, _, names in os.walk(".")
               if not d.startswith(("./build", "./.git")) for f in names]
files = set(tracked)
code = "\n".join(open(f, errors="ignore").read() for f in tracked
                 if f.endswith((".hpp", ".cpp", ".h", ".c", ".py", ".cu")))
cmake = "\n".join(open(f, errors="ignore").read() for f in tracked
                  if f.endswith(("CMakeLists.txt", ".cmake")))
# What the build writes: configure_file's and file(GENERATE)'s outputs.
generated = set(os.path.basename(path) for path in re.findall(
    r"(?:configure_file\(\s*\S+|GENERATE\s+OUTPUT)\s+([^\s)]+)", cmake))
# Names of the libraries beneath us that a doc may quote, where our code need not say them.
external = ("std::", "basic_string::")
docs = ["README.md", "rpc/README.md"] + sorted(glob.glob("docs/*.md"))

def file_exists(path):
    path = path.lstrip("./")
    if path in files or any(f.endswith("/" + path) for f in files):
        return True
    return os.path.basename(path) in generated

def name_exists(name):
    return re.search(r"\b" + re.escape(name) + r"\b", code) is not None

wrong = []
checked = 0
for doc in docs:
    for number, line in enumerate(open(doc), 1):
        for quoted in re.findall(r"`([^`]+)`", line):
            quoted = quoted.strip()
            m = re.fullmatch(r"([A-Za-z0-9_./-]+?)\.(hpp|cpp|h|c|py|sh|cmake)(/\.(?:cpp|c))?(?::\d+)?",
                             quoted)
            if m:
                checked += 1
                paths = [m.group(1) + "." + m.group(2)]
                if m.group(3):
                    paths.append(m.group(1) + m.group(3)[1:])
                for path in paths:
                    if not file_exists(path):
                        wrong.append(f"{doc}:{number}: no file {path}")
                continue
            m = re.fullmatch(r"([A-Za-z_][A-Za-z0-9_]*(?:::[A-Za-z_~][A-Za-z0-9_]*)+)(?:\(.*\))?",
                             quoted)
            if m and not m.group(1).startswith(external):
                checked += 1
                if not name_exists(m.group(1).split("::")[-1]):
                    wrong.append(f"{doc}:{number}: no name {m.group(1)} in the code")
                continue
            m = re.fullmatch(r"([a-z_][A-Za-z0-9_]*)\(\)", quoted)
            if m:
                checked += 1
                if not name_exists(m.group(1)):
                    wrong.append(f"{doc}:{number}: no function {m.group(1)} in the code")

def anchors(path):
    """The #anchors of a markdown file's headings, as GitHub makes them."""
    result = set()
    for line in open(path, errors="ignore"):
        m = re.match(r"#+\s+(.*?)\s*$", line)
        if m:
            slug = re.sub(r"[^\w\- ]", "", m.group(1).lower()).replace(" ", "-")
            result.add(slug)
    return result

# Links between the docs: the file exists, and so does the heading an #anchor names.
links = 0
for doc in docs + ["docs/bench/README.md", "CHANGELOG.md"]:
    if not os.path.exists(doc):
        continue
    for number, line in enumerate(open(doc, errors="ignore"), 1):
        for target in re.findall(r"\]\(([^)\s]+)\)", line):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            path = os.path.normpath(os.path.join(os.path.dirname(doc), path)) if path else doc
            links += 1
            if not os.path.exists(path):
                wrong.append(f"{doc}:{number}: link to {target}: no file {path}")
            elif anchor and path.endswith(".md") and anchor not in anchors(path):
                wrong.append(f"{doc}:{number}: link to {target}: no heading with that anchor")
checked += links

if wrong:
    print("FAIL: the docs name what the tree does not have:")
    print("\n".join(wrong))
    sys.exit(1)
print(f"PASS: the {checked} files and names the docs quote exist")
