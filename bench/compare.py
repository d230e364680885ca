#!/usr/bin/env python3
"""Runs one benchmark script against two hotrow binaries in alternating rounds
and prints the medians of every figure it reports, side by side.

    bench/compare.py --old OLD_BINARY [--new build/hotrow] [--rounds 5] \\
        [--out FILE.md] -- bench/dateplan.sh --duration 5s --repeat 1

Each round runs the script once per binary (HOTROW_BIN names it; the scripts
pass --no-docs so docs/benchmarks.md is not touched), old first in odd rounds
and new first in even ones, so that drift in the machine hits both alike.
Figures are read from the script's output: every "NAME ... X req/s" line
(with its "p99 Y ms" and "ratio Z" when present) and the point-card
simulator's tables (OK/s, the quiet p99 and the grant time per parallelism).
The spread column is half the range of the old build's rounds, relative to
their median: a difference inside it is noise.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys

RPS = re.compile(r"^(?P<name>.+?)\s+(?:hotrow\s+)?(?P<rps>\d+(?:\.\d+)?)\s+req/s")
P99 = re.compile(r"p99\s+(?P<v>\d+(?:\.\d+)?)\s*ms")
RATIO = re.compile(r"\|\s*ratio\s+(?P<v>\d+(?:\.\d+)?)")


def figures(text):
    """Every figure in one run's output, as {name: value}."""
    out = {}
    section = None
    prefix = ""
    for line in text.splitlines():
        if line.startswith("point-card simulation"):
            prefix = "PostgreSQL " if "PostgreSQL" in line else ""
        if line.startswith("8.1 point use"):
            section = "use"
            continue
        if line.startswith("8.2-8.5"):
            section = "latency"
            continue
        if line.startswith("8.6 point grant"):
            section = "grant"
            continue
        if line.startswith("storage") or not line.strip():
            section = None if line.startswith("storage") else section
            continue
        cols = line.split()
        if section == "use" and cols and cols[0].isdigit():
            out[f"{prefix}simulator P={cols[0]}: OK/s"] = float(cols[7])
            out[f"{prefix}simulator P={cols[0]}: NG"] = float(cols[3])
            continue
        if section == "latency" and len(cols) >= 11 and cols[0].isdigit() and cols[1] == "quiet":
            out[f"{prefix}simulator P={cols[0]}: quiet p99 ms"] = float(cols[10])
            continue
        if section == "latency" and len(cols) >= 11 and cols[0].isdigit() and cols[1] == "all":
            out[f"{prefix}simulator P={cols[0]}: max ms"] = float(cols[9])
            continue
        if section == "grant" and cols and cols[0].isdigit():
            out[f"{prefix}simulator P={cols[0]}: grant ms"] = float(cols[4])
            continue
        m = RPS.match(line)
        if not m:
            continue
        name = re.sub(r"\s+", " ", m.group("name").strip())
        out[f"{name}: req/s"] = float(m.group("rps"))
        rest = line[m.end():]
        if p := P99.search(rest):
            out[f"{name}: p99 ms"] = float(p.group("v"))
        if r := RATIO.search(rest):
            out[f"{name}: ratio to the ceiling"] = float(r.group("v"))
    return out


def run(script, binary, log):
    env = dict(os.environ, HOTROW_BIN=os.path.abspath(binary))
    args = script + (["--no-docs"] if "--no-docs" not in script else [])
    proc = subprocess.run(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    log.write(f"### {binary}: {' '.join(args)} (exit {proc.returncode})\n{proc.stdout}\n")
    log.flush()
    if proc.returncode != 0:
        sys.exit(f"{' '.join(args)} with {binary} failed (exit {proc.returncode}); see the log")
    return figures(proc.stdout)


def fmt(v):
    return f"{v:.2f}" if abs(v) < 100 else f"{v:.0f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--old", required=True, help="the old build's hotrow binary")
    ap.add_argument("--new", default="build/hotrow", help="the new build's hotrow binary")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", help="also write the table here (markdown)")
    ap.add_argument("script", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    script = a.script[1:] if a.script[:1] == ["--"] else a.script
    if not script:
        ap.error("name the benchmark script after --")
    runs = {"old": [], "new": []}
    with open(a.out + ".log" if a.out else os.devnull, "w") as log:
        for r in range(1, a.rounds + 1):
            order = ["old", "new"] if r % 2 else ["new", "old"]
            for which in order:
                print(f"round {r}/{a.rounds}: {which}", file=sys.stderr, flush=True)
                runs[which].append(run(script, a.old if which == "old" else a.new, log))
    names = [n for n in runs["old"][0] if all(n in f for f in runs["old"] + runs["new"])]
    lines = [
        f"`{' '.join(script)}`, {a.rounds} alternating rounds, medians:",
        "",
        "| figure | old | new | new/old | old spread |",
        "|---|---:|---:|---:|---:|",
    ]
    for n in names:
        old = [f[n] for f in runs["old"]]
        new = [f[n] for f in runs["new"]]
        mo, mn = statistics.median(old), statistics.median(new)
        ratio = f"{mn / mo:.2f}" if mo else "-"
        spread = f"±{(max(old) - min(old)) / mo / 2 * 100:.0f}%" if mo else "-"
        lines.append(f"| {n} | {fmt(mo)} | {fmt(mn)} | {ratio} | {spread} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
