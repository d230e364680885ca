#!/usr/bin/env bash
# Grants beside everything else, on one served instance: `hotrow serve` on a
# 1M-card embedded database, `hotrow simulate pointcard --url` driving point
# uses and a grant every 10 s against it, and the other services' writes
# beside them, each open-loop at a fixed rate (`hey -q`: a closed loop would
# charge any CPU the grant uses to queueing), together about half of the
# server's capacity: date-plan likes at 40% of their own measured capacity,
# scores (one player's, `POST /api/v1/score`) and plan edits
# (`PUT /datePlan/2`) at 5% of theirs. Meanwhile `hotrow check pointcard
# --sample-cards 1000 --for DURATION` checks every invariant, each grant
# recomputed, on one random range of 1,000 cards per read transaction, over
# and over: a grant that any snapshot saw half applied fails it. Then every
# write and every grant window (from the grant's request to its fold's end,
# read back from GET /api/v1/grants/{id}) is compared: writes during a grant
# against writes outside one, and the simulator's point uses the same way.
# Writes docs/benchmarks.md (section "grant-overlap") unless --no-docs.
#
#   bench/grant-overlap.sh [--duration 60s] [--parallel 64] [--like-rate 0] [--score-rate 0]
#                          [--edit-rate 0] [--postgres] [--grant-workers 1] [--no-docs]
#
# --postgres serves a throwaway PostgreSQL 15 cluster instead of the embedded
# store (`--db-pool 16`), and writes the section "grant-overlap-postgres".
# --grant-workers N is passed to `hotrow serve` (PostgreSQL's staging ranges
# and fold workers; see docs/pointcard.md).
#
# A rate of 0 (the default) measures that write's capacity first (closed
# loop, 5 s) and takes its share of it; N fixes it at N/s. About 2 minutes
# plus the seed (~30 s).
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib/common.sh

DURATION=60s PARALLEL=64 LIKE_RATE=0 SCORE_RATE=0 EDIT_RATE=0 WRITE_DOCS=1 CARDS=1000000 POSTGRES=0 GRANT_WORKERS=
while (($#)); do
  case $1 in
    --duration) DURATION=$2; shift 2 ;;
    --parallel) PARALLEL=$2; shift 2 ;;
    --like-rate) LIKE_RATE=$2; shift 2 ;;
    --score-rate) SCORE_RATE=$2; shift 2 ;;
    --edit-rate) EDIT_RATE=$2; shift 2 ;;
    --cards) CARDS=$2; shift 2 ;;
    --postgres) POSTGRES=1; shift ;;
    --grant-workers) GRANT_WORKERS=$2; shift 2 ;;
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
[[ -n $GRANT_WORKERS ]] && SERVE_ARGS+=(--grant-workers "$GRANT_WORKERS")
start_hotrow "$PORT" --db "$DB" --admin-token bench --max-connections 4096 "${SERVE_ARGS[@]}"
URL=http://127.0.0.1:$PORT

CONC=50
LIKE=(-m POST "$URL/datePlan/1/like")
SCORE=(-m POST -T application/json -H 'ClientId: grant-overlap' -d '{"score":42}' "$URL/api/v1/score")
EDIT=(-m PUT -T application/json -H 'Authorization: Bearer bench'
  -d '{"title":"Edited beside a grant","content":"bench/grant-overlap.sh","category":"Bench"}' "$URL/datePlan/2")
# rate NAME SHARE RATE REQUEST...: RATE, or SHARE of the capacity measured now.
rate() {
  local name=$1 share=$2 fixed=$3 r; shift 3
  if [[ $fixed != 0 ]]; then
    r=$fixed
  else
    hey -z 5s -c "$CONC" "$@" >"$OUT/capacity-$name.txt" || true
    r=$(parse_hey "$OUT/capacity-$name.txt" | awk -v s="$share" '{ printf "%d", $1 * s }')
  fi
  # hey -q 0 means no limit: a rate that came out 0 (or nothing) would run flat out.
  if ! [[ $r =~ ^[0-9]+$ ]] || ((r < 10)); then
    echo "grant-overlap: the $name rate came out as '${r}'/s; measure again or pass --${name%s}-rate" >&2
    exit 1
  fi
  echo "$r"
}
LIKE_RATE=$(rate likes 0.4 "$LIKE_RATE" "${LIKE[@]}") || exit 1
SCORE_RATE=$(rate scores 0.05 "$SCORE_RATE" "${SCORE[@]}") || exit 1
EDIT_RATE=$(rate edits 0.05 "$EDIT_RATE" "${EDIT[@]}") || exit 1
per_worker() { awk -v r="$1" -v c="$2" 'BEGIN { printf "%.2f", r / c }'; }
echo "open loop: likes $LIKE_RATE/s, scores $SCORE_RATE/s, edits $EDIT_RATE/s"

# hey's CSV gives each request's offset from its start: note the start.
hey_start=$(date +%s.%N)
hey -z "$DURATION" -c "$CONC" -q "$(per_worker "$LIKE_RATE" "$CONC")" -o csv "${LIKE[@]}" >"$OUT/likes.csv" &
BENCH_PIDS+=($!)
hey -z "$DURATION" -c 10 -q "$(per_worker "$SCORE_RATE" 10)" -o csv "${SCORE[@]}" >"$OUT/scores.csv" &
BENCH_PIDS+=($!)
hey -z "$DURATION" -c 10 -q "$(per_worker "$EDIT_RATE" 10)" -o csv "${EDIT[@]}" >"$OUT/edits.csv" &
BENCH_PIDS+=($!)
LOADS=("${BENCH_PIDS[@]: -3}")
"$HOTROW" check pointcard --db "$DB" --sample-cards 1000 --for "$DURATION" >"$OUT/check-during.txt" 2>&1 &
CHECK_PID=$!
BENCH_PIDS+=("$CHECK_PID")
"$HOTROW" simulate pointcard --url "$URL" --admin-token bench --cards "$CARDS" --parallel "$PARALLEL" \
  --duration "$DURATION" \
  --out "$OUT" >"$OUT/simulation.out" 2>&1
wait "${LOADS[@]}" || true
check_status=0
wait "$CHECK_PID" || check_status=$?
# Every grant's window, from the server: request ≈ applied − (query + update + commit).
for id in $(seq 1 100); do
  curl -fs -H 'Authorization: Bearer bench' "$URL/api/v1/grants/$id" || break
  echo
done >"$OUT/grants.jsonl"

python3 - "$OUT" "$hey_start" "likes $LIKE_RATE/s, scores $SCORE_RATE/s, edits $EDIT_RATE/s" >"$OUT/overlap.txt" <<'EOF'
import csv, datetime, json, sys
out, hey_start, rates = sys.argv[1], float(sys.argv[2]), sys.argv[3]

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

def split(name):
    during, outside, failed = [], [], 0
    for r in csv.DictReader(open(f"{out}/{name}.csv")):
        start = hey_start + float(r["offset"])
        ms = float(r["response-time"]) * 1000
        if r["status-code"] != "200":
            failed += 1
            continue
        (during if any(a <= start + ms / 1000 and start <= b for a, b, _ in windows) else outside).append(ms)
    return during, outside, failed

loads = {name: split(name) for name in ("likes", "scores", "edits")}
sim = json.load(open(f"{out}/simulation.json"))["runs"][0]
failed = ", ".join(f"{v[2]} {k}" for k, v in loads.items())
print(f"{len(windows)} grant(s); writes open-loop at {rates}; not 200: {failed}")
print(f"  {'':<28} {'count':>8} {'p50 ms':>9} {'p99 ms':>9} {'p99.9 ms':>9} {'max ms':>9}")
for name, (during, outside, _) in loads.items():
    print(row(f"{name} during a grant", during))
    print(row(f"{name} outside grants", outside))
for key, label in (("successDuringGrants", "point uses during a grant"), ("successOutsideGrants", "point uses outside grants")):
    s = sim[key]
    print(f"  {label:<28} {s['count']:>8} {s['medianMs']:>9.2f} {s['p99Ms']:>9.2f} {s['p999Ms']:>9.2f} {s['maxMs']:>9.2f}")
print("grants (answer = request to 201; fold = after the answer; ms):")
for a, b, g in windows:
    print(f"  grant {g['grantId']}: {g['cards']} cards, answer {(g['queryMs'] + g['updateMs'] + g['commitMs']):.0f} "
          f"(query {g['queryMs']:.0f}, staging {g['updateMs']:.0f}, apply commit {g['commitMs']:.0f}), "
          f"fold {g['foldMs']:.0f}, window {(b - a) * 1000:.0f}")
EOF
{
  echo "beside it, \`hotrow check pointcard --sample-cards 1000\` (exit $check_status):"
  sed 's/^/  /' "$OUT/check-during.txt"
  echo "afterwards, \`hotrow check pointcard\`:"
} >>"$OUT/overlap.txt"
cat "$OUT/overlap.txt"
"$HOTROW" check pointcard --db "$DB" >"$OUT/check-after.txt" 2>&1 && after_status=0 || after_status=$?
sed 's/^/  /' "$OUT/check-after.txt" | tee -a "$OUT/overlap.txt"
# A checker that failed, or saw no grant at all (nothing proven: a run too
# short, or grants too small to be caught), fails the run; no docs.
if ((check_status != 0 || after_status != 0)); then
  echo "grant-overlap: the point card's check failed (beside: exit $check_status, after: exit $after_status)" >&2
  exit 1
fi
if grep -q ': 0 saw a grant staging, 0 a grant applied' "$OUT/check-during.txt"; then
  echo "grant-overlap: no snapshot of the checker beside the load overlapped a grant; nothing was proven" >&2
  exit 1
fi

if ((WRITE_DOCS)); then
  section="$WORK/section.md"
  {
    echo "Measured $(machine_line) by \`bench/grant-overlap.sh --duration $DURATION --parallel $PARALLEL\`"
    echo "(one \`hotrow serve\` on $CARDS cards, ${DB%%:*}; \`simulate pointcard --url\` at parallel $PARALLEL with a grant every 10 s;"
    echo "likes, scores and plan edits beside, open loop; \`hotrow check pointcard --sample-cards 1000\` beside, then on everything)."
    echo
    echo '```'
    cat "$OUT/overlap.txt"
    echo '```'
  } >"$section"
  replace_section docs/benchmarks.md "$SECTION" "$section"
  echo "wrote docs/benchmarks.md (section $SECTION)"
fi
