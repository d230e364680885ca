#!/usr/bin/env bash
# Date-plan benchmark: the reference post's hey runs, plus wrk for capacity,
# each next to nginx serving a static 205-byte JSON file with the same tool
# at the same concurrency in the same run. Writes its table into
# docs/benchmarks.md (section "dateplan") unless --no-docs.
#
#   bench/dateplan.sh [--plans 100000] [--duration 10s] [--repeat 3] [--no-docs]
#
# Every figure is the median of --repeat runs. Load targets 127.0.0.1 only,
# every run is bounded in count or time, and the script stops what it
# started, by PID.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib/common.sh

PLANS=100000 DURATION=10s REPEAT=3 WRITE_DOCS=1
while (($#)); do
  case $1 in
    --plans) PLANS=$2; shift 2 ;;
    --duration) DURATION=$2; shift 2 ;;
    --repeat) REPEAT=$2; shift 2 ;;
    --no-docs) WRITE_DOCS=0; shift ;;
    -h|--help) bench_usage; exit 0 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done

bench_init
echo "work dir: $WORK"
"$HOTROW" seed dateplans --count "$PLANS" --db "sqlite:$WORK/bench.db"
HPORT=$(free_port)
start_hotrow "$HPORT" --db "sqlite:$WORK/bench.db"

NPORT=$(free_port)
# A plan-shaped JSON document of exactly 205 bytes (the reference's Size/request).
static_of() { echo -n '{"id":1,"title":"インドカレー屋に行く","content":"'"$(printf '%*s' "$1" '' | tr ' ' 'x')"'","category":"Indoor","like":0}'; }
static=$(static_of $((205 - $(static_of 0 | wc -c))))
start_nginx "$WORK/nginx" "$NPORT" plan.json "$static"
echo "static file: $(wc -c <"$WORK/nginx/www/plan.json") bytes; hotrow GET /datePlan/1: $(curl -s "http://127.0.0.1:$HPORT/datePlan/1" | wc -c) bytes"

write_post_lua "$WORK/like.lua"

H="http://127.0.0.1:$HPORT"
N="http://127.0.0.1:$NPORT/plan.json"
like_count() { curl -s "$H/datePlan/1" | sed -E 's/.*"like":([0-9]+).*/\1/'; }


ROWS=()
# run NAME TOOL(hey|wrk) CHECK_LIKES(0|1) -- hotrow-args... -- nginx-args...
run() {
  local name=$1 tool=$2 check=$3; shift 3
  [[ $1 == -- ]] && shift
  local hargs=() nargs=()
  while [[ $1 != -- ]]; do hargs+=("$1"); shift; done
  shift
  nargs=("$@")
  local i hfiles=() nfiles=() before after added=0 ok_total=0 key
  key=$(echo "$name" | tr -c 'A-Za-z0-9' '_')
  for ((i = 1; i <= REPEAT; i++)); do
    "$tool" "${nargs[@]}" >"$WORK/n.$key.$i.txt" 2>&1
    before=$(like_count)
    "$tool" "${hargs[@]}" >"$WORK/h.$key.$i.txt" 2>&1
    after=$(like_count)
    "parse_$tool" "$WORK/n.$key.$i.txt" >"$WORK/n.$key.$i.parsed"
    "parse_$tool" "$WORK/h.$key.$i.txt" >"$WORK/h.$key.$i.parsed"
    nfiles+=("$WORK/n.$key.$i.parsed")
    hfiles+=("$WORK/h.$key.$i.parsed")
    added=$((added + after - before))
    ok_total=$((ok_total + $(awk '{print $4}' "$WORK/h.$key.$i.parsed")))
  done
  read -r hr hp50 hp99 _ hbad <<<"$(median_of "${hfiles[@]}")"
  read -r nr np50 np99 _ _ <<<"$(median_of "${nfiles[@]}")"
  local verdict="-"
  if ((check)); then
    if [[ $tool == hey ]]; then
      [[ $added -eq $ok_total ]] && verdict="exact: +$added = $ok_total×200" || verdict="MISMATCH: +$added vs $ok_total×200"
    else
      # wrk does not count requests still in flight when it stops.
      local slack=$((REPEAT * 100))
      ((added >= ok_total && added <= ok_total + slack)) && verdict="ok: +$added for $ok_total×200 (≤$slack in flight at stop)" ||
        verdict="MISMATCH: +$added vs $ok_total×200"
    fi
  fi
  printf '%-34s hotrow %8s req/s p50 %6s ms p99 %6s ms | nginx %8s req/s p50 %6s p99 %6s | ratio %s | non-2xx %s | %s\n' \
    "$name" "$hr" "$hp50" "$hp99" "$nr" "$np50" "$np99" "$(ratio "$hr" "$nr")" "$hbad" "$verdict"
  ROWS+=("| $name | $hr | $hp50 | $hp99 | $nr | $np50 | $np99 | $(ratio "$hr" "$nr") | $hbad | $verdict |")
}

run "hey -n 2000 -c 50 GET /datePlan/" hey 0 -- -n 2000 -c 50 "$H/datePlan/" -- -n 2000 -c 50 "$N"
run "hey -n 20000 -c 50 GET /datePlan/" hey 0 -- -n 20000 -c 50 "$H/datePlan/" -- -n 20000 -c 50 "$N"
run "hey -n 1000 -c 100 POST like" hey 1 -- -n 1000 -c 100 -m POST "$H/datePlan/1/like" -- -n 1000 -c 100 "$N"
run "hey -n 20000 -c 100 POST like" hey 1 -- -n 20000 -c 100 -m POST "$H/datePlan/1/like" -- -n 20000 -c 100 "$N"
run "wrk -c50 -d$DURATION GET /datePlan/" wrk 0 -- -t2 -c50 -d"$DURATION" --latency "$H/datePlan/" -- \
  -t2 -c50 -d"$DURATION" --latency "$N"
run "wrk -c100 -d$DURATION POST like" wrk 1 -- -t2 -c100 -d"$DURATION" --latency -s "$WORK/like.lua" \
  "$H/datePlan/1/like" -- -t2 -c100 -d"$DURATION" --latency "$N"

final=$(like_count)
echo "plan 1 ends with $final likes"

if ((WRITE_DOCS)); then
  section="$WORK/section.md"
  {
    echo "Measured $(machine_line) by \`bench/dateplan.sh --plans $PLANS --duration $DURATION --repeat $REPEAT\`;"
    echo "$PLANS plans, hotrow with its defaults (one event loop per core, SQLite, synchronous=FULL), nginx"
    echo "$(nginx -v 2>&1 | sed 's/.*\///') with worker_processes auto serving a $(wc -c <"$WORK/nginx/www/plan.json")-byte static JSON file to the same tool at the same"
    echo "concurrency. Medians of $REPEAT runs. The load generator shares the 2 cores with the server."
    echo
    echo "| run | hotrow req/s | p50 ms | p99 ms | nginx req/s | p50 ms | p99 ms | hotrow/nginx | non-2xx | like count check |"
    echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"
    printf '%s\n' "${ROWS[@]}"
  } >"$section"
  replace_section docs/benchmarks.md dateplan "$section"
  echo "wrote docs/benchmarks.md (section dateplan)"
fi
