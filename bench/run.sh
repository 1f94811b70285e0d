#!/usr/bin/env bash
# Benchmarks moonhttp against nginx + lua-nginx-module, Go's ServeMux, a raw
# epoll floor and (if installed) h2o, and writes a table of medians.
#
#   bench/run.sh [--rounds N] [--duration S] [--quick] [--servers "a b ..."]
#
# Method (bench/notes/2026-12-02-lab-notebook.md explains why): every server gets one worker pinned to
# CPU 0, wrk runs pinned to CPU 1; rounds interleave the servers so slow drift
# in the host (steal, thermal, neighbours) spreads over all of them instead of
# landing on one. Per load we record wrk's req/s, p50, p99 and errors, and the
# server's CPU per request measured two ways: the server processes' own
# utime+stime, and CPU 0's busy time from /proc/stat (which also catches
# kernel work done on CPU 0 on the server's behalf, e.g. softirqs).
#
# Output: bench/results/run-<timestamp>/ holds raw.tsv, every wrk report and
# server logs; bench/results/table.md (and the run's copy) the medians.
set -eu

cd "$(dirname "$0")/.."
ROOT=$(pwd)

ROUNDS=3
DURATION=10
WARMUP=1
SERVERS="moonhttp nginx-lua go floor h2o"
usage() {
    echo "usage: bench/run.sh [--rounds N] [--duration S] [--quick] [--servers \"a b ...\"]" >&2
    exit 2
}
while [ $# -gt 0 ]; do
    case "$1" in
    --rounds) ROUNDS=$2; shift 2 ;;
    --duration) DURATION=$2; shift 2 ;;
    --quick) ROUNDS=1; DURATION=3; shift ;;
    --servers) SERVERS=$2; shift 2 ;;
    *) usage ;;
    esac
done

case "$ROUNDS$DURATION" in '' | *[!0-9]*) usage ;; esac
# Bounded run time: nobody meant an hour-long run.
[ "$ROUNDS" -ge 1 ] && [ "$ROUNDS" -le 20 ] && [ "$DURATION" -ge 1 ] && [ "$DURATION" -le 120 ] || usage

source bench/lib.sh

# The loads: name and wrk arguments (without the URL, always loopback).
# Every load runs a wrk script whose done() prints p99.9 and the maximum
# (wrk's --latency table stops at p99).
LOADS="c100 c1000 c10000 pipe16"
load_args() {
    case "$1" in
    c100) echo "-t1 -c100 -s $ROOT/bench/wrk/latency.lua" ;;
    c1000) echo "-t1 -c1000 -s $ROOT/bench/wrk/latency.lua" ;;
    c10000) echo "-t1 -c10000 -s $ROOT/bench/wrk/latency.lua" ;;
    pipe16) echo "-t1 -c100 -s $ROOT/bench/wrk/pipeline.lua" ;;
    esac
}

# The CPUs are fixed: two-core VMs have nothing else to give.
SERVER_CPU=0
CLIENT_CPU=1
if [ "$(nproc)" -lt 2 ]; then
    echo "run.sh: needs 2 CPUs (server on $SERVER_CPU, wrk on $CLIENT_CPU)" >&2
    exit 1
fi
for tool in wrk taskset curl cc; do
    command -v "$tool" >/dev/null || { echo "run.sh: $tool is missing (make deps / scripts/deps.sh --bench)" >&2; exit 1; }
done
# -c1000 and -c10000 need more than the usual 1024 descriptors, in wrk and in
# servers (each server is configured for 15000 connections). Each process
# needs its own 10000 and a few: wrk and the server do not share the limit.
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"
if [ "$(ulimit -n)" -lt 10240 ]; then
    echo "run.sh: the -c10000 load needs 10240 open files per process (ulimit -n is $(ulimit -n))" >&2
    exit 1
fi

STAMP=$(date +%Y%m%d-%H%M%S)
RUN_DIR=$ROOT/bench/results/run-$STAMP
mkdir -p "$RUN_DIR"
RAW=$RUN_DIR/raw.tsv
WORK=$(mktemp -d "${TMPDIR:-/tmp}/moonhttp-bench.XXXXXX")
CLK_TCK=$(getconf CLK_TCK)

cleanup() {
    stop_server
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

measure() {
    local round=$1 name=$2 load=$3 port=${PORT[$2]}
    local out=$RUN_DIR/wrk-r$round-$name-$load.txt
    local c0 c1 p0 p1
    c0=$(cpu_ticks)
    p0=$(tree_ticks "$SERVER_PID")
    # shellcheck disable=SC2046 # load_args is a word list on purpose
    taskset -c $CLIENT_CPU wrk $(load_args "$load") -d"${DURATION}s" --latency \
        "http://127.0.0.1:$port/api/users" >"$out" 2>&1 || true
    p1=$(tree_ticks "$SERVER_PID")
    c1=$(cpu_ticks)
    local wrk_fields req tail
    wrk_fields=$(parse_wrk "$out")
    tail=$(parse_wrk_tail "$out")
    req=$(echo "$wrk_fields" | cut -f2)
    # shellcheck disable=SC2086
    set -- $c0 $c1
    awk -v r="$round" -v s="$name" -v l="$load" -v w="$wrk_fields" -v req="$req" -v tail="$tail" \
        -v dp=$((p1 - p0)) -v db=$(($6 - $1)) -v dt=$(($7 - $2)) -v ds=$(($8 - $3)) \
        -v cb=$(($9 - $4)) -v ct=$((${10} - $5)) -v hz="$CLK_TCK" '
        BEGIN {
            proc = req > 0 ? dp / hz * 1e6 / req : 0
            cpu0 = req > 0 ? db / hz * 1e6 / req : 0
            steal = dt > 0 ? 100 * ds / dt : 0
            client = ct > 0 ? 100 * cb / ct : 0
            printf "%s\t%s\t%s\t%s\t%.3f\t%.3f\t%.1f\t%.1f\t%s\n", r, s, l, w, proc, cpu0, steal, client, tail
        }' >>"$RAW"
    tail -n 1 "$RAW" | awk -F'\t' '{ printf "  %-6s %10.0f req/s  p50 %.3f  p99 %.3f  p99.9 %.3f  max %.3f ms  proc %.2f us/req  cpu0 %.2f us/req  steal %s%%  wrk cpu %s%%  errors %d/%d\n",
        $3, $4, $6, $7, $14, $15, $10, $11, $12, $13, $8, $9 }' >&2
}

log "run $STAMP: rounds=$ROUNDS duration=${DURATION}s servers: $SERVERS"
build_floor
build_go
printf 'round\tserver\tload\trps\trequests\tp50_ms\tp99_ms\tsocket_errors\tnon2xx\tproc_us_per_req\tcpu0_us_per_req\tsteal_pct\twrk_cpu_pct\tp999_ms\tmax_ms\n' >"$RAW"
ACTIVE=""
for s in $SERVERS; do
    if available "$s"; then
        ACTIVE="$ACTIVE $s"
    else
        log "skipping $s: $SKIP_REASON"
        printf '#skip\t%s\t%s\n' "$s" "$SKIP_REASON" >>"$RAW"
    fi
done

for round in $(seq "$ROUNDS"); do
    for s in $ACTIVE; do
        log "round $round/$ROUNDS: $s on port ${PORT[$s]}"
        if ! start_server "$s" "$RUN_DIR/$s.log" 10 taskset -c $SERVER_CPU; then
            stop_server
            printf '#fail\t%s\tround %s: did not start (see %s.log)\n' "$s" "$round" "$s" >>"$RAW"
            continue
        fi
        # Peers must send moonhttp's bytes (apart from Date and Server), or the
        # comparison measures different work: refuse to measure one that does not.
        if ! check_response "$s"; then
            stop_server
            printf '#fail\t%s\tround %s: not measured, %s\n' "$s" "$round" "$CHECK_REASON" >>"$RAW"
            continue
        fi
        # Warm-up, not measured: first-request costs (Lua compilation, Go's
        # lazily grown pools, page faults) are not what we compare.
        taskset -c $CLIENT_CPU wrk -t1 -c100 -d"${WARMUP}s" "http://127.0.0.1:${PORT[$s]}/api/users" >/dev/null 2>&1 || true
        for load in $LOADS; do
            sleep 1 # let the previous load's connections close
            measure "$round" "$s" "$load"
        done
        stop_server
    done
done

{
    echo "Run $STAMP: $ROUNDS round(s) × ${DURATION} s per load; server on CPU $SERVER_CPU, wrk on CPU $CLIENT_CPU."
    echo "Host: $(nproc) CPUs, $(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo), Linux $(uname -r)."
    echo
    bench/table.sh "$RAW"
} >"$RUN_DIR/table.md"
cp "$RUN_DIR/table.md" bench/results/table.md
cat bench/results/table.md
log "raw results in $RUN_DIR, table in bench/results/table.md"
