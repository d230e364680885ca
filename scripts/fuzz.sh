#!/usr/bin/env bash
# Runs every libFuzzer target (fuzz/) for a set time each, from the seed
# corpora in fuzz/corpus/ (copied: what a run adds stays in build-fuzz/).
# Builds the targets first (clang, only the parser sources). Exits 1 on the
# first crash or sanitizer report, leaving the input in build-fuzz/.
#
#   scripts/fuzz.sh [--seconds 300] [TARGET...]    (targets: json query time url http)
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_EACH=300 TARGETS=()
while (($#)); do
  case $1 in
    --seconds) SECONDS_EACH=$2; shift 2 ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) TARGETS+=("$1"); shift ;;
  esac
done
((${#TARGETS[@]})) || TARGETS=(json query time url http)
cmake -S fuzz -B build-fuzz -G Ninja -DCMAKE_CXX_COMPILER=clang++ >/dev/null
cmake --build build-fuzz -j2 >/dev/null
for t in "${TARGETS[@]}"; do
  corpus=build-fuzz/corpus/$t
  mkdir -p "$corpus"
  cp -n fuzz/corpus/"$t"/* "$corpus"/ 2>/dev/null || true
  echo "fuzz_$t: ${SECONDS_EACH}s"
  if ! (cd build-fuzz && ./fuzz_"$t" -max_total_time="$SECONDS_EACH" -max_len=8192 -print_final_stats=1 \
          "corpus/$t" >"fuzz_$t.log" 2>&1); then
    grep -E "ERROR|SUMMARY|runtime error" "build-fuzz/fuzz_$t.log" | head -5
    echo "fuzz_$t found a failure: build-fuzz/fuzz_$t.log and its crash-* input" >&2
    exit 1
  fi
  grep -E "^stat::number_of_executed_units|^Done" "build-fuzz/fuzz_$t.log" | tail -1
done
