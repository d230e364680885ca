# shellcheck shell=bash
# Shared helpers for the benchmark scripts: start/stop processes by PID,
# nginx as the HTTP ceiling, parse hey and wrk output, write docs sections.
# Sourced, not run.

BENCH_PIDS=()
# The binary under test: HOTROW_BIN, or this tree's build (bench/compare.py
# sets HOTROW_BIN to run a script against an older build).
HOTROW=${HOTROW_BIN:-build/hotrow}
BENCH_CLEAN_DIRS=()
# bench_stop_pids: stops every process this script started, by PID.
bench_stop_pids() {
  for pid in "${BENCH_PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${BENCH_PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  BENCH_PIDS=()
}
bench_cleanup() {
  bench_stop_pids
  for dir in "${BENCH_CLEAN_DIRS[@]}"; do rm -rf "$dir"; done
}
trap bench_cleanup EXIT

# bench_usage: prints the script's leading comment block (its --help).
bench_usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; }

# bench_init: builds if needed and makes WORK, a scratch directory removed at
# exit (world-readable: nginx's workers read static files from it).
bench_init() {
  [[ -n ${HOTROW_BIN:-} || -x build/hotrow ]] || make build
  WORK=$(mktemp -d /tmp/hotrow-bench-XXXXXX)
  chmod 755 "$WORK"
  BENCH_CLEAN_DIRS+=("$WORK")
}

# start_hotrow PORT ARGS...: `hotrow serve` on 127.0.0.1:PORT (environment
# passes through), waits for /healthz; its pid is in HOTROW_PID.
start_hotrow() {
  local port=$1; shift
  # The drain delay through its variable: an older binary (a "before") ignores it.
  # Store keys are off, said so: the loads pay anonymously, as the reference's
  # experiment does (set HOTROW_REQUIRE_STORE_KEYS=true to measure with them).
  HOTROW_REQUIRE_STORE_KEYS=${HOTROW_REQUIRE_STORE_KEYS:-false} \
  HOTROW_DRAIN_DELAY_MS=0 "${HOTROW_BIN:-$HOTROW}" serve --host 127.0.0.1 --port "$port" --log-level warn "$@" &
  HOTROW_PID=$!
  BENCH_PIDS+=("$HOTROW_PID")
  wait_http "http://127.0.0.1:$port/healthz" 60
}

# write_post_lua FILE: a wrk script that POSTs without a body.
write_post_lua() { echo 'wrk.method = "POST"' >"$1"; }

# write_score_post_lua FILE PLAYERS: a wrk script that posts a random score
# for a random one of PLAYERS players, then waits 10 ms: each connection
# posts at most 100 scores/s (the reference's "a POST every 10 ms").
write_score_post_lua() {
  cat >"$1" <<LUA
math.randomseed(os.time())
request = function()
  local body = '{"score":' .. math.random(0, 20000) .. '}'
  return wrk.format("POST", "/api/v1/score",
    { ["ClientId"] = "player-" .. math.random(1, $2), ["Content-Type"] = "application/json" }, body)
end
delay = function() return 10 end
LUA
}

# parse_hey_full FILE: hey's report as "rps avg_ms p99_ms ok non200 timeouts".
parse_hey_full() {
  awk '
    /Requests\/sec:/ { rps = $2 }
    /Average:/ { avg = $2 * 1000 }
    /99%+ in/ { p99 = $3 * 1000 }
    /\[[0-9]+\][ \t]+[0-9]+ responses/ { code = $1; gsub(/[\[\]]/, "", code); if (code == 200) ok += $2; else bad += $2 }
    /Error distribution/ { errs = 1 }
    errs && /^ +\[[0-9]+\]/ { n = $1; gsub(/[\[\]]/, "", n); if ($0 ~ /Timeout|deadline/) to += n; else bad += n }
    END { printf "%.0f %.1f %.1f %d %d %d\n", rps, avg, p99, ok, bad, to }' "$1"
}

# median_of FILE...: the parse line with the median first column (requests/s).
median_of() { sort -n -k1,1 "$@" | awk '{ l[NR] = $0 } END { print l[int((NR + 1) / 2)] }'; }

# Each connection is a file descriptor: raise the limit for c=1000 runs.
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"

machine_line() {
  local cpu
  cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')
  echo "$(date -u +%Y-%m-%d), $(nproc) cores (${cpu:-unknown CPU}), $(free -g | awk '/Mem:/{print $2}') GiB RAM, $(. /etc/os-release; echo "$PRETTY_NAME")"
}

wait_http() {  # url [seconds]
  local url=$1 tries=$(( ${2:-30} * 20 ))
  for ((i = 0; i < tries; i++)); do
    curl -fsS -o /dev/null "$url" 2>/dev/null && return 0
    sleep 0.05
  done
  echo "timed out waiting for $url" >&2
  return 1
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null ||
    echo $(( 20000 + RANDOM % 20000 ))
}

# post_grant PORT RATE FROM [EXTRA]: POSTs a grant (admin token "bench") of
# RATE % of the charges from FROM (RFC 3339) until now, overlap allowed,
# EXTRA appended to its JSON (',"expiresInDays":30'); prints its id.
post_grant() {
  curl -fs -X POST "http://127.0.0.1:$1/api/v1/grants" -H 'Authorization: Bearer bench' \
    -H 'Content-Type: application/json' \
    -d "{\"from\":\"$3\",\"to\":\"$(date -u +%Y-%m-%dT%H:%M:%S.%6NZ)\",\"ratePercent\":$2,\"allowOverlap\":true${4:-}}" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["grantId"])'
}

# wait_folded PORT ID TRIES: polls the grant every 0.1 s, at most TRIES
# times, until it has folded; prints its foldMs, or "not folded".
wait_folded() {
  local g
  for _ in $(seq "$3"); do
    g=$(curl -fs "http://127.0.0.1:$1/api/v1/grants/$2" -H 'Authorization: Bearer bench') || g=""
    if grep -q '"state":"folded"' <<<"$g"; then
      python3 -c 'import json,sys; print(json.loads(sys.argv[1]).get("foldMs"))' "$g"
      return
    fi
    sleep 0.1
  done
  echo "not folded"
}

# start_nginx DIR PORT FILE_NAME FILE_CONTENT: nginx serving one static file.
start_nginx() {
  local dir=$1 port=$2 name=$3 content=$4
  mkdir -p "$dir/www" "$dir/tmp"
  printf '%s' "$content" >"$dir/www/$name"
  chmod -R a+rX "$dir"
  chmod a+x "$(dirname "$dir")"  # nginx's workers run as www-data; mktemp -d is 0700
  cat >"$dir/nginx.conf" <<CONF
worker_processes auto;
worker_rlimit_nofile 65536;
pid $dir/nginx.pid;
error_log $dir/error.log warn;
daemon off;
events { worker_connections 16384; multi_accept on; }
http {
  access_log off;
  keepalive_requests 1000000;
  client_body_temp_path $dir/tmp/body;
  proxy_temp_path $dir/tmp/proxy;
  fastcgi_temp_path $dir/tmp/fastcgi;
  uwsgi_temp_path $dir/tmp/uwsgi;
  scgi_temp_path $dir/tmp/scgi;
  server {
    listen 127.0.0.1:$port reuseport backlog=4096;
    location / { root $dir/www; default_type application/json; }
  }
}
CONF
  nginx -c "$dir/nginx.conf" -p "$dir" &
  BENCH_PIDS+=("$!")
  wait_http "http://127.0.0.1:$port/$name" 10
}

# Parsers print "rps p50_ms p99_ms ok non_ok".
parse_hey() {  # file
  awk '
    /Requests\/sec:/ { rps = $2 }
    /50%+ in/ { p50 = $3 * 1000 }
    /99%+ in/ { p99 = $3 * 1000 }
    /\[[0-9]+\][ \t]+[0-9]+ responses/ { code = $1; gsub(/[\[\]]/, "", code); if (code == 200 || code == 201) ok += $2; else bad += $2 }
    /Error distribution/ { errs = 1 }
    errs && /\[[0-9]+\]/ && !/responses/ { n = $1; gsub(/[\[\]]/, "", n); bad += n }
    END { printf "%.0f %.2f %.2f %d %d\n", rps, p50, p99, ok, bad }' "$1"
}

parse_wrk() {  # file
  awk '
    function ms(v) { if (v ~ /us$/) return v / 1000; if (v ~ /ms$/) return v + 0; if (v ~ /s$/) return v * 1000; return v }
    /Requests\/sec:/ { rps = $2 }
    /^ +50%/ { p50 = ms($2) }
    /^ +99%/ { p99 = ms($2) }
    /requests in/ { total = $1 }
    /Non-2xx or 3xx responses:/ { bad += $5 }
    /Socket errors:/ { gsub(/,/, ""); bad += $4 + $6 + $8 + $10 }
    END { printf "%.0f %.2f %.2f %d %d\n", rps, p50, p99, total - bad, bad }' "$1"
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }

# replace_section FILE NAME CONTENT_FILE: replaces the text between
# <!-- NAME:begin --> and <!-- NAME:end --> in FILE (appends if absent).
replace_section() {
  local file=$1 name=$2 content=$3
  touch "$file"
  if ! grep -q "<!-- $name:begin -->" "$file"; then
    printf '\n<!-- %s:begin -->\n<!-- %s:end -->\n' "$name" "$name" >>"$file"
  fi
  awk -v name="$name" -v content="$content" '
    $0 == "<!-- " name ":begin -->" { print; while ((getline line < content) > 0) print line; skip = 1; next }
    $0 == "<!-- " name ":end -->" { skip = 0 }
    !skip { print }' "$file" >"$file.tmp" && mv "$file.tmp" "$file"
}

# pg_start SETTINGS...: a throwaway PostgreSQL 15 cluster in $WORK/pg (as the
# postgres user when run as root) on a free port, in PGPORT, with `-c`
# settings; pg_stop stops it (the caller's EXIT trap should call it).
PGBIN=/usr/lib/postgresql/15/bin
as_pg() { if [[ $(id -u) -eq 0 ]]; then runuser -u postgres -- "$@"; else "$@"; fi; }
pg_start() {
  mkdir -p "$WORK/pg"
  [[ $(id -u) -eq 0 ]] && chown postgres:postgres "$WORK" "$WORK/pg"
  as_pg "$PGBIN/initdb" -D "$WORK/pg" -A trust -U hotrow -E UTF8 --no-instructions >/dev/null
  PGPORT=$(free_port)
  local opts="-p $PGPORT -k $WORK -c listen_addresses=127.0.0.1" setting
  # BENCH_PG_SETTINGS="name=value ..." adds settings to every throwaway cluster.
  for setting in "$@" ${BENCH_PG_SETTINGS:-}; do opts+=" -c $setting"; done
  as_pg "$PGBIN/pg_ctl" -D "$WORK/pg" -l "$WORK/postgres.log" -w start -o "$opts" >/dev/null
}
pg_stop() { as_pg "$PGBIN/pg_ctl" -D "$WORK/pg" -m fast stop >/dev/null 2>&1 || true; }
