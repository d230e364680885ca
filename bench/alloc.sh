#!/usr/bin/env bash
# Allocation and pooling benchmark:
#   1. bench/request_bench (Google Benchmark, in-process request path) with
#      pooling on and off: ns/op and hotrow's own allocations per request;
#   2. the real server over loopback with wrk, pooling on and off:
#      requests/s, p99 and allocations per request (GET /debug/allocations);
#   3. "before": the commit before the pooling work (BEFORE, default
#      864681a), built in a worktree and counted with an LD_PRELOAD malloc
#      counter (bench/tools/count_malloc.c).
# Writes docs/benchmarks.md (section "allocations") unless --no-docs.
#
#   bench/alloc.sh [--duration 10s] [--before COMMIT] [--no-before] [--no-docs]
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib/common.sh

DURATION=10s BEFORE=864681a WRITE_DOCS=1 DO_BEFORE=1
while (($#)); do
  case $1 in
    --duration) DURATION=$2; shift 2 ;;
    --before) BEFORE=$2; shift 2 ;;
    --no-before) DO_BEFORE=0; shift ;;
    --no-docs) WRITE_DOCS=0; shift ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done

make build >/dev/null
cmake --build build --target request_bench >/dev/null
WORK=$(mktemp -d /tmp/hotrow-bench-XXXXXX)
BENCH_CLEAN_DIRS+=("$WORK")

echo "1. in-process (Google Benchmark)"
build/bench/request_bench --benchmark_format=console 2>/dev/null | tee "$WORK/on.txt" | grep BM_
HOTROW_POOLING=off build/bench/request_bench --benchmark_format=console 2>/dev/null | tee "$WORK/off.txt" | grep BM_
# "name ns allocs" per line
bm() { awk '/^BM_/ { n = $1; sub(/\/iterations:.*/, "", n); for (i = 1; i <= NF; i++) if ($i ~ /^allocs=/) { split($i, a, "="); print n, $2, a[2] } }' "$1"; }

echo "2. over loopback (wrk -c50 -d$DURATION)"
build/hotrow seed dateplans --count 100000 --db "sqlite:$WORK/a.db" >/dev/null 2>&1
build/hotrow seed leaderboard --clients 10000 --db "sqlite:$WORK/a.db" >/dev/null 2>&1
cat >"$WORK/echo.lua" <<'LUA'
wrk.method = "POST"
wrk.body = '{"name":"test","id":"id1","country":"testCountry","age":10}'
wrk.headers["Content-Type"] = "application/json"
LUA
cat >"$WORK/like.lua" <<'LUA'
wrk.method = "POST"
LUA
PATHS=("GET /datePlan/" "GET /api/v1/leaderboard" "POST /api/v1/echo" "POST /datePlan/1/like")
script_for() { case $1 in "POST /api/v1/echo") echo "-s $WORK/echo.lua" ;; "POST /datePlan/1/like") echo "-s $WORK/like.lua" ;; *) echo "" ;; esac; }

ROWS=()
# serve_and_measure LABEL COUNT_FN ENV...: runs each path, prints rows.
measure_server() {
  local label=$1 counter=$2 port=$3
  for p in "${PATHS[@]}"; do
    local target=${p#* } args
    args=$(script_for "$p")
    if [[ $label == before && $p == "POST /api/v1/echo" ]]; then continue; fi
    # shellcheck disable=SC2086
    wrk -t2 -c50 -d2s $args "http://127.0.0.1:$port$target" >/dev/null 2>&1 || true
    local a b n
    a=$($counter)
    # shellcheck disable=SC2086
    wrk -t2 -c50 -d"$DURATION" --latency $args "http://127.0.0.1:$port$target" >"$WORK/w.txt" 2>&1 || true
    b=$($counter)
    read -r rps _ p99 ok _ <<<"$(parse_wrk "$WORK/w.txt")"
    n=$(awk '/requests in/ {print $1}' "$WORK/w.txt")
    local per
    per=$(awk -v a="$a" -v b="$b" -v n="$n" 'BEGIN { printf "%.2f", (b - a) / n }')
    printf '%-8s %-26s %9s req/s  p99 %6s ms  %s allocs/request\n' "$label" "$p" "$rps" "$p99" "$per"
    ROWS+=("| $label | \`$p\` | $rps | $p99 | $per |")
  done
}

PORT=$(free_port)
own_count() { curl -s "http://127.0.0.1:$PORT/debug/allocations" -H 'Authorization: Bearer bench' | sed -E 's/.*"own":([0-9]+).*/\1/'; }
for mode in on off; do
  env HOTROW_POOLING=$mode build/hotrow serve --host 127.0.0.1 --port "$PORT" --db "sqlite:$WORK/a.db" \
    --admin-token bench --log-level warn &
  pid=$!
  BENCH_PIDS+=($pid)
  wait_http "http://127.0.0.1:$PORT/healthz" 30
  measure_server "pooling $mode" own_count "$PORT"
  kill "$pid"; wait "$pid" 2>/dev/null || true
done

if ((DO_BEFORE)); then
  echo "3. before: $BEFORE"
  git worktree add -f "$WORK/before" "$BEFORE" >/dev/null 2>&1
  cmake -S "$WORK/before" -B "$WORK/before/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DHOTROW_TESTS=OFF >/dev/null
  cmake --build "$WORK/before/build" -j2 --target hotrow >/dev/null
  gcc -O2 -shared -fPIC -o "$WORK/count_malloc.so" bench/tools/count_malloc.c
  export COUNT_MALLOC_FILE="$WORK/count.txt"
  LD_PRELOAD="$WORK/count_malloc.so" "$WORK/before/build/hotrow" serve --host 127.0.0.1 --port "$PORT" \
    --db "sqlite:$WORK/a.db" --log-level warn &
  bpid=$!
  BENCH_PIDS+=($bpid)
  wait_http "http://127.0.0.1:$PORT/healthz" 30
  before_count() { kill -USR1 "$bpid"; sleep 0.2; cat "$COUNT_MALLOC_FILE"; }
  measure_server before before_count "$PORT"
  kill "$bpid"; wait "$bpid" 2>/dev/null || true
  git worktree remove --force "$WORK/before" >/dev/null 2>&1 || true
fi

if ((WRITE_DOCS)); then
  {
    echo "Measured $(machine_line) by \`bench/alloc.sh --duration $DURATION\`."
    echo
    echo "In-process (\`bench/request_bench\`, Google Benchmark): raw bytes parsed, routed, handled on SQLite and"
    echo "written, one request at a time, no socket. Allocations are hotrow's own (SQLite's counted apart)."
    echo
    echo "| request | ns/op, pooling on | allocs, on | ns/op, pooling off | allocs, off |"
    echo "|---|---:|---:|---:|---:|"
    join <(bm "$WORK/on.txt" | sort) <(bm "$WORK/off.txt" | sort) | awk '{ printf "| %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5 }'
    echo
    echo "Over loopback (\`wrk -t2 -c50 -d$DURATION\`, the real server; allocations per request from"
    echo "\`GET /debug/allocations\`, or, for \"before\" (commit $BEFORE, before this work), an LD_PRELOAD malloc counter"
    echo "that also counts SQLite's allocations on the like path):"
    echo
    echo "| build | request | req/s | p99 ms | allocs/request |"
    echo "|---|---|---:|---:|---:|"
    printf '%s\n' "${ROWS[@]}"
  } >"$WORK/section.md"
  replace_section docs/benchmarks.md allocations "$WORK/section.md"
  echo "wrote docs/benchmarks.md (section allocations)"
fi
