#!/usr/bin/env bash
# Whether lots make a grant stall payments on PostgreSQL: payments of 1
# point on random cards (wrk -t2 -c32, 30 s) with a grant sent 10 s in, on
# a database whose cards hold no lot against one where most cards hold a
# lot (an expiring grant of their seeded charges first) and some a hold;
# the grant itself never expires in the first pair and expires in the
# second. Prints wrk's latencies, the grant's answer time and its fold.
# docs/benchmarks.md ("0.14.0: a grant beside payments on cards with lots").
#
#   bench/lots-grant.sh [--cards 100000]
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib/common.sh

CARDS=100000
while (($#)); do
  case $1 in
    --cards) CARDS=$2; shift 2 ;;
    -h | --help) bench_usage; exit 0 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
bench_init
HOTROW=$(realpath "$HOTROW")
trap 'bench_stop_pids; pg_stop; bench_cleanup' EXIT
pg_start "shared_buffers=512MB"
PORT=$(free_port)
cat >"$WORK/pay.lua" <<LUA
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{"storeId":3,"amount":-1}'
request = function()
  return wrk.format(nil, "/api/v1/cards/" .. math.random(1, $CARDS) .. "/transactions")
end
LUA
grant() {  # extra-json [rate]: a grant of rate % (1) of every charge so far; prints its id and answer ms
  local t0 id
  t0=$(date +%s%N)
  id=$(post_grant "$PORT" "${2:-1}" 2000-01-01T00:00:00Z "$1")
  echo "$id $((($(date +%s%N) - t0) / 1000000))"
}
folded() { wait_folded "$PORT" "$1" 1200; }  # id: waits for the fold, prints its foldMs

n=0
run() {  # name with-lots(0|1) grant-extra-json
  n=$((n + 1))
  local db="postgresql://hotrow@127.0.0.1:$PGPORT/g$n"
  "$PGBIN/psql" "postgresql://hotrow@127.0.0.1:$PGPORT/postgres" -XAtqc "CREATE DATABASE g$n"
  "$HOTROW" seed pointcard --cards "$CARDS" --stores 100 --history "$CARDS" --db "$db" >/dev/null 2>&1
  start_hotrow "$PORT" --db "$db" --db-pool 16 --admin-token bench >/dev/null 2>&1
  wait_http "http://127.0.0.1:$PORT/readyz" 60
  if [[ $2 == 1 ]]; then
    local first
    read -r first _ < <(grant ',"expiresInDays":30' 100)
    folded "$first" >/dev/null
    for c in $(seq 1 100 "$CARDS"); do  # a hold on one card in a hundred
      curl -fs -o /dev/null -X POST "http://127.0.0.1:$PORT/api/v1/cards/$c/holds" -H 'Content-Type: application/json' \
        -d '{"storeId":3,"amount":-1,"expiresInSeconds":600}' || true
    done
  fi
  local lots
  lots=$("$PGBIN/psql" "$db" -XAtqc "SELECT count(*) FROM P_LOT")
  "$PGBIN/psql" "$db" -XAtqc "VACUUM ANALYZE" >/dev/null
  wrk -t2 -c32 -d30s --latency -s "$WORK/pay.lua" "http://127.0.0.1:$PORT" >"$WORK/wrk.$n" &
  local wpid=$!
  sleep 10
  local id ms fold
  read -r id ms < <(grant "$3")
  fold=$(folded "$id")
  wait "$wpid"
  printf '%-34s lots %7s  grant %5s ms, fold %8s ms  payments %s/s  p50 %s  p99 %s  max %s\n' "$1" "$lots" "$ms" \
    "$fold" "$(awk '/Requests\/sec/ {print $2}' "$WORK/wrk.$n")" "$(awk '$1 == "50%" {print $2}' "$WORK/wrk.$n")" \
    "$(awk '$1 == "99%" {print $2}' "$WORK/wrk.$n")" "$(awk '/Latency/ && !/Distribution/ {print $4}' "$WORK/wrk.$n")"
  bench_stop_pids
  "$PGBIN/psql" "postgresql://hotrow@127.0.0.1:$PGPORT/postgres" -XAtqc "DROP DATABASE g$n" >/dev/null
}

echo "PostgreSQL, $CARDS cards; this: $("$HOTROW" --version); $(machine_line)"
run "no lots, a grant" 0 ""
run "lots and holds, a grant" 1 ""
run "no lots, an expiring grant" 0 ',"expiresInDays":30'
run "lots and holds, an expiring grant" 1 ',"expiresInDays":30'
