#!/usr/bin/env bash
# Memory after a spike: does a worker give back what a burst of connections
# took, once they are gone? bench/README.md has the figures.
#
#   bench/spike.sh [--conns N] [--tls N] [--wait S]
#
# (a) plain: two workers (examples/api.lua, --idle-timeout 300) get N
#     (20000) keep-alive connections from two bench/conns/clients.c idle
#     (one GET /api/users each, then idle): one process holds at most
#     10,000 here, where the hard open-file limit is 20,000 and root may not
#     raise it.
# (b) tls: new workers, on an https listener, get N (1000) handshakes
#     stalled after the server's first flight (bench/spike/stall_tls.py).
# For each: VmRSS of the server's processes before (after a warm-up), with
# the connections open, and
# S (10) seconds after the clients closed them all; "after/before" is the
# figure that matters (issue 43: within 1.2).
set -eu
cd "$(dirname "$0")/.."
ROOT=$(pwd)

CONNS=20000
TLS_CONNS=1000
WAIT=10
usage() { echo "usage: bench/spike.sh [--conns N] [--tls N] [--wait S]" >&2; exit 2; }
while [ $# -gt 0 ]; do
    case "$1" in
    --conns) CONNS=$2; shift 2 ;;
    --tls) TLS_CONNS=$2; shift 2 ;;
    --wait) WAIT=$2; shift 2 ;;
    *) usage ;;
    esac
done
case "$CONNS$TLS_CONNS$WAIT" in '' | *[!0-9]*) usage ;; esac

source bench/lib.sh
for tool in cc openssl python3 wrk; do
    command -v "$tool" >/dev/null || { echo "spike.sh: $tool is missing" >&2; exit 1; }
done
ulimit -n "$(ulimit -Hn)"
if [ "$(ulimit -n)" -lt $((CONNS / 2 + 1000)) ]; then
    echo "spike.sh: $CONNS connections need more descriptors than ulimit -n $(ulimit -n)" >&2
    exit 1
fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/moonhttp-spike.XXXXXX")
trap cleanup_bench EXIT
trap 'exit 130' INT TERM

cc -O2 -Wall -o "$WORK/clients" bench/conns/clients.c
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj /CN=localhost \
    -keyout "$WORK/key.pem" -out "$WORK/cert.pem" 2>/dev/null
TLS_PORT=$((BENCH_PORT_BASE + 9))
port=${PORT[moonhttp]}

# waits for READY in each client's output file; 0 when all came
wait_ready() {
    local i f missing
    for i in $(seq 1800); do
        missing=0
        for f in "$@"; do grep -q '^READY' "$f" || missing=1; done
        [ $missing = 0 ] && return 0
        sleep 0.1
    done
    return 1
}

# part NAME: before, with, after (KiB) for one burst
part() {
    local name=$1 before with after
    wrk -t1 -c10 -d1s "http://127.0.0.1:$port/api/users" >/dev/null 2>&1 || true
    sleep 1
    before=$(tree_rss_kb "$SERVER_PID")
    if [ "$name" = plain ]; then
        "$WORK/clients" idle "$port" $((CONNS / 2)) 600 >"$WORK/$name.out" 2>&1 &
        CLIENT_PIDS=$!
        "$WORK/clients" idle "$port" $((CONNS - CONNS / 2)) 600 >"$WORK/$name.2.out" 2>&1 &
        CLIENT_PIDS="$CLIENT_PIDS $!"
        wait_ready "$WORK/$name.out" "$WORK/$name.2.out" ||
            { echo "spike.sh: $name: no READY:" >&2; cat "$WORK/$name.out" "$WORK/$name.2.out" >&2; }
    else
        python3 bench/spike/stall_tls.py "$TLS_PORT" "$TLS_CONNS" >"$WORK/$name.out" 2>&1 </dev/null &
        CLIENT_PIDS=$!
        wait_ready "$WORK/$name.out" || { echo "spike.sh: $name: no READY:" >&2; cat "$WORK/$name.out" >&2; }
    fi
    sleep 1
    with=$(tree_rss_kb "$SERVER_PID")
    stop_clients
    sleep "$WAIT"
    after=$(tree_rss_kb "$SERVER_PID")
    awk -v n="$name" -v c="$(cat "$WORK/$name"*.out | grep '^READY' | tr '\n' ' ')" -v b="$before" -v w="$with" -v a="$after" -v s="$WAIT" \
        'BEGIN { printf "%-6s %s  RSS before %.1f MiB, with them %.1f MiB, %d s after they closed %.1f MiB: after/before %.2f\n",
                 n, c, b / 1024, w / 1024, s, a / 1024, a / b }'
}

echo "spike.sh: $MOONHTTP_BIN, 2 workers, $CONNS idle connections, $TLS_CONNS stalled TLS handshakes, wait ${WAIT} s; load $(cut -d' ' -f1-3 /proc/loadavg)"
for name in plain tls; do
    MOONHTTP_ARGS="--workers 2 --max-connections $((CONNS + 1000)) --idle-timeout 300 --read-header-timeout 300 \
--listen https://127.0.0.1:$TLS_PORT --tls-cert $WORK/cert.pem --tls-key $WORK/key.pem" \
        start_server moonhttp "$WORK/server.log" 10 || { cat "$WORK/server.log" >&2; exit 1; }
    part $name
    stop_server
done
