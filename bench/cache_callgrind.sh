#!/usr/bin/env bash
# Instructions per request of moonhttp.cache in front of http.proxy, by
# difference as bench/callgrind.sh does: the front (one worker) runs under
# callgrind answering N1, then N2 keep-alive GETs from bench/cache/client.lua;
# the origin (bench/cache/upstream.lua) runs outside valgrind. Startup cancels:
#
#   instructions/request = (Ir(N2) - Ir(N1)) / (N2 - N1)
#
#   bench/cache_callgrind.sh hit|cond|miss [N1 N2]     (default 500 2500)
#   CACHE_LUA=/tmp/old-cache.lua bench/cache_callgrind.sh hit
#   LOCK_TIMEOUT=0 bench/cache_callgrind.sh miss        (no collapsing lock)
#
# hit: one URL, a fresh entry (after the first); cond: the same with a
# matching If-None-Match (a 304 from the entry); miss: a new URL each time,
# proxied and stored. CACHE_LUA loads another cache.lua in place of the
# embedded one (git show main:lua/moonhttp/cache.lua > /tmp/old-cache.lua),
# so before and after come from one binary.
set -eu
cd "$(dirname "$0")/.."
. bench/callgrind_lib.sh
MODE=${1:-hit}
N1=${2:-500}
N2=${3:-2500}
BIN=${MOONHTTP_BIN:-build/moonhttp}
UP_PORT=${UP_PORT:-18190}
FRONT_PORT=${FRONT_PORT:-18191}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/moonhttp-cachecg.XXXXXX")
UPID=""
trap '[ -n "$UPID" ] && kill "$UPID" 2>/dev/null; rm -rf "$WORK"' EXIT

wait_port() { for _ in $(seq 1 600); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.1; done; return 1; }

"$BIN" --listen "127.0.0.1:$UP_PORT" --workers 1 bench/cache/upstream.lua >"$WORK/up.log" 2>&1 &
UPID=$!
wait_port "$UP_PORT"

run() {
    local n=$1 pid
    UP_PORT=$UP_PORT CACHE_LUA=${CACHE_LUA:-} LOCK_TIMEOUT=${LOCK_TIMEOUT:-} valgrind --tool=callgrind \
        --callgrind-out-file="$WORK/cg.$n.%p" "$BIN" --listen "127.0.0.1:$FRONT_PORT" \
        --workers 1 bench/cache/front.lua >"$WORK/front.$n.log" 2>&1 &
    pid=$!
    wait_port "$FRONT_PORT" || { cat "$WORK/front.$n.log" >&2; exit 1; }
    lua5.4 bench/cache/client.lua "$FRONT_PORT" "$n" "$MODE"
    kill -TERM "$pid"
    wait "$pid" || true
    cg_total "$WORK/cg.$n"
}

I1=$(run "$N1")
I2=$(run "$N2")
awk -v m="$MODE" -v c="${CACHE_LUA:-embedded}${LOCK_TIMEOUT:+, lock_timeout $LOCK_TIMEOUT}" -v n1="$N1" -v n2="$N2" -v i1="$I1" -v i2="$I2" 'BEGIN {
    printf "%s (%s): %d requests -> %d, %d -> %d instructions: %.0f instructions/request\n",
        m, c, n1, i1, n2, i2, (i2 - i1) / (n2 - n1)
}'
