#!/usr/bin/env bash
# hotrow's PostgreSQL grant aims against PostgreSQL alone, with no hotrow:
# pgbench runs a payment (lock the card, insert a history row, update the
# balance, commit) on a throwaway cluster while a psql loop runs a plain-SQL
# grant every 10 s that writes what hotrow's grant must write: one credit
# per granted card (5 of 8 of 1M cards) staged in one transaction, then
# folded in chunks of about 4,096 cards, each chunk one statement that
# deletes its credits, adds them to the balances and inserts one history row
# per card. It leaves out what hotrow adds (the period's query, the card
# locks, the lease, the checks).
#
# For each client count it prints the payments that overlapped a grant
# window (staging start to fold end) against those that did not (count, p50,
# p99, p99.9, max) and each window's staging and fold times: issue 13's
# p99.9 ratio at one client, and whether a grant every 10 s keeps up beside
# 16 (hotrow's default --db-pool) payment connections. --rate N paces the
# payments at N a second in all (pgbench -R; the reference simulator at
# parallel 1 makes about 10 a second, so that p99.9 there is nearly the
# largest payment of a side, as in hotrow's runs). docs/benchmarks.md
# ("PostgreSQL alone") has the figures.
#
#   bench/pg-plain-grant.sh [--duration 120] [--clients 1,16] [--cards 1000000] [--rate N]
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib/common.sh

DURATION=120 CLIENTS=1,16 CARDS=1000000 RATE=
while (($#)); do
  case $1 in
    --duration) DURATION=${2%s}; shift 2 ;;
    --clients) CLIENTS=$2; shift 2 ;;
    --cards) CARDS=$2; shift 2 ;;
    --rate) RATE=$2; shift 2 ;;
    -h|--help) bench_usage; exit 0 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done

WORK=$(mktemp -d /tmp/hotrow-bench-XXXXXX)
chmod 755 "$WORK"
BENCH_CLEAN_DIRS+=("$WORK")
# Every statement over 20 ms is logged, so that a slow payment can be told
# apart: a COMMIT waits for the log's flush, a SELECT ... FOR UPDATE for a
# fold chunk that holds its card.
pg_start max_connections=300 shared_buffers=1GB log_min_duration_statement=20
trap 'pg_stop; bench_cleanup' EXIT
DB="postgresql://hotrow@127.0.0.1:$PGPORT/postgres"
psql_() { "$PGBIN/psql" "$DB" -XAtq -v ON_ERROR_STOP=1 "$@"; }

seed() {
  echo "seeding $CARDS cards and $CARDS history rows"
  psql_ <<SQL
SET client_min_messages = warning;
DROP TABLE IF EXISTS acct, hist, credit;
CREATE TABLE acct (id bigint PRIMARY KEY, balance bigint NOT NULL, last bigint NOT NULL);
CREATE TABLE hist (t bigint NOT NULL, card bigint NOT NULL, store int NOT NULL, amount bigint NOT NULL,
                   balance bigint NOT NULL, PRIMARY KEY (t, card, store));
CREATE INDEX hist_card_t ON hist (card, t);
CREATE TABLE credit (card bigint PRIMARY KEY, points bigint NOT NULL);
INSERT INTO acct SELECT g, 100000, 0 FROM generate_series(1, $CARDS) g;
INSERT INTO hist SELECT g, g, 1, 100000, 100000 FROM generate_series(1, $CARDS) g;
VACUUM ANALYZE;
CHECKPOINT;
SQL
}

cat >"$WORK/pay.sql" <<SQL
\set c random(1, $CARDS)
BEGIN;
SELECT balance FROM acct WHERE id = :c FOR UPDATE;
INSERT INTO hist VALUES ((extract(epoch FROM clock_timestamp()) * 1e6)::bigint, :c, 1, -100, 0);
UPDATE acct SET balance = balance - 100 WHERE id = :c;
COMMIT;
SQL

# One grant's statements: the staging, then one autocommit statement per
# chunk of card ids (6,554 ids hold about 4,096 credits).
{
  echo "INSERT INTO credit SELECT id, 10 FROM acct WHERE id % 8 < 5;"
  printf '%s\n' '\echo staged'
  for ((a = 1; a <= CARDS; a += 6554)); do
    echo "WITH d AS (DELETE FROM credit WHERE card >= $a AND card < $((a + 6554)) RETURNING card, points),
u AS (UPDATE acct SET balance = acct.balance + d.points, last = :t FROM d WHERE acct.id = d.card)
INSERT INTO hist SELECT :t, card, 0, points, 0 FROM d;"
  done
} >"$WORK/grant.sql"

now() { date +%s.%N; }
# A grant every 10 s, until 10 s before the deadline. One that runs longer
# is followed by 5 quiet seconds before the next, so that some payments
# always meet no grant. Each window's start, end of staging and end go to
# $1 (the staging's end is its start if the grant failed).
grant_loop() {
  local out=$1 deadline=$2 start staged t next
  next=$(($(date +%s) + 5))
  while true; do
    while (($(date +%s) < next)); do sleep 0.1; done
    (($(date +%s) < deadline - 10)) || break
    start=$(now)
    t=$(date +%s%6N)
    staged=$(psql_ -v t="$t" -f "$WORK/grant.sql" 2>>"$WORK/grant.err" |
      while read -r line; do [[ $line == staged ]] && now; done) || true
    echo "$start ${staged:-$start} $(now)" >>"$out"
    next=$((next + 10))
    ((next > $(date +%s))) || next=$(($(date +%s) + 5))
  done
}

summary() {  # pgbench log, windows file, the postgres.log lines of the run
  python3 - "$1" "$2" "$3" <<'PY'
import math, re, sys
windows = [tuple(map(float, l.split())) for l in open(sys.argv[2]) if l.strip()]
during, outside = [], []
for line in open(sys.argv[1]):
    f = line.split()
    # time (f[2]) counts from the scheduled start under -R; the schedule
    # lag (f[6]) is taken off, for the time the payment itself took.
    lat_us = int(f[2]) - (int(f[6]) if len(f) > 6 else 0)
    end = int(f[4]) + int(f[5]) / 1e6
    start = end - lat_us / 1e6
    (during if any(s <= end and start <= e for s, _, e in windows) else outside).append(lat_us / 1000)
def q(v, p):  # as the simulator: the ceil(p n)-th smallest
    v = sorted(v)
    return v[max(0, min(len(v) - 1, math.ceil(p * len(v)) - 1))] if v else float("nan")
print("                         count    p50 ms    p99 ms  p99.9 ms    max ms")
for name, v in (("payments during a grant", during), ("payments outside grants", outside)):
    print(f"  {name:22s} {len(v):6d} {q(v, .5):9.2f} {q(v, .99):9.2f} {q(v, .999):9.2f} {max(v, default=float('nan')):9.2f}")
if during and outside:
    print(f"  p99.9 ratio during / outside: {q(during, .999) / q(outside, .999):.2f}x")
for i, (s, st, e) in enumerate(windows, 1):
    print(f"  grant {i}: staging {st - s:.2f} s, fold {e - st:.2f} s, window {e - s:.2f} s")
slow = {}
for line in open(sys.argv[3], errors="replace"):
    m = re.search(r"duration: ([0-9.]+) ms\s+statement: (\S+)", line)
    if m and m.group(2).upper() in ("COMMIT;", "SELECT", "INSERT", "UPDATE", "BEGIN;") and "credit" not in line:
        slow.setdefault(m.group(2).rstrip(";").upper(), []).append(float(m.group(1)))
print("  payment statements over 20 ms: " + (", ".join(
    f"{k} {len(v)} (longest {max(v):.0f} ms)" for k, v in sorted(slow.items())) or "none"))
PY
}

IFS=, read -ra counts <<<"$CLIENTS"
echo "$(machine_line), PostgreSQL $("$PGBIN/postgres" --version | awk '{print $3}'), $(date -u +%H:%M) UTC"
for c in "${counts[@]}"; do
  seed
  rm -f "$WORK"/pgbench_log.* "$WORK/windows"
  touch "$WORK/windows"
  log_from=$(($(wc -l <"$WORK/postgres.log") + 1))
  deadline=$(($(date +%s) + DURATION))
  grant_loop "$WORK/windows" "$deadline" &
  loop_pid=$!
  BENCH_PIDS+=("$loop_pid")
  (cd "$WORK" && "$PGBIN/pgbench" -n -c "$c" -j "$((c < 2 ? 1 : 2))" -T "$DURATION" ${RATE:+-R "$RATE"} -l -f pay.sql "$DB" >pgbench.out 2>&1)
  wait "$loop_pid" || true
  echo "clients $c${RATE:+ at $RATE/s}, $DURATION s, $(awk '/^tps/ { printf "%.0f payments/s", $3 }' "$WORK/pgbench.out"):"
  cat "$WORK"/pgbench_log.* >"$WORK/all.log"
  tail -n "+$log_from" "$WORK/postgres.log" >"$WORK/run.log"
  summary "$WORK/all.log" "$WORK/windows" "$WORK/run.log"
  [[ -s $WORK/grant.err ]] && { echo "  grant errors:"; sed 's/^/    /' "$WORK/grant.err"; : >"$WORK/grant.err"; }
done
