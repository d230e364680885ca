#!/usr/bin/env bash
# Point-card benchmark: the reference's experiment on the embedded store --
# 1M cards, 10k stores, 1M history rows, 180 s per parallelism (1, 32, 64,
# 128, 192), a grant every 10 s over the initial history period -- through
# `hotrow simulate pointcard`. Writes docs/benchmarks.md (section
# "pointcard") and docs/pointcard-simulation.svg and -median.svg (the
# reference's charts 8.2.1 and 8.2.2) unless --no-docs.
#
#   bench/pointcard.sh [--duration 180s] [--parallel 1,32,64,128,192] [--no-docs]
#
# About 16 minutes with the defaults; the run databases (up to ~1.5 GB each)
# are deleted as it goes.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib/common.sh

DURATION=180s PARALLEL=1,32,64,128,192 WRITE_DOCS=1 EXTRA=()
while (($#)); do
  case $1 in
    --duration) DURATION=$2; shift 2 ;;
    --parallel) PARALLEL=$2; shift 2 ;;
    --no-docs) WRITE_DOCS=0; shift ;;
    --cards|--stores|--history) EXTRA+=("$1" "$2"); shift 2 ;;
    -h|--help) bench_usage; exit 0 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done

bench_init
OUT=bench/results/pointcard
mkdir -p "$OUT"
"$HOTROW" simulate pointcard --parallel "$PARALLEL" --duration "$DURATION" "${EXTRA[@]}" \
  --work-dir "$WORK" --out "$OUT" | tee "$OUT/simulation.out"

if ((WRITE_DOCS)); then
  cp "$OUT/simulation.svg" docs/pointcard-simulation.svg
  cp "$OUT/simulation-median.svg" docs/pointcard-simulation-median.svg
  section="$WORK/section.md"
  {
    echo "Measured $(machine_line) by \`bench/pointcard.sh --duration $DURATION --parallel $PARALLEL\`"
    echo "(\`hotrow simulate pointcard\`, in-process, embedded SQLite store with synchronous=FULL)."
    echo
    echo '![OK/s against parallelism](pointcard-simulation.svg)'
    echo '![median of successes under 1 s against parallelism (the reference'"'"'s chart 8.2.2)](pointcard-simulation-median.svg)'
    echo
    echo '```'
    cat "$OUT/simulation.txt"
    echo '```'
  } >"$section"
  replace_section docs/benchmarks.md pointcard "$section"
  echo "wrote docs/benchmarks.md (section pointcard), docs/pointcard-simulation.svg and -median.svg"
fi
