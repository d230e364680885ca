#!/usr/bin/env python3
"""Fails when the docs or the comments name code that does not exist.

Checked:
  - every backticked identifier in README.md and docs/*.md that looks like
    code (CamelCase, or qualified with ::, or a call `Name()`), by its last
    component;
  - every CamelCase name (two or more capitalised parts, e.g. DatePlanFollower)
    in a // comment under src/, tests/ and bench/.
A name exists when it appears as a word in the code outside comments.
Names from outside the project (libraries, products, RFC terms) are listed
in scripts/check-names.allow, one per line.
Usage: scripts/check-names.py   (exit 1 with the list of unknown names)
"""
import pathlib
import re
import sys

root = pathlib.Path(__file__).resolve().parent.parent
code_files = [p for d in ("src", "tests", "bench", "fuzz") for p in (root / d).rglob("*") if p.suffix in (".h", ".cc")]
allow = set()
allow_file = root / "scripts" / "check-names.allow"
if allow_file.exists():
    for line in allow_file.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            allow.add(line)

comment_re = re.compile(r"//(.*)$")
string_re = re.compile(r'"(?:[^"\\\n]|\\.)*"')
words = set()
comment_names = []  # (file, line, name)
camel = re.compile(r"\b([A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+)\b")
for path in code_files:
    text = path.read_text(errors="replace")
    raw_end = None  # inside a raw string: the ")delim\"" that ends it
    for n, line in enumerate(text.splitlines(), 1):
        code = line
        if raw_end is not None:
            # raw SQL/Lua strings: their text is neither code nor comment
            if raw_end not in line:
                continue
            line = code = line.split(raw_end, 1)[1]
            raw_end = None
        opened = re.search(r'R"([^(\s]*)\(', line)
        if opened and f'){opened.group(1)}"' not in line[opened.end():]:
            raw_end = f'){opened.group(1)}"'
            line = code = line[: opened.start()]
        m = comment_re.search(string_re.sub('""', line))
        if m:
            code = line[: m.start()]
            for name in camel.findall(m.group(1)):
                comment_names.append((path.relative_to(root), n, name))
        words.update(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", code))

unknown = []
for f, n, name in comment_names:
    if name not in words and name not in allow:
        unknown.append(f"{f}:{n}: {name}")

ident = re.compile(r"^~?[A-Za-z_][A-Za-z0-9_]*(::~?[A-Za-z_][A-Za-z0-9_]*)*(\(\))?$")
docs = [root / "README.md"] + sorted((root / "docs").glob("*.md"))
for doc in docs:
    for n, line in enumerate(doc.read_text().splitlines(), 1):
        for tick in re.findall(r"`([^`]+)`", line):
            if not ident.match(tick):
                continue
            looks_like_code = "::" in tick or tick.endswith("()") or camel.search(tick)
            if not looks_like_code:
                continue
            last = tick.rstrip("()").split("::")[-1].lstrip("~")
            if last not in words and tick not in allow and last not in allow:
                unknown.append(f"{doc.relative_to(root)}:{n}: `{tick}`")

if unknown:
    print("names that are not in the code (fix them, or add outside names to scripts/check-names.allow):")
    print("\n".join("  " + u for u in unknown))
    sys.exit(1)
print(f"names: {len(comment_names)} CamelCase names in comments and the docs' identifiers all exist")
