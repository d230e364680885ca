#!/usr/bin/env bash
# Redis replicas for leaderboard reads: the reference post's strategy 4 (a
# replica, reads split 3/7 to the master and 4/7 to the replica, a POST
# every 10 ms) beside hotrow's own answers. `hey -n 100000 -c 1000 -t 10`
# on GET /api/v1/leaderboard, while one wrk connection posts a random score
# for a random player every 10 ms, against one hotrow on a Redis master
# (appendonly yes, appendfsync always) with one replica, in five setups:
#   one Redis        --redis-cache-ms 0: every read goes to the master
#   split 4/7        --redis-replica-split 4/7 --redis-cache-ms 0 (the post)
#   replica routing  --redis-replica (lag and read-your-writes), no cache
#   cache alone      the per-instance top-100 cache, no replica
#   routing + cache  both
# beside nginx serving a static file of the same size. Prints each setup's
# share of reads that reached the replica (hotrow_redis_reads_total).
# Writes docs/benchmarks.md (section "leaderboard-replicas") unless
# --no-docs.
#
#   bench/leaderboard-replicas.sh [--players 10000] [--repeat 3] [--no-docs]
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib/common.sh

PLAYERS=10000 REPEAT=3 WRITE_DOCS=1
while (($#)); do
  case $1 in
    --players) PLAYERS=$2; shift 2 ;;
    --repeat) REPEAT=$2; shift 2 ;;
    --no-docs) WRITE_DOCS=0; shift ;;
    -h|--help) bench_usage; exit 0 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done

bench_init

MPORT=$(free_port) RPORT=$(free_port)
mkdir -p "$WORK/master" "$WORK/replica"
redis-server --port "$MPORT" --bind 127.0.0.1 --dir "$WORK/master" --appendonly yes --appendfsync always --save "" \
  --maxclients 20000 --repl-diskless-sync-delay 0 --daemonize no >"$WORK/master.log" 2>&1 &
BENCH_PIDS+=("$!")
for _ in $(seq 100); do redis-cli -p "$MPORT" ping >/dev/null 2>&1 && break; sleep 0.05; done
redis-server --port "$RPORT" --bind 127.0.0.1 --dir "$WORK/replica" --save "" --maxclients 20000 \
  --replicaof 127.0.0.1 "$MPORT" --daemonize no >"$WORK/replica.log" 2>&1 &
BENCH_PIDS+=("$!")
MASTER="redis://127.0.0.1:$MPORT" REPLICA="redis://127.0.0.1:$RPORT"
"$HOTROW" seed leaderboard --clients "$PLAYERS" --redis "$MASTER"
for _ in $(seq 200); do
  redis-cli -p "$RPORT" info replication | grep -q 'master_link_status:up' && break
  sleep 0.1
done
redis-cli -p "$RPORT" info replication | grep -q 'master_link_status:up' || { echo "the replica did not sync" >&2; exit 1; }
write_score_post_lua "$WORK/post.lua" "$PLAYERS"

HEY=(-n 100000 -c 1000 -t 10)
ROWS=()
# run NAME URL POSTER_TARGET: median of REPEAT hey runs on URL (a POST every
# 10 ms to POSTER_TARGET meanwhile, none when empty); with HPORT set, the
# share of reads hotrow sent to the replica.
run() {
  local name=$1 url=$2 target=$3 files=() i key share=""
  key=$(echo "$name" | tr -c 'A-Za-z0-9' '_')
  local before_m=0 before_r=0
  if [[ -n $target ]]; then
    read -r before_m before_r <<<"$(reads_of "$target")"
  fi
  for ((i = 1; i <= REPEAT; i++)); do
    local poster=""
    if [[ -n $target ]]; then
      wrk -t1 -c1 -d600s -s "$WORK/post.lua" "$target" >"$WORK/$key.post.$i.txt" 2>&1 &
      poster=$!
      sleep 0.5
    fi
    hey "${HEY[@]}" "$url" >"$WORK/$key.$i.txt" 2>&1 || true
    if [[ -n $poster ]]; then
      kill -INT "$poster" 2>/dev/null || true
      wait "$poster" 2>/dev/null || true
    fi
    parse_hey_full "$WORK/$key.$i.txt" >"$WORK/$key.$i.parsed"
    files+=("$WORK/$key.$i.parsed")
  done
  if [[ -n $target ]]; then
    local after_m after_r
    read -r after_m after_r <<<"$(reads_of "$target")"
    share=$(awk -v m=$((after_m - before_m)) -v r=$((after_r - before_r)) \
      'BEGIN { if (m + r > 0) printf "%.0f%% of %d", 100 * r / (m + r), m + r; else print "no Redis read" }')
  fi
  read -r rps avg p99 ok bad to <<<"$(median_of "${files[@]}")"
  printf '%-18s %8s req/s avg %7s ms p99 %7s ms  non-200 %5s  timeouts %5s  replica reads %s\n' \
    "$name" "$rps" "$avg" "$p99" "$bad" "$to" "${share:--}"
  ROWS+=("| $name | $rps | $avg | $p99 | $bad | $to | ${share:--} |")
}
# reads_of URL: "master replica", the Redis reads that hotrow sent to each.
reads_of() {
  curl -s "$1/metrics" | awk '
    /^hotrow_redis_reads_total\{server="master"\}/ { m = $2 }
    /^hotrow_redis_reads_total\{server="127/ { r += $2 }
    END { printf "%d %d\n", m, r }'
}

# A hotrow on the master and the replica, with the setup's flags.
setup() {
  local port
  port=$(free_port)
  start_hotrow "$port" --db "sqlite:$WORK/x.db" --redis "$MASTER" --redis-replica "$REPLICA" "$@"
  H="http://127.0.0.1:$port"
}
teardown() {
  kill "$HOTROW_PID" 2>/dev/null || true
  wait "$HOTROW_PID" 2>/dev/null || true
}

setup --redis-cache-ms 0 --redis-replica-split 0/1
NPORT=$(free_port)
start_nginx "$WORK/nginx" "$NPORT" top.json "$(curl -s "$H/api/v1/leaderboard")"
echo "static file: $(wc -c <"$WORK/nginx/www/top.json") bytes (the top-10 answer)"
run "nginx static" "http://127.0.0.1:$NPORT/top.json" ""
run "one Redis" "$H/api/v1/leaderboard" "$H"
teardown
setup --redis-cache-ms 0 --redis-replica-split 4/7
run "split 4/7" "$H/api/v1/leaderboard" "$H"
teardown
setup --redis-cache-ms 0
run "replica routing" "$H/api/v1/leaderboard" "$H"
teardown
setup --redis-replica-split 0/1
run "cache alone" "$H/api/v1/leaderboard" "$H"
teardown
setup
run "routing + cache" "$H/api/v1/leaderboard" "$H"
teardown

if ((WRITE_DOCS)); then
  section="$WORK/section.md"
  {
    echo "Measured $(machine_line) by \`bench/leaderboard-replicas.sh --players $PLAYERS --repeat $REPEAT\`;"
    echo "$PLAYERS players, one hotrow on a Redis 7 master (appendonly yes, appendfsync always) with one replica,"
    echo "\`hey -n 100000 -c 1000 -t 10\` on \`GET /api/v1/leaderboard\` while one wrk connection posts a random score"
    echo "every 10 ms; nginx serves the $(wc -c <"$WORK/nginx/www/top.json")-byte top-10 answer as a static file. Medians of $REPEAT runs;"
    echo "\"replica reads\" is the share of hotrow's Redis reads that went to the replica, over all runs."
    echo
    echo "| setup | req/s | avg ms | p99 ms | non-200 | timeouts | replica reads |"
    echo "|---|---:|---:|---:|---:|---:|---:|"
    printf '%s\n' "${ROWS[@]}"
  } >"$section"
  replace_section docs/benchmarks.md leaderboard-replicas "$section"
  echo "wrote docs/benchmarks.md (section leaderboard-replicas)"
fi
