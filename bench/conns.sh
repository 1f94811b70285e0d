#!/usr/bin/env bash
# Connection pressure: what idle keep-alive connections cost in memory, and
# what slow-header (slowloris) connections cost the requests around them.
# bench/notes/2026-12-02-conns.md has the method and results.
#
#   bench/conns.sh [--idle N] [--slow N] [--rounds R] [--duration S]
#                  [--servers "moonhttp nginx-lua"] [--only idle|slowloris]
#
# (a) idle: each server (one worker, pinned to CPU 0) gets N (10000) keep-alive
#     connections from bench/conns/clients.c, each sends one GET /api/users,
#     reads the answer and stays idle; VmRSS of the server's process tree is
#     read before and after (and again after the clients left).
#     moonhttp runs with --max-connections 20000 --idle-timeout 300; nginx
#     with a copy of nginx.conf.in whose worker_connections/rlimit are 20000.
# (b) slowloris (moonhttp only, default settings: read_header_timeout 5 s):
#     `wrk -t1 -c100 -d S` on /api/users with and without N (1000) slowloris
#     connections, R rounds, alternating which goes first; server on CPU 0,
#     wrk and the slowloris client on CPU 1.
#
# Output: bench/results/conns-<stamp>/ (idle.tsv, slow.tsv, summary.md, logs).
set -eu
cd "$(dirname "$0")/.."
ROOT=$(pwd)

IDLE_N=10000
SLOW_N=1000
ROUNDS=3
DURATION=10
SERVERS="moonhttp nginx-lua"
ONLY=""
usage() {
    echo "usage: bench/conns.sh [--idle N] [--slow N] [--rounds R] [--duration S] [--servers \"moonhttp nginx-lua\"] [--only idle|slowloris]" >&2
    exit 2
}
while [ $# -gt 0 ]; do
    case "$1" in
    --idle) IDLE_N=$2; shift 2 ;;
    --slow) SLOW_N=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --duration) DURATION=$2; shift 2 ;;
    --servers) SERVERS=$2; shift 2 ;;
    --only) ONLY=$2; shift 2 ;;
    *) usage ;;
    esac
done
case "$IDLE_N$SLOW_N$ROUNDS$DURATION" in '' | *[!0-9]*) usage ;; esac
[ "$IDLE_N" -le 18000 ] && [ "$SLOW_N" -le 5000 ] && [ "$ROUNDS" -ge 1 ] && [ "$ROUNDS" -le 10 ] &&
    [ "$DURATION" -ge 1 ] && [ "$DURATION" -le 60 ] || usage

source bench/lib.sh
SERVER_CPU=0
CLIENT_CPU=1
for tool in wrk taskset curl cc ss; do
    command -v "$tool" >/dev/null || { echo "conns.sh: $tool is missing" >&2; exit 1; }
done
ulimit -n "$(ulimit -Hn)"
if [ "$(ulimit -n)" -lt $((IDLE_N + 100)) ]; then
    echo "conns.sh: $IDLE_N connections need more descriptors than ulimit -n $(ulimit -n)" >&2
    exit 1
fi

STAMP=$(date +%Y%m%d-%H%M%S)
OUT=$ROOT/bench/results/conns-$STAMP
mkdir -p "$OUT"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/moonhttp-conns.XXXXXX")
trap cleanup_bench EXIT
trap 'exit 130' INT TERM

cc -O2 -Wall -o "$WORK/clients" bench/conns/clients.c
# nginx's stock bench config allows 4096 connections per worker.
sed -e 's/worker_connections [0-9]*;/worker_connections 20000;/' \
    -e 's/worker_rlimit_nofile [0-9]*;/worker_rlimit_nofile 20000;/' \
    bench/nginx/nginx.conf.in >"$WORK/nginx-conns.conf.in"

established() { ss -Htn state established "( sport = :$1 )" | wc -l; }

# ---- (a) idle connections ------------------------------------------------
idle_one() {
    local s=$1 port=${PORT[$1]} before with after hwm_with hwm_after ready done_line estab
    log "idle: $s, $IDLE_N connections"
    MOONHTTP_ARGS="--max-connections 20000 --idle-timeout 300" NGINX_CONF_IN=$WORK/nginx-conns.conf.in \
        start_server "$s" "$OUT/$s-idle.log" 10 taskset -c $SERVER_CPU || return 1
    check_response "$s" || { stop_server; return 1; }
    # Warm-up: first-request costs (Lua compilation, lazily built state) belong
    # to the baseline, not to the connections.
    taskset -c $CLIENT_CPU wrk -t1 -c10 -d1s "http://127.0.0.1:$port/api/users" >/dev/null 2>&1 || true
    sleep 1
    before=$(tree_rss_kb "$SERVER_PID")
    taskset -c $CLIENT_CPU "$WORK/clients" idle "$port" "$IDLE_N" 60 >"$OUT/$s-idle-client.txt" 2>&1 &
    CLIENT_PIDS=$!
    ready=""
    for _ in $(seq 1200); do
        ready=$(grep '^READY' "$OUT/$s-idle-client.txt" || true)
        [ -n "$ready" ] && break
        kill -0 "$CLIENT_PIDS" 2>/dev/null || break
        sleep 0.1
    done
    sleep 2 # let the server settle (deferred frees, GC steps)
    with=$(tree_rss_kb "$SERVER_PID")
    hwm_with=$(tree_rss_kb "$SERVER_PID" VmHWM)
    estab=$(established "$port")
    stop_clients
    done_line=$(grep '^DONE' "$OUT/$s-idle-client.txt" || true)
    sleep 3
    after=$(tree_rss_kb "$SERVER_PID")
    hwm_after=$(tree_rss_kb "$SERVER_PID" VmHWM)
    stop_server
    log "  $s: rss before $before KiB, with $IDLE_N idle $with KiB (peak $hwm_with), after close $after KiB (peak $hwm_after); $ready; $done_line; established $estab"
    printf '%s\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%d\t%d\n' "$s" "$IDLE_N" "$before" "$with" "$after" "$estab" \
        "${ready:-READY none}" "${done_line:-DONE none}" "$hwm_with" "$hwm_after" >>"$OUT/idle.tsv"
}

# ---- (b) slowloris ---------------------------------------------------------
slow_one() {
    local round=$1 mode=$2 s=moonhttp port=${PORT[moonhttp]} row slowline=""
    log "slowloris: round $round, $mode"
    start_server "$s" "$OUT/$s-slow.log" 10 taskset -c $SERVER_CPU || return 1
    check_response "$s" || { stop_server; return 1; }
    taskset -c $CLIENT_CPU wrk -t1 -c100 -d1s "http://127.0.0.1:$port/api/users" >/dev/null 2>&1 || true
    if [ "$mode" = slow ]; then
        taskset -c $CLIENT_CPU "$WORK/clients" slowloris "$port" "$SLOW_N" $((DURATION + 20)) \
            >"$OUT/slowloris-r$round.txt" 2>&1 &
        CLIENT_PIDS=$!
        # Past the first read_header_timeout (5 s): the cut/reconnect cycle is
        # in its steady state before wrk starts.
        sleep 7
    else
        sleep 1
    fi
    local estab_before
    estab_before=$(established "$port")
    row=$(wrk_measure "$OUT/wrk-r$round-$mode.txt" -t1 -c100 -d"${DURATION}s" --latency "http://127.0.0.1:$port/api/users")
    if [ "$mode" = slow ]; then
        stop_clients
        slowline=$(grep '^final' "$OUT/slowloris-r$round.txt" || true)
    fi
    stop_server
    printf '%s\t%s\t%s\t%s\t%s\n' "$round" "$mode" "$row" "$estab_before" "$slowline" >>"$OUT/slow.tsv"
    echo "$row" | awk -F'\t' -v m="$mode" -v e="$estab_before" '{ printf "  %-5s %8.0f req/s  p50 %.3f ms  p99 %.3f ms  proc %.2f us/req  cpu0 %.2f us/req  steal %s%%  wrk cpu %s%%  errors %d/%d  (server connections before wrk: %d)\n",
        m, $1, $3, $4, $7, $8, $9, $10, $5, $6, e }' >&2
    [ -z "$slowline" ] || log "  slowloris client: $slowline"
}

median_rows() { # field number, mode -> "median (min–max)"
    awk -F'\t' -v f="$1" -v m="$2" '$2 == m { v[n++] = $f }
        END {
            if (!n) { print "—"; exit }
            for (i = 0; i < n; i++) for (j = i + 1; j < n; j++) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
            med = n % 2 ? v[int(n / 2)] : (v[n / 2 - 1] + v[n / 2]) / 2
            printf "%.6g (%.6g–%.6g)\n", med, v[0], v[n - 1]
        }' "$OUT/slow.tsv"
}
median_only() { median_rows "$1" "$2" | cut -d' ' -f1; }

log "conns $STAMP: idle=$IDLE_N slow=$SLOW_N rounds=$ROUNDS duration=${DURATION}s, results in $OUT"
: >"$OUT/idle.tsv"
: >"$OUT/slow.tsv"
if [ "$ONLY" != slowloris ]; then
    for s in $SERVERS; do
        if available "$s"; then idle_one "$s" || log "idle: $s failed, see $OUT/$s-idle.log"; else log "skipping $s: $SKIP_REASON"; fi
    done
fi
if [ "$ONLY" != idle ] && available moonhttp; then
    for round in $(seq "$ROUNDS"); do
        if [ $((round % 2)) = 1 ]; then order="base slow"; else order="slow base"; fi
        for mode in $order; do slow_one "$round" "$mode" || log "slowloris: round $round $mode failed"; done
    done
fi

{
    echo "conns.sh run $STAMP (idle $IDLE_N, slowloris $SLOW_N, $ROUNDS rounds × ${DURATION} s); $(nproc) CPUs, Linux $(uname -r)"
    if [ -s "$OUT/idle.tsv" ]; then
        echo
        echo "| server | connections | RSS before (MiB) | RSS with idle conns (MiB) | delta (MiB) | bytes / idle conn | peak RSS so far (MiB) | RSS after they left (MiB) | peak RSS after they left (MiB) | established (ss) | client |"
        echo "|---|---|---|---|---|---|---|---|---|---|---|"
        awk -F'\t' '{ d = $4 - $3; printf "| %s | %d | %.1f | %.1f | %.1f | %.0f | %.1f | %.1f | %.1f | %d | %s; %s |\n",
            $1, $2, $3 / 1024, $4 / 1024, d / 1024, d * 1024 / $2, $9 / 1024, $5 / 1024, $10 / 1024, $6, $7, $8 }' "$OUT/idle.tsv"
    fi
    if [ -s "$OUT/slow.tsv" ]; then
        echo
        echo "| load | req/s | p50 ms | p99 ms | CPU µs/req (process) | CPU µs/req (cpu0) | steal % | wrk CPU % |"
        echo "|---|---|---|---|---|---|---|---|"
        for m in base slow; do
            # slow.tsv: round mode rps requests p50 p99 err non2xx proc cpu0 steal wrkcpu ...
            printf '| %s | %s | %s | %s | %s | %s | %s | %s |\n' \
                "$([ $m = base ] && echo "wrk -c100 alone" || echo "wrk -c100 + $SLOW_N slowloris")" \
                "$(median_rows 3 $m)" "$(median_rows 5 $m)" "$(median_rows 6 $m)" "$(median_rows 9 $m)" \
                "$(median_rows 10 $m)" "$(median_rows 11 $m)" "$(median_rows 12 $m)"
        done
        awk -v b="$(median_only 3 base)" -v s="$(median_only 3 slow)" -v cb="$(median_only 9 base)" -v cs="$(median_only 9 slow)" \
            'BEGIN { if (b > 0 && cb > 0) printf "\nthroughput with slowloris: %.1f%% of without (loss %.1f%%); process CPU/req %.2fx\n", 100 * s / b, 100 - 100 * s / b, cs / cb }'
        echo
        echo "slowloris client, per round (final counts):"
        awk -F'\t' '$2 == "slow" { print "- round " $1 ": " $NF }' "$OUT/slow.tsv"
        echo "errors (socket errors/non-2xx) per run:"
        awk -F'\t' '{ printf "- round %s %s: %d/%d\n", $1, $2, $7, $8 }' "$OUT/slow.tsv"
    fi
} >"$OUT/summary.md"
cat "$OUT/summary.md"
log "results in $OUT"
