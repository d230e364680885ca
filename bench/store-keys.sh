#!/usr/bin/env bash
# What a store key costs a payment: an older build (--before, such as 0.9.0
# built from its tag in a worktree) against this one paying anonymously and
# this one paying with a store key, in alternating rounds.
#   SQLite: hey -z 10s -c 32 of +1 charges on one card (the writer is the
#     limit); each run on a fresh copy of one seeded template.
#   PostgreSQL (--pg): a throwaway PostgreSQL 15 cluster, a database seeded
#     per run, wrk -t2 -c32 -d10s of +1 charges on random cards 1..10000,
#     every connection with the same key (its row is held FOR SHARE by every
#     payment: the new cost).
# --amount -1 sends payments instead (a payment reads what the card's
# holds keep, 0.12.0; SQLite's card is charged 1,000,000 first). --get
# reads the card instead (GET /api/v1/cards/7, SQLite only: a read counts
# what its lots have lost, 0.13.0). --lots (SQLite, with --amount -1) gives
# this build's card a lot of all of its 1,000,000 points first (an
# expiring grant of 100% of the charge), so every payment settles its card
# and takes from the lot; with --pg, this build's database gets an
# expiring grant of 100% of its seeded charges first (a lot on every card
# charged), so most payments settle their card and take from its lot
# (0.14.0).
# docs/benchmarks.md ("0.10.0: store keys", "0.12.0: holds", "0.13.0:
# lots", "0.14.0: lots on PostgreSQL") has the figures.
#
#   bench/store-keys.sh --before /tmp/v090/build/hotrow [--pg] [--rounds 3] [--amount -1] [--get]
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib/common.sh

BEFORE= PG=0 ROUNDS=3 AMOUNT=1 GET=0 LOTS=0
while (($#)); do
  case $1 in
    --before) BEFORE=$2; shift 2 ;;
    --pg) PG=1; shift ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --amount) AMOUNT=$2; shift 2 ;;
    --get) GET=1; shift ;;
    --lots) LOTS=1; shift ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
[[ -x $BEFORE ]] || { echo "--before must name an older hotrow binary" >&2; exit 2; }
[[ $GET == 1 && $PG == 1 ]] && { echo "--get is SQLite only" >&2; exit 2; }
[[ $LOTS == 1 && $AMOUNT -ge 0 ]] && { echo "--lots is for payments only (--amount -1)" >&2; exit 2; }
bench_init
HOTROW=$(realpath "$HOTROW")
PORT=$(free_port)
trap '[[ $PG == 1 ]] && { bench_stop_pids; pg_stop; }; bench_cleanup' EXIT

if [[ $PG == 1 ]]; then
  pg_start
  cat >"$WORK/pay.lua" <<LUA
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{"storeId":3,"amount":$AMOUNT}'
local key = os.getenv("KEY")
if key and key ~= "" then wrk.headers["Authorization"] = "Bearer " .. key end
request = function()
  return wrk.format(nil, "/api/v1/cards/" .. math.random(1, 10000) .. "/transactions")
end
LUA
else
  # Seeded by the older build, which this one migrates (a newer schema may
  # refuse an older binary).
  "$BEFORE" seed pointcard --cards 10000 --stores 20 --history 10000 --db "sqlite:$WORK/t.db" >/dev/null 2>&1
fi

# expiring_grant FROM: a grant of 100% of the charges since FROM (RFC
# 3339), expiring in 30 days, waited for until it has folded.
expiring_grant() {
  wait_folded "$PORT" "$(post_grant "$PORT" 100 "$1" ',"expiresInDays":30')" 300 >/dev/null
}

n=0
run() {  # name binary anon|key
  n=$((n + 1))
  local db
  if [[ $PG == 1 ]]; then
    db="postgresql://hotrow@127.0.0.1:$PGPORT/b$n"
    "$PGBIN/psql" "postgresql://hotrow@127.0.0.1:$PGPORT/postgres" -XAtqc "CREATE DATABASE b$n"
    "$2" seed pointcard --cards 10000 --stores 20 --history 10000 --db "$db" >/dev/null 2>&1
  else
    rm -rf "$WORK/r" && mkdir "$WORK/r"
    cp "$WORK/t.db" "$WORK/t.db.pointcard.db" "$WORK/r/"
    db="sqlite:$WORK/r/t.db"
  fi
  HOTROW_BIN=$2 start_hotrow "$PORT" --db "$db" --db-pool 8 --admin-token bench >/dev/null 2>&1
  wait_http "http://127.0.0.1:$PORT/readyz" 60
  if [[ $PG == 1 && $LOTS == 1 && $2 == "$HOTROW" ]]; then
    expiring_grant 2000-01-01T00:00:00Z
    echo "  $("$PGBIN/psql" "$db" -XAtqc "SELECT count(*) FROM P_LOT") cards of 10,000 got a lot"
  fi
  if [[ $PG == 0 && $AMOUNT -lt 0 ]]; then
    local from
    from=$(date -u +%Y-%m-%dT%H:%M:%S.%6NZ)
    curl -fs -X POST "http://127.0.0.1:$PORT/api/v1/cards/7/transactions" -H 'Content-Type: application/json' \
      -d '{"storeId":3,"amount":1000000}' >/dev/null
    if [[ $LOTS == 1 && $2 == "$HOTROW" ]]; then
      sleep 0.01
      expiring_grant "$from"
      curl -fs "http://127.0.0.1:$PORT/api/v1/cards/7/lots" | grep -q '"remaining":1000000' ||
        { echo "card 7 got no lot of 1,000,000" >&2; exit 1; }
    fi
  fi
  local key=""
  if [[ $3 == key ]]; then
    key=$(curl -fs -X POST "http://127.0.0.1:$PORT/api/v1/stores/3/keys" -H 'Authorization: Bearer bench' |
      python3 -c 'import json,sys; print(json.load(sys.stdin)["key"])')
  fi
  if [[ $PG == 1 ]]; then
    local out
    out=$(KEY=$key wrk -t2 -c32 -d10s --latency -s "$WORK/pay.lua" "http://127.0.0.1:$PORT")
    printf '%-14s %s/s  p50 %s  p99 %s  non-2xx %s\n' "$1" "$(awk '/Requests\/sec/ {print $2}' <<<"$out")" \
      "$(awk '$1 == "50%" {print $2}' <<<"$out")" "$(awk '$1 == "99%" {print $2}' <<<"$out")" \
      "$(awk '/Non-2xx/ {print $NF}' <<<"$out" | grep . || echo 0)"
  else
    local auth=()
    [[ -n $key ]] && auth=(-H "Authorization: Bearer $key")
    local out
    if [[ $GET == 1 ]]; then
      out=$(hey -z 10s -c 32 "http://127.0.0.1:$PORT/api/v1/cards/7")
    else
      out=$(hey -z 10s -c 32 -m POST -T application/json "${auth[@]}" -d "{\"storeId\":3,\"amount\":$AMOUNT}" \
        "http://127.0.0.1:$PORT/api/v1/cards/7/transactions")
    fi
    printf '%-14s %s/s  p50 %s s  p99 %s s  %s\n' "$1" "$(awk '/Requests\/sec/ {print $2}' <<<"$out")" \
      "$(awk '/50% in/ {print $3}' <<<"$out")" "$(awk '/99% in/ {print $3}' <<<"$out")" \
      "$(sed -n '/Status code distribution/,$p' <<<"$out" | grep '\[' | tr -s ' ' | tr '\n' ' ')"
  fi
  bench_stop_pids
}

what="payments of $AMOUNT"
[[ $GET == 1 ]] && what="reads of one card"
echo "$what, $([[ $PG == 1 ]] && echo PostgreSQL || echo SQLite); before: $("$BEFORE" --version); this: $("$HOTROW" --version)"
for _ in $(seq "$ROUNDS"); do
  run before "$BEFORE" anon
  run anonymous "$HOTROW" anon
  [[ $GET == 1 ]] || run "with a key" "$HOTROW" key
done
