#!/usr/bin/env bash
# WebSocket: (a) echo of SIZE-byte messages over CONNS connections, moonhttp
# (one worker) against a Node.js echo server on the `ws` package, both pinned
# to CPU 0, the load generator (bench/ws/wsload.c: C and epoll, so the
# server and not the client is the limit) on CPU 1; rounds
# interleaved; the figure is messages echoed per server CPU-second (the
# server's utime+stime from /proc). (b) N idle WebSockets opened by
# bench/ws/load.js (Node.js `ws`): the server's RSS before and after.
#
#   bench/ws.sh [--rounds R] [--duration S] [--conns C] [--window W] [--size B] [--idle N]
#
# Needs `npm install` in bench/ws (done here once; the npm registry): the
# tests do not. Results in bench/notes/2026-12-04-ws.md.
set -eu
cd "$(dirname "$0")/.."
ROUNDS=3 DURATION=5 CONNS=100 WINDOW=1 SIZE=64 IDLE=10000
while [ $# -gt 0 ]; do
    case $1 in
    --rounds) ROUNDS=$2 ;; --duration) DURATION=$2 ;; --conns) CONNS=$2 ;;
    --window) WINDOW=$2 ;; --size) SIZE=$2 ;; --idle) IDLE=$2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
    esac
    shift 2
done
BIN=${MOONHTTP_BIN:-build/moonhttp}
BASE=${BENCH_PORT_BASE:-18780}
MH_PORT=$BASE NODE_PORT=$((BASE + 1))
WORK=$(mktemp -d "${TMPDIR:-/tmp}/moonhttp-ws.XXXXXX")
# shellcheck source=lib.sh
. bench/lib.sh
[ -d bench/ws/node_modules/ws ] || (cd bench/ws && npm install --no-audit --no-fund >/dev/null)
ulimit -n $((IDLE + 1000))
cc -O2 -o "$WORK/wsload" bench/ws/wsload.c # per process: the server and the client each hold IDLE sockets
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null; rm -rf "$WORK"; }
trap cleanup EXIT
HZ=$(getconf CLK_TCK)

start_moonhttp() {
    taskset -c 0 "$BIN" --listen "127.0.0.1:$MH_PORT" --workers 1 --log-level warn \
        --max-connections $((IDLE + 1000)) bench/ws/echo.lua >"$WORK/moonhttp.log" 2>&1 &
    PIDS+=($!)
    MH_PID=$!
    until port_open "$MH_PORT"; do sleep 0.1; done
}
start_node() {
    taskset -c 0 node bench/ws/echo_server.js "$NODE_PORT" >"$WORK/node.log" 2>&1 &
    PIDS+=($!)
    NODE_PID=$!
    until port_open "$NODE_PORT"; do sleep 0.1; done
}
start_moonhttp
start_node

echo_round() { # name pid port -> "name messages cpu_seconds per_cpu_second"
    local t0 t1 n
    t0=$(tree_ticks "$2")
    n=$(taskset -c 1 "$WORK/wsload" "$3" /echo "$CONNS" "$WINDOW" "$DURATION" "$SIZE" |
        awk '/^messages/ { print $2 }')
    t1=$(tree_ticks "$2")
    awk -v name="$1" -v n="$n" -v t=$((t1 - t0)) -v hz="$HZ" \
        'BEGIN { s = t / hz; printf "%s %d %.2f %.0f\n", name, n, s, (s > 0 ? n / s : 0) }'
}

printf '# echo: %d connections, window %d, %d-byte messages, %d s per round\n' "$CONNS" "$WINDOW" "$SIZE" "$DURATION"
printf 'round server messages cpu_s msgs_per_cpu_s\n'
: >"$WORK/echo.txt"
for r in $(seq "$ROUNDS"); do
    if [ $((r % 2)) -eq 1 ]; then order="moonhttp node"; else order="node moonhttp"; fi
    for s in $order; do
        if [ "$s" = moonhttp ]; then line=$(echo_round moonhttp "$MH_PID" "$MH_PORT")
        else line=$(echo_round node "$NODE_PID" "$NODE_PORT"); fi
        echo "$r $line" | tee -a "$WORK/echo.txt"
    done
done
median() { # server -> median of its msgs_per_cpu_s
    awk -v s="$1" '$2 == s { print $5 }' "$WORK/echo.txt" | sort -n |
        awk '{ v[NR] = $1 } END { print NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
m_mh=$(median moonhttp) m_node=$(median node)
awk -v a="$m_mh" -v b="$m_node" 'BEGIN { printf "median msgs per CPU-second: moonhttp %.0f, node %.0f, ratio %.2fx\n", a, b, a / b }'

idle_rss() { # name pid port
    local before after lpid
    before=$(tree_rss_kb "$2")
    taskset -c 1 node bench/ws/load.js idle "ws://127.0.0.1:$3/echo" "$IDLE" >"$WORK/idle.out" 2>&1 &
    lpid=$!
    until grep -q '^open\|^error' "$WORK/idle.out"; do sleep 0.2; done
    sleep 1
    after=$(tree_rss_kb "$2")
    kill "$lpid"; wait "$lpid" 2>/dev/null || true
    awk -v name="$1" -v b="$before" -v a="$after" -v n="$IDLE" -v o="$(cat "$WORK/idle.out")" \
        'BEGIN { printf "%s: %s; RSS %.1f MB before, %.1f MB with them (+%.1f MB, %.2f KiB each)\n", name, o, b / 1024, a / 1024, (a - b) / 1024, (a - b) / n }'
}
printf '# %d idle WebSockets\n' "$IDLE"
idle_rss moonhttp "$MH_PID" "$MH_PORT"
idle_rss node "$NODE_PID" "$NODE_PORT"
