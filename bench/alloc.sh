#!/usr/bin/env bash
# Allocation and pooling benchmark:
#   1. bench/request_bench (Google Benchmark, in-process request path) with
#      pooling on and off: ns/op and hotrow's own allocations per request;
#   2. the real server over loopback with wrk, pooling on and off:
#      requests/s, p99 and allocations per request (GET /debug/allocations);
#   3. "before": the commit before the pooling work (BEFORE, default
#      864681a), built in a worktree, timed in the same alternating rounds
#      as 2., and counted in a separate run with an LD_PRELOAD malloc
#      counter (bench/tools/count_malloc.c), which would distort its times.
# Writes docs/benchmarks.md (section "allocations") unless --no-docs.
#
#   bench/alloc.sh [--duration 10s] [--rounds 3] [--before COMMIT] [--before-bin FILE] [--no-before] [--no-docs]
# --before-bin takes an already built hotrow as "before" instead of building
# --before; it must have GET /debug/allocations (any build since the pooling
# work), which counts its allocations as this build's are counted.
# Figures are medians of --rounds runs; over loopback, next to nginx serving
# a static file the size of a random plan.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib/common.sh

DURATION=10s ROUNDS=3 BEFORE=864681a BEFORE_BIN="" WRITE_DOCS=1 DO_BEFORE=1
while (($#)); do
  case $1 in
    --duration) DURATION=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --before) BEFORE=$2; shift 2 ;;
    --before-bin) [[ $2 == /* ]] && BEFORE_BIN=$2 || BEFORE_BIN=$OLDPWD/$2; BEFORE=$(basename "$2"); shift 2 ;;
    --no-before) DO_BEFORE=0; shift ;;
    --no-docs) WRITE_DOCS=0; shift ;;
    -h|--help) bench_usage; exit 0 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done

make build >/dev/null
cmake --build build --target request_bench >/dev/null
bench_init

echo "1. in-process (Google Benchmark)"
GB_ARGS=(--benchmark_format=console --benchmark_repetitions="$ROUNDS" --benchmark_report_aggregates_only=true)
build/bench/request_bench "${GB_ARGS[@]}" 2>/dev/null | tee "$WORK/on.txt" | grep -Ev '_(mean|stddev|cv) |^[^B]' || true
HOTROW_POOLING=off build/bench/request_bench "${GB_ARGS[@]}" 2>/dev/null | tee "$WORK/off.txt" | grep -Ev '_(mean|stddev|cv) |^[^B]' || true
# "name ns allocs" per median line; Google Benchmark prints counters with SI
# suffixes (500u = 0.0005).
bm() {
  awk 'function si(v,   u) { u = substr(v, length(v)); if (u ~ /[0-9]/) return v + 0
         v = substr(v, 1, length(v) - 1); return v * (u == "k" ? 1e3 : u == "m" ? 1e-3 : u == "u" ? 1e-6 : u == "n" ? 1e-9 : 1) }
       /^BM_/ && !/_(mean|stddev|cv) / { n = $1; sub(/\/.*/, "", n); sub(/_median$/, "", n)
         for (i = 1; i <= NF; i++) if ($i ~ /^allocs=/) { split($i, a, "="); printf "%s %s %.4g\n", n, $2, si(a[2]) } }' "$1"
}

if ((DO_BEFORE)) && [[ -n $BEFORE_BIN ]]; then
  cp "$BEFORE_BIN" "$WORK/hotrow-before"
  MODES=(on off before)
elif ((DO_BEFORE)); then
  echo "building $BEFORE in a worktree"
  git worktree add -f "$WORK/before" "$BEFORE" >/dev/null 2>&1
  cmake -S "$WORK/before" -B "$WORK/before/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DHOTROW_TESTS=OFF >/dev/null
  cmake --build "$WORK/before/build" -j2 --target hotrow >/dev/null
  cp "$WORK/before/build/hotrow" "$WORK/hotrow-before"
  git worktree remove --force "$WORK/before" >/dev/null 2>&1 || true
  MODES=(on off before)
else
  MODES=(on off)
fi

echo "2. over loopback (wrk -c50 -d$DURATION)"
"$HOTROW" seed dateplans --count 100000 --db "sqlite:$WORK/a.db" >/dev/null 2>&1
"$HOTROW" seed leaderboard --clients 10000 --db "sqlite:$WORK/a.db" >/dev/null 2>&1
# The older build serves a copy of the main file with no point-card file
# beside it (it makes its own): this build's point-card schema 5 is a
# contract step, which refuses older binaries.
cp "$WORK/a.db" "$WORK/b.db"
if [[ -e $WORK/a.db-wal ]]; then cp "$WORK/a.db-wal" "$WORK/b.db-wal"; fi
cat >"$WORK/echo.lua" <<'LUA'
wrk.method = "POST"
wrk.body = '{"name":"test","id":"id1","country":"testCountry","age":10}'
wrk.headers["Content-Type"] = "application/json"
LUA
write_post_lua "$WORK/like.lua"
PATHS=("GET /datePlan/" "GET /api/v1/leaderboard" "POST /api/v1/echo" "POST /datePlan/1/like")
script_for() { case $1 in "POST /api/v1/echo") echo "-s $WORK/echo.lua" ;; "POST /datePlan/1/like") echo "-s $WORK/like.lua" ;; *) echo "" ;; esac; }

# measure_server LABEL COUNTER PORT: every path once; appends
# "label<TAB>path<TAB>rps<TAB>p99<TAB>allocs" to $WORK/rows.tsv.
measure_server() {
  local label=$1 counter=$2 port=$3
  for p in "${PATHS[@]}"; do
    local target=${p#* } args
    args=$(script_for "$p")
    # The default "before" (864681a) has no echo route.
    if [[ $label == before* && -z $BEFORE_BIN && $p == "POST /api/v1/echo" ]]; then continue; fi
    # shellcheck disable=SC2086
    wrk -t2 -c50 -d2s $args "http://127.0.0.1:$port$target" >/dev/null 2>&1 || true
    local a b n
    a=$($counter)
    # shellcheck disable=SC2086
    wrk -t2 -c50 -d"$DURATION" --latency $args "http://127.0.0.1:$port$target" >"$WORK/w.txt" 2>&1 || true
    b=$($counter)
    read -r rps _ p99 _ bad <<<"$(parse_wrk "$WORK/w.txt")"
    n=$(awk '/requests in/ {print $1}' "$WORK/w.txt")
    local per
    per=$(awk -v a="$a" -v b="$b" -v n="$n" 'BEGIN { printf "%.2f", (b - a) / n }')
    printf '%-12s %-26s %9s req/s  p99 %6s ms  %5s allocs/request  (%s not 2xx)\n' "$label" "$p" "$rps" "$p99" "$per" "$bad"
    printf '%s\t%s\t%s\t%s\t%s\n' "$label" "$p" "$rps" "$p99" "$per" >>"$WORK/rows.tsv"
  done
}

PORT=$(free_port)
NPORT=$(free_port)
own_count() { curl -s "http://127.0.0.1:$PORT/debug/allocations" -H 'Authorization: Bearer bench' | sed -E 's/.*"own":([0-9]+).*/\1/'; }
no_count() { echo 0; }
: >"$WORK/rows.tsv"


# Rounds alternate pooling on, off and the old build (a fresh server each
# time) so that drift in the machine hits all alike; the tables quote medians.
for ((round = 1; round <= ROUNDS; round++)); do
  echo "round $round/$ROUNDS"
  for mode in "${MODES[@]}"; do
    if [[ $mode == before && -n $BEFORE_BIN ]]; then
      # A build with the counting hooks: counted like this one.
      HOTROW_BIN="$WORK/hotrow-before" start_hotrow "$PORT" --db "sqlite:$WORK/b.db" --admin-token bench
      measure_server before own_count "$PORT"
    elif [[ $mode == before ]]; then
      HOTROW_BIN="$WORK/hotrow-before" start_hotrow "$PORT" --db "sqlite:$WORK/b.db"
      measure_server before no_count "$PORT"
    else
      HOTROW_POOLING=$mode start_hotrow "$PORT" --db "sqlite:$WORK/a.db" --admin-token bench
      if [[ -z ${NGINX_PID:-} ]]; then
        # The ceiling: nginx serving a static file the size of a plan.
        PLAN_BYTES=$(curl -s "http://127.0.0.1:$PORT/datePlan/1" | wc -c)
        start_nginx "$WORK/nginx" "$NPORT" plan.json "$(head -c "$PLAN_BYTES" /dev/zero | tr '\0' x)"
        NGINX_PID=${BENCH_PIDS[-1]}
      fi
      measure_server "pooling $mode" own_count "$PORT"
    fi
    kill "$HOTROW_PID"; wait "$HOTROW_PID" 2>/dev/null || true
  done
  PATHS_SAVED=("${PATHS[@]}"); PATHS=("GET /plan.json")
  measure_server nginx no_count "$NPORT"
  PATHS=("${PATHS_SAVED[@]}")
done

if ((DO_BEFORE)) && [[ -z $BEFORE_BIN ]]; then
  # The default "before" predates the counting hooks: count it from outside.
  echo "3. before: allocations of $BEFORE, counted with LD_PRELOAD (times above are without it)"
  gcc -O2 -shared -fPIC -o "$WORK/count_malloc.so" bench/tools/count_malloc.c
  export COUNT_MALLOC_FILE="$WORK/count.txt"
  LD_PRELOAD="$WORK/count_malloc.so" "$WORK/hotrow-before" serve --host 127.0.0.1 --port "$PORT" \
    --db "sqlite:$WORK/a.db" --log-level warn &
  bpid=$!
  BENCH_PIDS+=("$bpid")
  wait_http "http://127.0.0.1:$PORT/healthz" 30
  before_count() { kill -USR1 "$bpid"; sleep 0.2; cat "$COUNT_MALLOC_FILE"; }
  DURATION_SAVED=$DURATION; DURATION=3s
  measure_server "before (counted)" before_count "$PORT"
  DURATION=$DURATION_SAVED
  kill "$bpid"; wait "$bpid" 2>/dev/null || true
fi

# Medians per (label, path), in the order first seen; the old build's
# allocations come from its counted run, its times from the timed rounds.
medians() {
  awk -F'\t' '
    $1 == "before (counted)" { counted[$2] = $5; next }
    !(($1 FS $2) in seen) { seen[$1 FS $2] = ++n; key[n] = $1 FS $2 }
    { k = $1 FS $2; c[k]++; rps[k, c[k]] = $3; p99[k, c[k]] = $4; al[k, c[k]] = $5 }
    function med(arr, k, m,   i, j, t, v) {
      for (i = 1; i <= m; i++) v[i] = arr[k, i] + 0
      for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
      return m % 2 ? v[(m + 1) / 2] : (v[m / 2] + v[m / 2 + 1]) / 2
    }
    END { for (i = 1; i <= n; i++) { k = key[i]; split(k, f, FS)
      a = f[1] == "before" && (f[2] in counted) ? counted[f[2]] : med(al, k, c[k])
      printf "%s\t%s\t%.0f\t%.2f\t%.2f\n", f[1], f[2], med(rps, k, c[k]), med(p99, k, c[k]), a } }' "$WORK/rows.tsv"
}
NGINX_RPS=$(medians | awk -F'\t' '$1 == "nginx" { print $3 }')
echo "medians of $ROUNDS round(s):"
medians | awk -F'\t' -v ng="$NGINX_RPS" '{ printf "%-12s %-26s %9s req/s (%.2fx nginx)  p99 %6s ms  %5s allocs/request\n", $1, $2, $3, $3 / ng, $4, $5 }'

if ((WRITE_DOCS)); then
  {
    echo "Measured $(machine_line) by \`bench/alloc.sh --duration $DURATION\`."
    echo
    echo "In-process (\`bench/request_bench\`, Google Benchmark, median of $ROUNDS repetitions): raw bytes parsed,"
    echo "routed, handled on SQLite and written, one request at a time, no socket. Allocations are hotrow's own"
    echo "(SQLite's counted apart). Times are wall time: a like or a payment alone waits for its own fsync."
    echo
    echo "| request | ns/op, pooling on | allocs, on | ns/op, pooling off | allocs, off |"
    echo "|---|---:|---:|---:|---:|"
    join <(bm "$WORK/on.txt" | sort) <(bm "$WORK/off.txt" | sort) | awk '{ printf "| %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5 }'
    echo
    if [[ -n $BEFORE_BIN ]]; then
      echo "Over loopback (\`wrk -t2 -c50 -d$DURATION\`, medians of $ROUNDS rounds alternating pooling on, pooling off and"
      echo "\"before\" (the build \`$BEFORE\`), a fresh server each time, next to nginx serving a static file of a"
      echo "plan's size; allocations per request from each build's \`GET /debug/allocations\`):"
    else
      echo "Over loopback (\`wrk -t2 -c50 -d$DURATION\`, medians of $ROUNDS rounds alternating pooling on, pooling off and"
      echo "\"before\" (commit $BEFORE, before this work), a fresh server each time, next to nginx serving a static file of a"
      echo "plan's size; allocations per request from \`GET /debug/allocations\`, or, for \"before\", from a separate 3 s run"
      echo "under an LD_PRELOAD malloc counter that also counts SQLite's allocations on the like path):"
    fi
    echo
    echo "| build | request | req/s | × nginx | p99 ms | allocs/request |"
    echo "|---|---|---:|---:|---:|---:|"
    medians | awk -F'\t' -v ng="$NGINX_RPS" '{ a = $1 == "nginx" ? "–" : $5
      printf "| %s | `%s` | %s | %.2f | %s | %s |\n", $1, $2, $3, $3 / ng, $4, a }' 
  } >"$WORK/section.md"
  replace_section docs/benchmarks.md allocations "$WORK/section.md"
  echo "wrote docs/benchmarks.md (section allocations)"
fi
