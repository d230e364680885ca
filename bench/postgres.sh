#!/usr/bin/env bash
# hotrow on PostgreSQL, beside pgbench running the same statements at the
# same concurrency on the same cluster:
#   likes (hot row) at c=100, random GET at c=50, top 10 at c=1000,
#   the point-card simulator at SERIALIZABLE,
#   two instances behind nginx against one instance direct.
# Starts its own PostgreSQL 15 cluster (as the postgres user when run as
# root) and stops it at the end. Writes docs/benchmarks.md (sections
# "postgres" and "cluster") unless --no-docs.
#
#   bench/postgres.sh [--duration 10s] [--sim-duration 60s] [--parallel 1,32,64,128,192] [--no-docs]
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib/common.sh

DURATION=10s SIM_DURATION=60s PARALLEL=1,32,64,128,192 REPEAT=3 WRITE_DOCS=1
while (($#)); do
  case $1 in
    --duration) DURATION=$2; shift 2 ;;
    --sim-duration) SIM_DURATION=$2; shift 2 ;;
    --parallel) PARALLEL=$2; shift 2 ;;
    --repeat) REPEAT=$2; shift 2 ;;
    --no-docs) WRITE_DOCS=0; shift ;;
    -h|--help) bench_usage; exit 0 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done

bench_init
pg_start max_connections=1100 shared_buffers=1GB
trap 'pg_stop; bench_cleanup' EXIT
PGURL="postgresql://hotrow@127.0.0.1:$PGPORT"
psql_() { "$PGBIN/psql" "$PGURL/$1" -XAtqc "$2"; }
psql_ postgres "CREATE DATABASE hotrow"
psql_ postgres "CREATE DATABASE pgb"
DB="$PGURL/hotrow"
"$HOTROW" seed dateplans --count 100000 --db "$DB"
"$HOTROW" seed leaderboard --clients 10000 --db "$DB"

secs() { echo "${1%s}"; }

# pgbench: "tps p50? -" -> we report tps and average latency.
pgbench_run() {  # db clients file
  "$PGBIN/pgbench" -n -c "$2" -j 2 -T "$(secs "$DURATION")" -f "$3" "$PGURL/$1" 2>&1 |
    awk '/^tps/ { tps = $3 } /latency average/ { avg = $4 } /number of failed/ { failed = $5 }
         END { printf "%.0f %.2f %d\n", tps, avg, failed }'
}
cat >"$WORK/hot.sql" <<'SQL'
UPDATE hot SET n = n + 1 WHERE id = 1 RETURNING n;
SQL
cat >"$WORK/get.sql" <<'SQL'
\set id random(1, 100000)
SELECT id, title, content, category, "like" FROM datePlans WHERE id = :id;
SQL
cat >"$WORK/top.sql" <<'SQL'
SELECT client_id, score FROM lb_score WHERE board_id = 'default' AND season = 1 ORDER BY score DESC, seq LIMIT 10;
SQL
psql_ pgb "CREATE TABLE hot (id int PRIMARY KEY, n bigint NOT NULL); INSERT INTO hot VALUES (1, 0)"
psql_ hotrow "CREATE INDEX IF NOT EXISTS lb_score_rank ON lb_score (board_id, season, score DESC, seq)"

echo "pgbench ceilings..."
read -r hot_tps hot_avg _ <<<"$(pgbench_run pgb 100 "$WORK/hot.sql")"
read -r get_tps get_avg _ <<<"$(pgbench_run hotrow 50 "$WORK/get.sql")"
read -r top_tps top_avg _ <<<"$(pgbench_run hotrow 1000 "$WORK/top.sql")"
echo "pgbench: hot-row UPDATE c=100 $hot_tps tps; random SELECT c=50 $get_tps tps; top-10 SELECT c=1000 $top_tps tps"

HPORT=$(free_port)
start_hotrow "$HPORT" --db "$DB" --db-pool 8
H="http://127.0.0.1:$HPORT"
write_post_lua "$WORK/like.lua"
like_count() { curl -s "$1/datePlan/1" | sed -E 's/.*"like":([0-9]+).*/\1/'; }

ROWS=()
# bench NAME TOOL CHECK URL_BASE ARGS... (the URL is the last argument)
bench() {
  local name=$1 tool=$2 check=$3 base=$4; shift 4
  local files=() i key before after added=0 ok=0
  key=$(echo "$name" | tr -c 'A-Za-z0-9' '_')
  for ((i = 1; i <= REPEAT; i++)); do
    before=$(like_count "$base")
    "$tool" "$@" >"$WORK/$key.$i.txt" 2>&1 || true
    after=$(like_count "$base")
    "parse_$tool" "$WORK/$key.$i.txt" >"$WORK/$key.$i.parsed"
    files+=("$WORK/$key.$i.parsed")
    added=$((added + after - before))
    ok=$((ok + $(awk '{print $4}' "$WORK/$key.$i.parsed")))
  done
  read -r rps p50 p99 _ bad <<<"$(median_of "${files[@]}")"
  local verdict="-"
  if ((check)); then
    if [[ $tool == hey ]]; then
      [[ $added -eq $ok ]] && verdict="exact: +$added = $ok×200" || verdict="MISMATCH: +$added vs $ok×200"
    else
      verdict="+$added for $ok×200"
    fi
  fi
  printf '%-44s %8s req/s  p50 %6s ms  p99 %7s ms  non-2xx %s  %s\n' "$name" "$rps" "$p50" "$p99" "$bad" "$verdict"
  ROWS+=("| $name | $rps | $p50 | $p99 | $bad | $verdict |")
}

bench "likes: hey -n 20000 -c 100" hey 1 "$H" -n 20000 -c 100 -m POST "$H/datePlan/1/like"
bench "likes: wrk -c100 -d$DURATION" wrk 1 "$H" -t2 -c100 -d"$DURATION" --latency -s "$WORK/like.lua" "$H/datePlan/1/like"
bench "random GET: wrk -c50 -d$DURATION" wrk 0 "$H" -t2 -c50 -d"$DURATION" --latency "$H/datePlan/"
bench "top 10: wrk -c1000 -d$DURATION" wrk 0 "$H" -t2 -c1000 -d"$DURATION" --latency --timeout 10s "$H/api/v1/leaderboard"

# Two instances behind nginx against one direct.
H2PORT=$(free_port)
start_hotrow "$H2PORT" --db "$DB" --db-pool 8
NPORT=$(free_port)
mkdir -p "$WORK/nginx"
cat >"$WORK/nginx/nginx.conf" <<CONF
worker_processes auto;
pid $WORK/nginx/nginx.pid;
error_log $WORK/nginx/error.log warn;
daemon off;
worker_rlimit_nofile 65536;
events { worker_connections 16384; }
http {
  access_log off;
  client_body_temp_path $WORK/nginx/body;
  proxy_temp_path $WORK/nginx/proxy;
  upstream hotrow { server 127.0.0.1:$HPORT; server 127.0.0.1:$H2PORT; keepalive 256; }
  server {
    listen 127.0.0.1:$NPORT backlog=4096;
    location / { proxy_pass http://hotrow; proxy_http_version 1.1; proxy_set_header Connection ""; }
  }
}
CONF
nginx -c "$WORK/nginx/nginx.conf" -p "$WORK/nginx" &
BENCH_PIDS+=("$!")
wait_http "http://127.0.0.1:$NPORT/healthz" 10
N="http://127.0.0.1:$NPORT"
CROWS=()
cluster() {  # name tool check url args... (as bench), into the cluster table
  local name=$1; shift
  bench "$name" "$@"
  CROWS+=("${ROWS[-1]}")
  unset 'ROWS[-1]'
}
cluster "1 instance direct: likes wrk -c100" wrk 1 "$H" -t2 -c100 -d"$DURATION" --latency -s "$WORK/like.lua" "$H/datePlan/1/like"
cluster "2 instances via nginx: likes wrk -c100" wrk 1 "$N" -t2 -c100 -d"$DURATION" --latency -s "$WORK/like.lua" "$N/datePlan/1/like"
cluster "1 instance direct: random GET wrk -c50" wrk 0 "$H" -t2 -c50 -d"$DURATION" --latency "$H/datePlan/"
cluster "2 instances via nginx: random GET wrk -c50" wrk 0 "$N" -t2 -c50 -d"$DURATION" --latency "$N/datePlan/"
final_a=$(like_count "$H") final_b=$(like_count "http://127.0.0.1:$H2PORT")
sql_count=$(psql_ hotrow 'SELECT "like" FROM datePlans WHERE id = 1')
echo "plan 1: PostgreSQL says $sql_count likes; instance A's read model $final_a, instance B's $final_b"

# Stop the servers before the simulator (it creates its own databases).
bench_stop_pids

echo "point-card simulator on PostgreSQL..."
"$HOTROW" simulate pointcard --db "$PGURL/postgres" --db-pool 16 --parallel "$PARALLEL" --duration "$SIM_DURATION" \
  --out "$WORK/sim" | tee "$WORK/sim.out" | grep -v '^parallel'

if ((WRITE_DOCS)); then
  section="$WORK/section.md"
  {
    echo "Measured $(machine_line) by \`bench/postgres.sh --duration $DURATION --sim-duration $SIM_DURATION\`;"
    echo "PostgreSQL $("$PGBIN/postgres" --version | awk '{print $3}') on the same machine (fsync on, synchronous_commit on,"
    echo "shared_buffers 1GB), hotrow with \`--db-pool 8\`, 100,000 plans, 10,000 players. Medians of $REPEAT runs."
    echo
    echo "pgbench, the same statements at the same concurrency on the same cluster:"
    echo
    echo "| pgbench | clients | tps | avg latency ms |"
    echo "|---|---:|---:|---:|"
    echo "| \`UPDATE hot SET n = n + 1 WHERE id = 1 RETURNING n\` (one hot row) | 100 | $hot_tps | $hot_avg |"
    echo "| \`SELECT … FROM datePlans WHERE id = random\` | 50 | $get_tps | $get_avg |"
    echo "| \`SELECT … FROM lb_score WHERE board_id = 'default' … ORDER BY score DESC, seq LIMIT 10\` (indexed) | 1000 | $top_tps | $top_avg |"
    echo
    echo "| hotrow on PostgreSQL | req/s | p50 ms | p99 ms | non-2xx | like count check |"
    echo "|---|---:|---:|---:|---:|---|"
    printf '%s\n' "${ROWS[@]}"
    echo
    echo "Point-card simulator on PostgreSQL, SERIALIZABLE ($SIM_DURATION per parallelism):"
    echo
    echo '```'
    cat "$WORK/sim/simulation.txt"
    echo '```'
  } >"$section"
  replace_section docs/benchmarks.md postgres "$section"
  {
    echo "Measured $(machine_line) by \`bench/postgres.sh\`: two hotrow instances (\`--db-pool 8\` each) behind nginx"
    echo "against one instance directly, on the same PostgreSQL, all on the same 2 cores as the load generator."
    echo "After the runs plan 1 had $sql_count likes in PostgreSQL; instance A's read model said $final_a, B's $final_b."
    echo
    echo "| run | req/s | p50 ms | p99 ms | non-2xx | like count check |"
    echo "|---|---:|---:|---:|---:|---|"
    printf '%s\n' "${CROWS[@]}"
  } >"$WORK/cluster.md"
  replace_section docs/benchmarks.md cluster "$WORK/cluster.md"
  echo "wrote docs/benchmarks.md (sections postgres and cluster)"
fi
