#!/usr/bin/env bash
# Leaderboard benchmark: the reference's scenario on 10,000 players --
# `hey -n 100000 -c 1000 -t 10` on GET /api/v1/leaderboard while scores are
# posted at ~100/s and, in a second run, ~2,000/s (wrk + Lua, drawing
# players), plus `wrk -c1000` on the GET -- for the embedded backend and the
# Redis backend, each beside nginx serving a static file of the same size at
# the same concurrency, and beside redis-benchmark ZREVRANGE at -c 1000.
# Writes docs/benchmarks.md (section "leaderboard") unless --no-docs.
#
#   bench/leaderboard.sh [--players 10000] [--duration 10s] [--repeat 3] [--no-docs]
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib/common.sh

PLAYERS=10000 DURATION=10s REPEAT=3 WRITE_DOCS=1
while (($#)); do
  case $1 in
    --players) PLAYERS=$2; shift 2 ;;
    --duration) DURATION=$2; shift 2 ;;
    --repeat) REPEAT=$2; shift 2 ;;
    --no-docs) WRITE_DOCS=0; shift ;;
    -h|--help) bench_usage; exit 0 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done

bench_init

RPORT=$(free_port)
redis-server --port "$RPORT" --bind 127.0.0.1 --dir "$WORK" --appendonly yes --appendfsync always --save "" \
  --maxclients 20000 --daemonize no >"$WORK/redis.log" 2>&1 &
BENCH_PIDS+=("$!")
for _ in $(seq 100); do redis-cli -p "$RPORT" ping >/dev/null 2>&1 && break; sleep 0.05; done
REDIS="redis://127.0.0.1:$RPORT"

"$HOTROW" seed leaderboard --clients "$PLAYERS" --db "sqlite:$WORK/lb.db"
"$HOTROW" seed leaderboard --clients "$PLAYERS" --redis "$REDIS"

EPORT=$(free_port) XPORT=$(free_port)
start_hotrow "$EPORT" --db "sqlite:$WORK/lb.db"
start_hotrow "$XPORT" --db "sqlite:$WORK/x.db" --redis "$REDIS"

NPORT=$(free_port)
start_nginx "$WORK/nginx" "$NPORT" top.json "$(curl -s "http://127.0.0.1:$EPORT/api/v1/leaderboard")"
N="http://127.0.0.1:$NPORT/top.json"
echo "static file: $(wc -c <"$WORK/nginx/www/top.json") bytes (the embedded backend's top-10 answer)"

write_score_post_lua "$WORK/post.lua" "$PLAYERS"

# Parses wrk into "rps avg_ms p99_ms ok non200 timeouts".
parse_wrk_full() {
  awk '
    function ms(v) { if (v ~ /us$/) return v / 1000; if (v ~ /ms$/) return v + 0; if (v ~ /s$/) return v * 1000; return v }
    /Requests\/sec:/ { rps = $2 }
    /^ +Latency +[0-9]/ { avg = ms($2) }
    /^ +99%/ { p99 = ms($2) }
    /requests in/ { total = $1 }
    /Non-2xx or 3xx responses:/ { bad += $5 }
    /Socket errors:/ { gsub(/,/, ""); bad += $4 + $6 + $8; to += $10 }
    END { printf "%.0f %.1f %.1f %d %d %d\n", rps, avg, p99, total - bad, bad, to }' "$1"
}

ROWS=()
# measure NAME TOOL POST_CONNECTIONS URL ARGS...: median of REPEAT runs, with
# POST_CONNECTIONS wrk connections posting scores meanwhile (0: none).
measure() {
  local name=$1 tool=$2 posters=$3 target=$4 url=$5; shift 5
  local files=() i key posted=0
  key=$(echo "$name" | tr -c 'A-Za-z0-9' '_')
  for ((i = 1; i <= REPEAT; i++)); do
    local poster=""
    if ((posters > 0)); then
      wrk -t1 -c"$posters" -d600s -s "$WORK/post.lua" "$target" >"$WORK/$key.post.$i.txt" 2>&1 &
      poster=$!
      sleep 0.5
    fi
    "$tool" "$@" "$url" >"$WORK/$key.$i.txt" 2>&1 || true
    if [[ -n $poster ]]; then
      kill -INT "$poster" 2>/dev/null || true
      wait "$poster" 2>/dev/null || true
      posted=$(awk '/Requests\/sec/ {print $2}' "$WORK/$key.post.$i.txt")
    fi
    "parse_${tool}_full" "$WORK/$key.$i.txt" >"$WORK/$key.$i.parsed"
    files+=("$WORK/$key.$i.parsed")
  done
  read -r rps avg p99 ok bad to <<<"$(median_of "${files[@]}")"
  printf '%-58s %8s req/s avg %7s ms p99 %7s ms  200s %7s  non-200 %5s  timeouts %5s  posts/s %s\n' \
    "$name" "$rps" "$avg" "$p99" "$ok" "$bad" "$to" "${posted:-0}"
  ROWS+=("| $name | $rps | $avg | $p99 | $bad | $to | ${posted:-0} |")
}

E="http://127.0.0.1:$EPORT"
X="http://127.0.0.1:$XPORT"
HEY=(-n 100000 -c 1000 -t 10)
WRK=(-t2 -c1000 -d"$DURATION" --latency --timeout 10s)
for backend in embedded redis; do
  [[ $backend == embedded ]] && H=$E || H=$X
  measure "nginx static, hey -n 100000 -c 1000" hey 0 "$H" "$N" "${HEY[@]}"
  measure "$backend: hey -n 100000 -c 1000, posts ~100/s" hey 1 "$H" "$H/api/v1/leaderboard" "${HEY[@]}"
  measure "$backend: hey -n 100000 -c 1000, posts ~2000/s" hey 30 "$H" "$H/api/v1/leaderboard" "${HEY[@]}"
  measure "nginx static, wrk -c1000 -d$DURATION" wrk 0 "$H" "$N" "${WRK[@]}"
  measure "$backend: wrk -c1000 -d$DURATION" wrk 0 "$H" "$H/api/v1/leaderboard" "${WRK[@]}"
  measure "$backend: wrk -c1000 -d$DURATION, posts ~2000/s" wrk 30 "$H" "$H/api/v1/leaderboard" "${WRK[@]}"
done

# The in-memory ceiling: Redis itself answering the same top-10 query.
redis-benchmark -p "$RPORT" -c 1000 -n 300000 ZREVRANGE hotrow:lb:b:default:1:z 0 9 WITHSCORES 2>/dev/null | tr '\r' '\n' \
  >"$WORK/redis-benchmark.txt"
rb=$(awk '/throughput summary:/ { print $3 }' "$WORK/redis-benchmark.txt")
p50=$(awk '/avg +min +p50/ { getline; print "avg " $1 " ms, p99 " $5 " ms"; exit }' "$WORK/redis-benchmark.txt")
echo "redis-benchmark ZREVRANGE hotrow:lb:b:default:1:z 0 9 WITHSCORES -c 1000: $rb req/s ($p50)"

if ((WRITE_DOCS)); then
  section="$WORK/section.md"
  {
    echo "Measured $(machine_line) by \`bench/leaderboard.sh --players $PLAYERS --duration $DURATION --repeat $REPEAT\`;"
    echo "$PLAYERS players, one hotrow per backend (embedded: SQLite + in-memory board; redis: Redis 7 with"
    echo "appendonly yes, appendfsync always), nginx serving the $(wc -c <"$WORK/nginx/www/top.json")-byte top-10 answer as a static file."
    echo "Scores are posted meanwhile by wrk + Lua at the rate shown (random players, random scores). Medians of $REPEAT runs."
    echo
    echo "| run | req/s | avg ms | p99 ms | non-200 | timeouts | posts/s meanwhile |"
    echo "|---|---:|---:|---:|---:|---:|---:|"
    printf '%s\n' "${ROWS[@]}"
    echo
    echo "redis-benchmark \`ZREVRANGE hotrow:lb:b:default:1:z 0 9 WITHSCORES\` at -c 1000 on the same Redis: $rb requests/s ($p50)."
  } >"$section"
  replace_section docs/benchmarks.md leaderboard "$section"
  echo "wrote docs/benchmarks.md (section leaderboard)"
fi
