#!/usr/bin/env bash
# PostgreSQL client benchmark (bench/notes/2026-12-03-pg.md): a handler selecting one row by
# primary key at -c100 with a pool of 10, beside pgbench -S -c 10 (the
# floor: libpq in C, no HTTP). A throw-away cluster (initdb as `postgres`)
# on a free port bound to 127.0.0.1 is made for the run and removed after.
#   bench/pg.sh [--rounds N] [--duration S]
#   bench/pg.sh --callgrind [N1 N2]   instructions per request in moonhttp, with
#                                     and without the query (exact, noise-free)
# Pinning (2 cores): postgres on core 1; pgbench (the client) or moonhttp on
# core 0; wrk on core 1 beside postgres, so the HTTP path pays for its load
# generator and the floor does not.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=3 DURATION=10 CALLGRIND=""
while [ $# -gt 0 ]; do
    case "$1" in
    --callgrind) CALLGRIND=1; N1=${2:-500}; N2=${3:-2500}; shift $(($# >= 3 ? 3 : $#)) ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --duration) DURATION=$2; shift 2 ;;
    *) echo "usage: $0 [--rounds N] [--duration S]" >&2; exit 2 ;;
    esac
done
MOONHTTP_BIN=${MOONHTTP_BIN:-build/moonhttp}
HTTP_PORT=${BENCH_PG_HTTP_PORT:-18090}
CONNS=${BENCH_PG_CONNS:-100}     # wrk connections
STAMP=$(date +%Y%m%d-%H%M%S)
OUT=bench/results/pg-$STAMP
mkdir -p "$OUT"
WORK=$(mktemp -d /tmp/mh-pgbench-XXXXXX)
PGPORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
export PGPORT PGHOST=127.0.0.1 PGUSER=postgres
SERVER_PID=""
log() { printf '%s %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
source bench/pgcluster.sh
cleanup() {
    [ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null && wait "$SERVER_PID" 2>/dev/null || true
    pg_cluster_stop
    rm -rf "$WORK"
}
trap cleanup EXIT

pg_cluster_start
pg "$PGBIN/pgbench" -h 127.0.0.1 -p "$PGPORT" -U postgres -i -s 1 -q postgres >/dev/null 2>&1
log "cluster on 127.0.0.1:$PGPORT, pgbench_accounts: 100000 rows"

backends() {
    "$PGBIN/psql" -X -A -t -h 127.0.0.1 -p "$PGPORT" -U postgres -d postgres \
        -c "select count(*) from pg_stat_activity where application_name = '$1'"
}

run_pgbench() {
    local r=$1
    taskset -c 0 "$PGBIN/pgbench" -h 127.0.0.1 -p "$PGPORT" -U postgres -S -M prepared -c 10 -j 1 \
        -T "$DURATION" -P 1 postgres >"$OUT/pgbench-$r.txt" 2>&1
    local tps lat
    tps=$(sed -n 's/^tps = \([0-9.]*\) .*/\1/p' "$OUT/pgbench-$r.txt")
    lat=$(sed -n 's/^latency average = \([0-9.]*\) ms/\1/p' "$OUT/pgbench-$r.txt")
    printf 'pgbench\t%s\t%s\t%s\t-\t10\n' "$r" "$tps" "$lat" >>"$OUT/raw.tsv"
}

run_moonhttp() {
    local r=$1
    PG_POOL_SIZE=${BENCH_PG_POOL:-10} taskset -c 0 "$MOONHTTP_BIN" --listen "127.0.0.1:$HTTP_PORT" --workers 1 \
        --log-level warn bench/pg/app.lua >"$OUT/moonhttp-$r.log" 2>&1 &
    SERVER_PID=$!
    for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$HTTP_PORT") 2>/dev/null && break; sleep 0.05; done
    curl -sf "http://127.0.0.1:$HTTP_PORT/account/1" >/dev/null
    taskset -c 1 wrk -t1 -c100 -d1s -s bench/pg/random_aid.lua "http://127.0.0.1:$HTTP_PORT" >/dev/null
    taskset -c 1 wrk -t1 -c"$CONNS" -d"${DURATION}s" --latency -s bench/pg/random_aid.lua \
        "http://127.0.0.1:$HTTP_PORT" >"$OUT/wrk-$r.txt" 2>&1 &
    local wrk_pid=$! conns=0 n
    sleep $((DURATION / 2))
    conns=$(backends moonhttp)
    wait "$wrk_pid"
    curl -s "http://127.0.0.1:$HTTP_PORT/stats" >"$OUT/stats-$r.json"
    kill "$SERVER_PID"; wait "$SERVER_PID" 2>/dev/null || true; SERVER_PID=""
    local rps p99 non2xx
    rps=$(sed -n 's/^Requests\/sec: *\([0-9.]*\)/\1/p' "$OUT/wrk-$r.txt")
    p99=$(awk '$1 == "99%" { print $2 }' "$OUT/wrk-$r.txt")
    non2xx=$(sed -n 's/^ *Non-2xx or 3xx responses: *\([0-9]*\)/\1/p' "$OUT/wrk-$r.txt")
    [ -n "$non2xx" ] && log "moonhttp round $r: $non2xx non-2xx responses"
    printf 'moonhttp\t%s\t%s\t-\t%s\t%s\n' "$r" "$rps" "$p99" "$conns" >>"$OUT/raw.tsv"
}

# Instructions moonhttp executes for n sequential keep-alive requests to
# path/<i> (one curl connection), start to exit, under callgrind.
callgrind_run() {
    local path=$1 n=$2 f="$OUT/callgrind.out.${path//\//_}.$2"
    PG_POOL_SIZE=1 taskset -c 0 valgrind --tool=callgrind --callgrind-out-file="$f" \
        "$MOONHTTP_BIN" --listen "127.0.0.1:$HTTP_PORT" --workers 1 --log-level warn \
        bench/pg/app.lua >"$OUT/callgrind-$n.log" 2>&1 &
    SERVER_PID=$!
    for _ in $(seq 600); do (exec 3<>"/dev/tcp/127.0.0.1/$HTTP_PORT") 2>/dev/null && break; sleep 0.1; done
    curl -sf -o /dev/null "http://127.0.0.1:$HTTP_PORT$path/[1-$n]"
    kill "$SERVER_PID"; wait "$SERVER_PID" 2>/dev/null || true; SERVER_PID=""
    awk '/^(summary|totals):/ { print $2; exit }' "$f"
}

if [ -n "$CALLGRIND" ]; then
    for path in /plain /account; do
        i1=$(callgrind_run "$path" "$N1")
        i2=$(callgrind_run "$path" "$N2")
        awk -v p="$path" -v n1="$N1" -v n2="$N2" -v i1="$i1" -v i2="$i2" \
            'BEGIN { printf "%s: %.0f instructions/request (%d -> %d, %d -> %d)\n", p, (i2 - i1) / (n2 - n1), n1, i1, n2, i2 }' |
            tee -a "$OUT/callgrind.txt"
    done
    log "results in $OUT"
    exit 0
fi

printf 'what\tround\tper_s\tavg_ms\tp99\tbackends\n' >"$OUT/raw.tsv"
for r in $(seq "$ROUNDS"); do
    log "round $r: pgbench -S -c 10"
    run_pgbench "$r"
    if [ -x "$MOONHTTP_BIN" ]; then
        log "round $r: moonhttp, wrk -c100, pool 10"
        run_moonhttp "$r"
    fi
done
column -t -s $'\t' "$OUT/raw.tsv"
python3 - "$OUT/raw.tsv" <<'PY'
import statistics, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])][1:]
med = lambda what: statistics.median(float(r[2]) for r in rows if r[0] == what) if any(r[0] == what for r in rows) else None
pgb, moon = med("pgbench"), med("moonhttp")
print(f"median pgbench -S tps: {pgb:.0f}")
if moon:
    print(f"median moonhttp req/s: {moon:.0f}  ratio: {moon / pgb:.2f}")
PY
log "results in $OUT"
