#!/usr/bin/env bash
# Interleaved latency rounds for the tail work (issue 15), quicker than run.sh:
#   VARIANTS="A B N F" bench/ab_tail.sh CONNS SECONDS ROUNDS
# A = $MOONHTTP_A (default build/moonhttp), B = $MOONHTTP_B (another build, e.g.
# a worktree of the commit before a change), N = nginx + lua, F = the epoll
# floor, E = the floor edge-triggered (FLOOR_ET=1). Server on CPU 0, wrk on
# CPU 1, GET /api/users, 1 s warm-up at -c100.
# Prints req/s, p50, p99, p99.9, max, and the server's CPU ticks (utime+stime
# of the process and its children, 100 per second) over the measured run.
set -u
cd "$(dirname "$0")/.."
WORK=$(mktemp -d "${TMPDIR:-/tmp}/moonhttp-abtail.XXXXXX")
export WORK
source bench/lib.sh
trap 'stop_server; rm -rf "$WORK"' EXIT
ulimit -n 20000
build_floor

# The sum of /proc/PID/stat fields ($@: 14 is utime, 15 stime) over the
# server and its children (workers), in clock ticks.
ticks_of() {
    local t p f prog="{print 0"
    for f in "$@"; do prog="$prog + \$$f"; done
    prog="$prog}"
    t=$(awk "$prog" "/proc/$SERVER_PID/stat")
    for p in $(pgrep -P "$SERVER_PID"); do t=$((t + $(awk "$prog" "/proc/$p/stat"))); done
    echo "$t"
}
cpu_ticks() { ticks_of 14 15; }

C=${1:-1000}; D=${2:-5}; R=${3:-3}
for r in $(seq 1 $R); do
  for v in ${VARIANTS:-A B N}; do
    if [ $v = A ]; then export MOONHTTP_BIN=${MOONHTTP_A:-build/moonhttp}; else export MOONHTTP_BIN=${MOONHTTP_B:-build/moonhttp}; fi
    S=moonhttp; [ $v = N ] && S=nginx-lua; [ $v = F ] && S=floor; [ "$v" = E ] && S=floor
    if [ "$v" = E ]; then export FLOOR_ET=1; else unset FLOOR_ET; fi
    start_server $S $WORK/$v.log 10 taskset -c 0 || { cat $WORK/$v.log; exit 1; }
    taskset -c 1 wrk -t1 -c100 -d1s http://127.0.0.1:${PORT[$S]}/api/users >/dev/null
    t0=$(cpu_ticks); u0=$(ticks_of 14)
    out=$(taskset -c 1 wrk -t1 -c$C -d${D}s --latency -s ${SCRIPT:-bench/wrk/latency.lua} http://127.0.0.1:${PORT[$S]}/api/users 2>&1)
    t1=$(cpu_ticks); u1=$(ticks_of 14)
    stop_server
    echo "round $r $v c$C: cpu $((t1 - t0)) ticks/${D}s (user $((u1 - u0))); $(echo "$out" | grep -E 'Requests/sec' | awk '{print $2}') req/s; $(echo "$out" | grep -E '^ +(50|99)%|TAIL' | tr -s ' ' | tr '\n' ';')"
  done
done
