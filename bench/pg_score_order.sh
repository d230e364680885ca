#!/usr/bin/env bash
# What the leaderboard's commit-ordered sequence costs on PostgreSQL: the
# score statement hotrow ran before (nextval, taken before the row lock)
# against the one it runs now (the leaderboard_clock row lock, held to the
# commit), both with pgbench on one fresh cluster, alternating rounds,
# players drawn from 10,000 (distinct rows) or one player (a hot row).
# Prints a table of medians; writes nothing.
#
#   bench/pg_score_order.sh [--duration 10s] [--clients 32] [--rounds 3]
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib/common.sh

DURATION=10s CLIENTS=32 ROUNDS=3
while (($#)); do
  case $1 in
    --duration) DURATION=$2; shift 2 ;;
    --clients) CLIENTS=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    -h|--help) bench_usage; exit 0 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done

bench_init
pg_start max_connections=200
trap '[[ -s $WORK/pgbench.err ]] && tail -3 "$WORK/pgbench.err" >&2; pg_stop; bench_cleanup' EXIT
PSQL=(psql -h 127.0.0.1 -p "$PGPORT" -U hotrow -d postgres -q -v ON_ERROR_STOP=1)
"${PSQL[@]}" -c "CREATE SEQUENCE leaderboard_seq;
  CREATE TABLE leaderboard (client_id text PRIMARY KEY, score bigint NOT NULL, seq bigint NOT NULL UNIQUE);
  CREATE TABLE leaderboard_clock (id int PRIMARY KEY CHECK (id = 1), n bigint NOT NULL);
  INSERT INTO leaderboard_clock VALUES (1, 0);"

cat >"$WORK/before.sql" <<'SQL'
\set p random(1, :players)
\set s random(1, 1000000)
WITH up AS (INSERT INTO leaderboard AS l (client_id, score, seq) VALUES ('p' || :p, :s, nextval('leaderboard_seq'))
  ON CONFLICT (client_id) DO UPDATE SET score = excluded.score, seq = excluded.seq
  WHERE l.score <> excluded.score RETURNING score, seq, client_id)
SELECT score, seq, pg_notify('hotrow_lb', 'set ' || score || ' ' || seq || ' ' || client_id) FROM up;
SQL
cat >"$WORK/after.sql" <<'SQL'
\set p random(1, :players)
\set s random(1, 1000000)
WITH clock AS (UPDATE leaderboard_clock SET n = n + 1 WHERE id = 1 RETURNING n),
up AS (INSERT INTO leaderboard AS l (client_id, score, seq) SELECT 'p' || :p, :s, n FROM clock
  ON CONFLICT (client_id) DO UPDATE SET score = excluded.score, seq = excluded.seq
  WHERE l.score <> excluded.score RETURNING score, seq, client_id)
SELECT score, seq, pg_notify('hotrow_lb', 'set ' || score || ' ' || seq || ' ' || client_id) FROM up;
SQL

run() {  # script players -> "tps avg_ms"; each run starts from an empty table
  "${PSQL[@]}" -c "TRUNCATE leaderboard"
  pgbench -h 127.0.0.1 -p "$PGPORT" -U hotrow -n -c "$CLIENTS" -j 2 -T "${DURATION%s}" -D players="$2" \
    -f "$WORK/$1.sql" postgres 2>"$WORK/pgbench.err" |
    awk '/^tps/ { tps = $3 } /latency average/ { avg = $4 } END { printf "%.0f %.2f\n", tps, avg }'
}

echo "| statement | players | tps (median of $ROUNDS) | mean latency ms |"
echo "|---|---|---|---|"
for players in 10000 1; do
  : >"$WORK/before.$players" >"$WORK/after.$players"
  for ((r = 0; r < ROUNDS; r++)); do
    run before "$players" >>"$WORK/before.$players"
    run after "$players" >>"$WORK/after.$players"
  done
  for v in before after; do
    read -r tps avg < <(median_of "$WORK/$v.$players")
    echo "| $v ($([[ $v == before ]] && echo nextval || echo clock row)) | $players | $tps | $avg |"
  done
done
echo "($(machine_line); pgbench -c $CLIENTS -T $DURATION, synchronous_commit on)"
