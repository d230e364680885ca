#!/usr/bin/env bash
# The reference's PostgreSQL runs reproduced beside hotrow's grant, each on
# a throwaway cluster of its own (the lock settings take effect only at
# server start), 1M cards, the point-card simulator in-process:
#   - plain: the reference's grant (one SERIALIZABLE transaction, no lock,
#     no retry) with PostgreSQL's default lock settings, then with
#     max_locks_per_transaction, max_pred_locks_per_transaction and
#     max_pred_locks_per_page at 2x (128/128/4) and 4x (256/256/8), its
#     section 8.3.3;
#   - read-committed: the same grant at READ COMMITTED, its section 8.3.4
#     (it loses payments; `hotrow check pointcard` on the run's database is
#     the finding);
#   - hotrow: the store's staged grant.
# Payments are hotrow's in every run (the store's payment function,
# hotrow_pay_v7 today, at SERIALIZABLE). Writes docs/benchmarks.md (section
# "reference-postgres") unless --no-docs.
#
#   bench/reference-pg.sh [--duration 60s] [--hotrow-duration 180s] [--parallel 64,192]
#                         [--hotrow-parallel 1,32,64,128,192] [--only plain|read-committed|hotrow]
#                         [--grant-workers N] [--no-docs]
# --grant-workers: hotrow's staging and folding backends (simulate's flag;
# 1 unless given).
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib/common.sh

DURATION=60s HOTROW_DURATION=180s PARALLEL=64,192 HOTROW_PARALLEL=1,32,64,128,192 ONLY="" WRITE_DOCS=1 GRANT_WORKERS=""
while (($#)); do
  case $1 in
    --duration) DURATION=$2; shift 2 ;;
    --hotrow-duration) HOTROW_DURATION=$2; shift 2 ;;
    --parallel) PARALLEL=$2; shift 2 ;;
    --hotrow-parallel) HOTROW_PARALLEL=$2; shift 2 ;;
    --only) ONLY=$2; shift 2 ;;
    --grant-workers) GRANT_WORKERS=$2; shift 2 ;;
    --no-docs) WRITE_DOCS=0; shift ;;
    -h|--help) bench_usage; exit 0 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done

bench_init
trap 'pg_stop; bench_cleanup' EXIT
OUTS=()
# run NAME MODE PARALLEL DURATION SETTINGS...: one cluster, one simulation.
run() {
  local name=$1 mode=$2 parallel=$3 duration=$4; shift 4
  [[ -z $ONLY || $ONLY == "$mode" ]] || return 0
  echo "== $name"
  rm -rf "$WORK/pg"
  pg_start max_connections=300 shared_buffers=1GB "$@"
  local workers=()
  [[ $mode == hotrow && -n $GRANT_WORKERS ]] && workers=(--grant-workers "$GRANT_WORKERS")
  "$HOTROW" simulate pointcard --db "postgresql://hotrow@127.0.0.1:$PGPORT/postgres" --db-pool 16 \
    --grant-mode "$mode" --parallel "$parallel" --duration "$duration" --work-dir "$WORK/sim" "${workers[@]}" \
    --out "$WORK/out-${#OUTS[@]}" | grep -v '^parallel' || true
  pg_stop
  {
    echo "### $name"
    echo
    echo "\`simulate pointcard --grant-mode $mode --parallel $parallel --duration $duration${workers[*]:+ ${workers[*]}}\`," \
      "PostgreSQL settings: ${*:-defaults (max_locks_per_transaction 64, max_pred_locks_per_transaction 64, max_pred_locks_per_page 2)}"
    echo
    echo '```'
    cat "$WORK/out-${#OUTS[@]}/simulation.txt"
    echo '```'
    echo
  } >"$WORK/part-${#OUTS[@]}.md"
  OUTS+=("$WORK/part-${#OUTS[@]}.md")
}

run "plain: the reference's grant, SERIALIZABLE, default lock settings" plain "$PARALLEL" "$DURATION"
run "plain, lock settings x2 (section 8.3.3)" plain "$PARALLEL" "$DURATION" \
  max_locks_per_transaction=128 max_pred_locks_per_transaction=128 max_pred_locks_per_page=4
run "plain, lock settings x4 (section 8.3.3)" plain "$PARALLEL" "$DURATION" \
  max_locks_per_transaction=256 max_pred_locks_per_transaction=256 max_pred_locks_per_page=8
run "read-committed: the reference's grant at READ COMMITTED (section 8.3.4)" read-committed "$PARALLEL" "$DURATION"
run "hotrow: the store's staged grant" hotrow "$HOTROW_PARALLEL" "$HOTROW_DURATION"

if ((WRITE_DOCS)) && [[ -z $ONLY ]]; then
  section="$WORK/section.md"
  {
    echo "Measured $(machine_line) by \`bench/reference-pg.sh --duration $DURATION --hotrow-duration $HOTROW_DURATION\`:"
    echo "PostgreSQL $("$PGBIN/postgres" --version | awk '{print $3}'), a fresh cluster per run, 1,000,000 cards and"
    echo "1,000,000 history rows, a grant 10 s after the previous one answered, payments hotrow's in every run."
    echo
    cat "${OUTS[@]}"
  } >"$section"
  replace_section docs/benchmarks.md reference-postgres "$section"
  echo "wrote docs/benchmarks.md (section reference-postgres)"
fi
