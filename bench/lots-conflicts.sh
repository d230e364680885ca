#!/usr/bin/env bash
# What expiring lots cost SERIALIZABLE payments on PostgreSQL: the share of
# writes answered 503 (40001 after three tries) under a mixed load on a few
# cards, two instances on one database, while a grant's lots expire, against
# the same load after a grant whose points never expire.
#   A throwaway PostgreSQL 15 cluster; per run a database seeded with 1,000
#   cards and 5,000 history rows, two instances (--db-pool 8), a grant of
#   20% of every seeded charge (expiring in 5 s, or never), then
#   bench/lib/lots_load.py: 8 threads alternating between the instances,
#   15 s of payments, charges, holds (1-5 s), captures, voids and refunds on
#   cards 1..40.
# docs/benchmarks.md ("0.14.0: lots on PostgreSQL") has the figures.
#
#   bench/lots-conflicts.sh [--rounds 2]
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib/common.sh

ROUNDS=2
while (($#)); do
  case $1 in
    --rounds) ROUNDS=$2; shift 2 ;;
    -h | --help) bench_usage; exit 0 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
bench_init
HOTROW=$(realpath "$HOTROW")
trap 'bench_stop_pids; pg_stop; bench_cleanup' EXIT
pg_start
P1=$(free_port)
P2=$(free_port)
while [[ $P2 == "$P1" ]]; do P2=$(free_port); done

n=0
run() {  # name never|expiring
  n=$((n + 1))
  local db="postgresql://hotrow@127.0.0.1:$PGPORT/l$n"
  "$PGBIN/psql" "postgresql://hotrow@127.0.0.1:$PGPORT/postgres" -XAtqc "CREATE DATABASE l$n"
  "$HOTROW" seed pointcard --cards 1000 --stores 20 --history 5000 --db "$db" >/dev/null 2>&1
  start_hotrow "$P1" --db "$db" --db-pool 8 --admin-token bench >/dev/null 2>&1
  wait_http "http://127.0.0.1:$P1/readyz" 60
  start_hotrow "$P2" --db "$db" --db-pool 8 --admin-token bench >/dev/null 2>&1
  wait_http "http://127.0.0.1:$P2/readyz" 60
  local grant expiry=""
  [[ $2 == expiring ]] && expiry=",\"expiresAt\":\"$(date -u -d '+5 seconds' +%Y-%m-%dT%H:%M:%S.%6NZ)\""
  grant=$(post_grant "$P1" 20 2000-01-01T00:00:00Z "$expiry")
  wait_folded "$P1" "$grant" 100 >/dev/null
  echo "$1 ($("$PGBIN/psql" "$db" -XAtqc "SELECT count(*) FROM P_LOT WHERE CARD_ID <= 40") of cards 1..40 with a lot)"
  python3 bench/lib/lots_load.py --ports "$P1,$P2" --cards 40 --threads 8 --seconds 15 --seed "$n"
  "$HOTROW" check pointcard --db "$db" | tail -1
  bench_stop_pids
}

echo "PostgreSQL, two instances; this: $("$HOTROW" --version); $(machine_line)"
for _ in $(seq "$ROUNDS"); do
  run "never expiring" never
  run "expiring in 5 s" expiring
done
