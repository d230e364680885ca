#!/usr/bin/env bash
# Leaderboard at scale, the embedded backend: BOARDS boards of PLAYERS
# players each (issue 14 asks for 1,000 x 10,000 and one board of
# 10,000,000), written straight into a fresh database (seed time), then
# `hotrow serve` on it: the load at start (from its log), the resident
# memory per player (RSS after the load minus RSS of the same server on an
# empty database), and at -c 1000 the top 10 of one board beside nginx
# serving a file of the same size, a player's rank (GET
# .../players/{id}) and the friends view of 20 ids. Prints the figures;
# writes nothing into docs (paste them: the runs take minutes).
#
# --names: every player has a display name and metadata ("Player <n>",
# {"level":..}), so that every read shows names, most of them read from
# the store (the Board holds the top 100's only).
#
# --redis: one board (`default`) of PLAYERS players on Redis instead
# (appendonly yes, appendfsync always), seeded by `hotrow seed leaderboard
# --redis` through the post script; the memory per player is Redis's
# (used_memory after the seed minus before), since Redis holds the ranks.
#
#   bench/leaderboard-scale.sh [--boards 1000] [--players 10000] [--requests 100000] [--names] [--redis]
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib/common.sh

BOARDS=1000 PLAYERS=10000 REQUESTS=100000 REDIS_MODE=0 NAMES=0
while (($#)); do
  case $1 in
    --redis) REDIS_MODE=1; shift ;;
    --names) NAMES=1; shift ;;
    --boards) BOARDS=$2; shift 2 ;;
    --players) PLAYERS=$2; shift 2 ;;
    --requests) REQUESTS=$2; shift 2 ;;
    -h|--help) bench_usage; exit 0 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done

rss_kb() { awk '/VmRSS/ { print $2 }' "/proc/$1/status"; }
hey_run() {  # name url [method body]: prints the line on stderr, req/s on stdout
  local out="$WORK/hey-$RANDOM.txt"
  if [[ $# -gt 2 ]]; then
    hey -n "$REQUESTS" -c 1000 -t 10 -m "$3" -T application/json -d "$4" "$2" >"$out"
  else
    hey -n "$REQUESTS" -c 1000 -t 10 "$2" >"$out"
  fi
  read -r rps p50 p99 ok bad < <(parse_hey "$out")
  printf '%-44s %8s req/s  p50 %7s ms  p99 %7s ms  (%s ok, %s not)\n' "$1" "$rps" "$p50" "$p99" "$ok" "$bad" >&2
  echo "$rps"
}
# The three reads at -c 1000 on the board at URL, beside nginx serving its
# top 10 as a file.
reads_at_scale() {  # url
  local url=$1 body nport nginx_rps top_rps ids
  body=$(curl -fsS "$url/leaderboard")
  nport=$(free_port)
  start_nginx "$WORK/nginx" "$nport" top.json "$body"
  nginx_rps=$(hey_run "nginx static, ${#body} bytes" "http://127.0.0.1:$nport/top.json")
  top_rps=$(hey_run "top 10" "$url/leaderboard")
  hey_run "rank of player-$((PLAYERS / 2))" "$url/players/player-$((PLAYERS / 2))" >/dev/null
  ids=$(python3 -c 'import json, sys; n = int(sys.argv[1]); print(json.dumps({"clientIds": [f"player-{i * 37 % n}" for i in range(20)]}))' "$PLAYERS")
  hey_run "friends view, 20 ids" "$url/ranks" POST "$ids" >/dev/null
  echo "top 10 / nginx: $(ratio "$top_rps" "$nginx_rps")"
}
since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }

redis_scale() {
  local rport used_before used_after seed_start seed_s port start ready_s
  rport=$(free_port)
  redis-server --port "$rport" --bind 127.0.0.1 --dir "$WORK" --appendonly yes --appendfsync always --save "" \
    --maxclients 20000 --daemonize no >"$WORK/redis.log" 2>&1 &
  BENCH_PIDS+=("$!")
  for _ in $(seq 100); do redis-cli -p "$rport" ping >/dev/null 2>&1 && break; sleep 0.05; done
  used_before=$(redis-cli -p "$rport" info memory | awk -F: '/^used_memory:/ { print $2 + 0 }')
  seed_start=$(date +%s.%N)
  "$HOTROW" seed leaderboard --clients "$PLAYERS" --redis "redis://127.0.0.1:$rport" >"$WORK/seed.log" 2>&1
  seed_s=$(since "$seed_start")
  used_after=$(redis-cli -p "$rport" info memory | awk -F: '/^used_memory:/ { print $2 + 0 }')
  port=$(free_port)
  start=$(date +%s.%N)
  HOTROW_DRAIN_DELAY_MS=0 "$HOTROW" serve --host 127.0.0.1 --port "$port" --db "sqlite:$WORK/x.db" \
    --redis "redis://127.0.0.1:$rport" --log-level warn &
  HOTROW_PID=$!
  BENCH_PIDS+=("$HOTROW_PID")
  wait_http "http://127.0.0.1:$port/healthz" 600
  ready_s=$(since "$start")
  echo "leaderboard at scale on Redis: 1 board x $PLAYERS player(s); $(machine_line)"
  echo "seed (hotrow seed leaderboard --redis: the post script, appendfsync always): ${seed_s} s"
  echo "serve ready: ${ready_s} s (nothing to load: Redis ranks); hotrow RSS $(rss_kb "$HOTROW_PID") kB"
  echo "Redis used_memory: $used_before -> $used_after bytes:" \
    "$(awk -v a="$used_after" -v b="$used_before" -v n="$PLAYERS" 'BEGIN { printf "%.0f", (a - b) / n }') bytes per player"
  reads_at_scale "http://127.0.0.1:$port/api/v1/boards/default"
}

bench_init
if ((REDIS_MODE)); then
  redis_scale
  exit 0
fi
DB="$WORK/scale.db"
"$HOTROW" seed leaderboard --clients 1 --db "sqlite:$DB" >/dev/null  # the schema and `default`
seed_start=$(date +%s.%N)
python3 - "$DB" "$BOARDS" "$PLAYERS" "$NAMES" <<'PY'
import random, sqlite3, sys, time
db, boards, players, names = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1"
c = sqlite3.connect(db)
c.execute("PRAGMA journal_mode=WAL")
c.execute("PRAGMA synchronous=OFF")
now = int(time.time() * 1e6)
rng = random.Random(1)
c.executemany("INSERT INTO lb_board (board_id, sort_order, operator, reset, reset_timezone, ranking, auth, keep_seasons, "
              "created_us, epoch_us) VALUES (?, 'desc', 'replace', 'none', 'UTC', 'unique', 'none', 12, ?, ?)",
              ((f"b-{b}", now, now) for b in range(boards)))
seq = 0
for b in range(boards):
    rows = []
    for p in range(players):
        seq += 1
        name, meta = (f"Player {p}", f'{{"level":{p % 100},"clan":"north"}}') if names else (None, None)
        rows.append((f"b-{b}", f"player-{p}", max(0, int(rng.gauss(5000, 1500))), seq, name, meta,
                     seq if names else 0))
    c.executemany("INSERT INTO lb_score (board_id, season, client_id, score, seq, display_name, metadata, profile_seq) "
                  "VALUES (?, 1, ?, ?, ?, ?, ?, ?)", rows)
    if b % 50 == 49:
        c.commit()
c.execute("UPDATE leaderboard_seq SET last = ?", (seq,))
c.commit()
PY
seed_s=$(awk -v a="$seed_start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')

serve_on() {  # port db log: starts hotrow with info logs; HOTROW_PID
  HOTROW_DRAIN_DELAY_MS=0 "$HOTROW" serve --host 127.0.0.1 --port "$1" --db "sqlite:$2" --log-level info >"$3" 2>&1 &
  HOTROW_PID=$!
  BENCH_PIDS+=("$HOTROW_PID")
  wait_http "http://127.0.0.1:$1/healthz" 600
}

EMPTY_PORT=$(free_port)
"$HOTROW" seed leaderboard --clients 1 --db "sqlite:$WORK/empty.db" >/dev/null
serve_on "$EMPTY_PORT" "$WORK/empty.db" "$WORK/empty.log"
sleep 1
empty_kb=$(rss_kb "$HOTROW_PID")
bench_stop_pids

PORT=$(free_port)
start=$(date +%s.%N)
serve_on "$PORT" "$DB" "$WORK/serve.log"
ready_s=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
sleep 1
full_kb=$(rss_kb "$HOTROW_PID")
load_line=$(grep -m1 "leaderboard: loaded" "$WORK/serve.log" || true)
total=$((BOARDS * PLAYERS))
per_player=$(awk -v f="$full_kb" -v e="$empty_kb" -v n="$total" 'BEGIN { printf "%.0f", (f - e) * 1024 / n }')

BOARD="b-$((BOARDS / 2))"
echo "leaderboard at scale: $BOARDS board(s) x $PLAYERS player(s) = $total$( ((NAMES)) && echo ', every one named'); $(machine_line)"
echo "seed (python sqlite3, WAL, synchronous off): ${seed_s} s"
echo "serve ready: ${ready_s} s; ${load_line#*info }"
echo "RSS: ${empty_kb} kB empty, ${full_kb} kB loaded: ${per_player} bytes per player"
echo "board $BOARD:"
reads_at_scale "http://127.0.0.1:$PORT/api/v1/boards/$BOARD"
