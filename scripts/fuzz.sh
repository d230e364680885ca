#!/usr/bin/env bash
# Runs every libFuzzer target (fuzz/) for a set time each, from the seed
# corpora in fuzz/corpus/ (copied: what a run adds stays in build-fuzz/).
# Builds the targets first (clang, only the parser sources). Each target
# first replays its past findings (fuzz/findings/TARGET-*), the regression
# tests. Exits 1 on the first crash or sanitizer report, leaving the input
# in build-fuzz/.
#
#   scripts/fuzz.sh [--seconds 300 | --runs N] [--seed N] [TARGET...]
#   (targets: json query time url http)
#
# --seed N with --runs N makes a run repeatable: from a fresh copy of the
# seed corpus, libFuzzer then makes the same mutations, the same number of
# them, on every machine, so make test (--runs 300000 --seed 1) cannot fail
# on a find that is new to CI. A run by time (make fuzz) gets as far as the
# machine allows.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_EACH=300 RUNS=0 SEED=0 TARGETS=()
while (($#)); do
  case $1 in
    --seconds) SECONDS_EACH=$2; shift 2 ;;
    --seed) SEED=$2; shift 2 ;;
    --runs) RUNS=$2; shift 2 ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) TARGETS+=("$1"); shift ;;
  esac
done
((${#TARGETS[@]})) || TARGETS=(json query time url http)
cmake -S fuzz -B build-fuzz -G Ninja -DCMAKE_CXX_COMPILER=clang++ >/dev/null
if ! cmake --build build-fuzz -j2 >build-fuzz/build.log 2>&1; then
  grep -E "error|undefined reference" build-fuzz/build.log | head -20 >&2
  echo "the fuzz targets do not build: build-fuzz/build.log" >&2
  exit 1
fi
for t in "${TARGETS[@]}"; do
  shopt -s nullglob
  findings=(fuzz/findings/"$t"-*)
  shopt -u nullglob
  if ((${#findings[@]})) && ! build-fuzz/fuzz_"$t" "${findings[@]}" >"build-fuzz/fuzz_$t.replay.log" 2>&1; then
    grep -E "ERROR|SUMMARY|runtime error" "build-fuzz/fuzz_$t.replay.log" | head -5
    echo "fuzz_$t fails on a past finding again: build-fuzz/fuzz_$t.replay.log" >&2
    exit 1
  fi
  corpus=build-fuzz/corpus/$t
  if ((SEED)); then rm -rf "$corpus"; fi  # a repeatable run starts from the seeds alone
  mkdir -p "$corpus"
  cp -n fuzz/corpus/"$t"/* "$corpus"/ 2>/dev/null || true
  if ((RUNS)); then budget=(-runs="$RUNS"); what="$RUNS runs"; else budget=(-max_total_time="$SECONDS_EACH"); what="${SECONDS_EACH}s"; fi
  # The codec's inputs must reach the 8 KiB header and 64 KiB body limits.
  max_len=8192; [[ $t == http ]] && max_len=70000
  echo "fuzz_$t: $what, seed $SEED, after replaying ${#findings[@]} past finding(s)"
  if ! (cd build-fuzz && ./fuzz_"$t" "${budget[@]}" -max_len="$max_len" -print_final_stats=1 \
          -seed="$SEED" "corpus/$t" >"fuzz_$t.log" 2>&1); then
    grep -E "ERROR|SUMMARY|runtime error" "build-fuzz/fuzz_$t.log" | head -5
    echo "fuzz_$t found a failure: build-fuzz/fuzz_$t.log and its crash-* input" >&2
    exit 1
  fi
  grep -E "^stat::number_of_executed_units|^Done" "build-fuzz/fuzz_$t.log" | tail -1
done
