#!/usr/bin/env bash
# Grants beside everything else, on one served instance: `hotrow serve` on a
# 1M-card embedded database, `hotrow simulate pointcard --url` driving point
# uses and a grant every 10 s against it, and date-plan likes beside them,
# open-loop at a fixed rate (`hey -q`: a closed loop would charge any CPU the
# grant uses to queueing). Then every like and every grant window (from the
# grant's request to its fold's end, read back from GET /api/v1/grants/{id})
# is compared: likes during a grant against likes outside one, and the
# simulator's point uses the same way. Writes docs/benchmarks.md (section
# "grant-overlap") unless --no-docs.
#
#   bench/grant-overlap.sh [--duration 60s] [--parallel 64] [--like-rate 0] [--postgres] [--no-docs]
#
# --postgres serves a throwaway PostgreSQL 15 cluster instead of the embedded
# store (`--db-pool 16`), and writes the section "grant-overlap-postgres".
#
# --like-rate 0 (the default) measures the like capacity first (closed loop,
# 5 s) and uses half of it. About 2 minutes plus the seed (~30 s).
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib/common.sh

DURATION=60s PARALLEL=64 LIKE_RATE=0 WRITE_DOCS=1 CARDS=1000000 POSTGRES=0
while (($#)); do
  case $1 in
    --duration) DURATION=$2; shift 2 ;;
    --parallel) PARALLEL=$2; shift 2 ;;
    --like-rate) LIKE_RATE=$2; shift 2 ;;
    --cards) CARDS=$2; shift 2 ;;
    --postgres) POSTGRES=1; shift ;;
    --no-docs) WRITE_DOCS=0; shift ;;
    -h|--help) bench_usage; exit 0 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done

bench_init
OUT=bench/results/grant-overlap
mkdir -p "$OUT"
DB="sqlite:$WORK/g.db" SECTION=grant-overlap SERVE_ARGS=()
if ((POSTGRES)); then
  pg_start max_connections=300 shared_buffers=1GB
  trap 'bench_stop_pids; pg_stop; bench_cleanup' EXIT  # the server before its database
  "$PGBIN/psql" "postgresql://hotrow@127.0.0.1:$PGPORT/postgres" -XAtqc "CREATE DATABASE g"
  DB="postgresql://hotrow@127.0.0.1:$PGPORT/g" SECTION=grant-overlap-postgres SERVE_ARGS=(--db-pool 16)
fi
"$HOTROW" seed dateplans --count 10000 --db "$DB" >/dev/null 2>&1
"$HOTROW" seed pointcard --cards "$CARDS" --stores 10000 --history "$CARDS" --db "$DB" >/dev/null 2>&1
PORT=$(free_port)
start_hotrow "$PORT" --db "$DB" --admin-token bench --max-connections 4096 "${SERVE_ARGS[@]}"
URL=http://127.0.0.1:$PORT

CONC=50
if [[ $LIKE_RATE == 0 ]]; then
  hey -z 5s -c "$CONC" -m POST "$URL/datePlan/1/like" >"$OUT/capacity.txt"
  capacity=$(parse_hey "$OUT/capacity.txt" | cut -d' ' -f1)
  LIKE_RATE=$((capacity / 2))
fi
PER_WORKER=$(awk -v r="$LIKE_RATE" -v c="$CONC" 'BEGIN { printf "%.2f", r / c }')
echo "likes: open loop at $LIKE_RATE/s ($CONC workers at $PER_WORKER/s each)"

# hey's CSV gives each request's offset from its start: note the start.
hey_start=$(date +%s.%N)
hey -z "$DURATION" -c "$CONC" -q "$PER_WORKER" -m POST -o csv "$URL/datePlan/1/like" >"$OUT/likes.csv" &
HEY_PID=$!
BENCH_PIDS+=("$HEY_PID")
"$HOTROW" simulate pointcard --url "$URL" --admin-token bench --parallel "$PARALLEL" --duration "$DURATION" \
  --out "$OUT" >"$OUT/simulation.out" 2>&1
wait "$HEY_PID" || true
# Every grant's window, from the server: request ≈ applied − (query + update + commit).
for id in $(seq 1 100); do
  curl -fs -H 'Authorization: Bearer bench' "$URL/api/v1/grants/$id" || break
  echo
done >"$OUT/grants.jsonl"

python3 - "$OUT" "$hey_start" "$LIKE_RATE" >"$OUT/overlap.txt" <<'EOF'
import csv, datetime, json, sys
out, hey_start, rate = sys.argv[1], float(sys.argv[2]), sys.argv[3]

def epoch(text):
    return datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=datetime.timezone.utc).timestamp()

windows = []
for line in open(f"{out}/grants.jsonl"):
    if not line.strip():
        continue
    g = json.loads(line)
    if g["state"] != "folded":
        continue
    applied = epoch(g["appliedAt"])
    windows.append((applied - (g["queryMs"] + g["updateMs"] + g["commitMs"]) / 1000, epoch(g["foldedAt"]), g))

def rank(v, q):
    return v[min(len(v) - 1, max(0, int(-(-q * len(v) // 1)) - 1))] if v else 0

def row(label, v):
    v = sorted(v)
    return f"  {label:<28} {len(v):>8} {rank(v, .5):>9.2f} {rank(v, .99):>9.2f} {rank(v, .999):>9.2f} {v[-1] if v else 0:>9.2f}"

during, outside, failed = [], [], 0
for r in csv.DictReader(open(f"{out}/likes.csv")):
    start = hey_start + float(r["offset"])
    ms = float(r["response-time"]) * 1000
    if r["status-code"] != "200":
        failed += 1
        continue
    (during if any(a <= start + ms / 1000 and start <= b for a, b, _ in windows) else outside).append(ms)

sim = json.load(open(f"{out}/simulation.json"))["runs"][0]
print(f"{len(windows)} grant(s); likes open-loop at {rate}/s; {failed} like(s) not 200")
print(f"  {'':<28} {'count':>8} {'p50 ms':>9} {'p99 ms':>9} {'p99.9 ms':>9} {'max ms':>9}")
print(row("likes during a grant", during))
print(row("likes outside grants", outside))
for key, label in (("successDuringGrants", "point uses during a grant"), ("successOutsideGrants", "point uses outside grants")):
    s = sim[key]
    print(f"  {label:<28} {s['count']:>8} {s['medianMs']:>9.2f} {s['p99Ms']:>9.2f} {s['p999Ms']:>9.2f} {s['maxMs']:>9.2f}")
print("grants (answer = request to 201; fold = after the answer; ms):")
for a, b, g in windows:
    print(f"  grant {g['grantId']}: {g['cards']} cards, answer {(g['queryMs'] + g['updateMs'] + g['commitMs']):.0f} "
          f"(query {g['queryMs']:.0f}, staging {g['updateMs']:.0f}, apply commit {g['commitMs']:.0f}), "
          f"fold {g['foldMs']:.0f}, window {(b - a) * 1000:.0f}")
EOF
cat "$OUT/overlap.txt"
"$HOTROW" check pointcard --db "$DB" | tee -a "$OUT/overlap.txt"

if ((WRITE_DOCS)); then
  section="$WORK/section.md"
  {
    echo "Measured $(machine_line) by \`bench/grant-overlap.sh --duration $DURATION --parallel $PARALLEL\`"
    echo "(one \`hotrow serve\` on $CARDS cards, ${DB%%:*}; \`simulate pointcard --url\` at parallel $PARALLEL with a grant every 10 s; likes beside, open loop)."
    echo
    echo '```'
    cat "$OUT/overlap.txt"
    echo '```'
  } >"$section"
  replace_section docs/benchmarks.md "$SECTION" "$section"
  echo "wrote docs/benchmarks.md (section $SECTION)"
fi
