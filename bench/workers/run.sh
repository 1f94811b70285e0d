#!/bin/sh
# Requests per CPU-second of moonhttp with --workers 1 and --workers 2.
#
# wrk shares the machine, so requests/second alone mostly measures how the
# cores are split between wrk and the server. Instead we count the CPU time
# the worker processes themselves used (utime + stime from /proc/PID/stat,
# in clock ticks, read before and after the run; for --workers 2 the master's
# children, for --workers 1 the process itself) and divide the requests wrk
# completed by it. The master's own CPU time is reported separately.
#
# wrk runs with one thread (WRK_THREADS) so it takes one core: with two it
# would oversubscribe the two cores against two workers and measure
# preemption rather than the server.
#
# usage: bench/workers/run.sh [duration_s] [connections] [rounds]
set -eu
cd "$(dirname "$0")/../.."
BIN=${MOONHTTP_BIN:-build/moonhttp}
DUR=${1:-10}
CONNS=${2:-64}
ROUNDS=${3:-3}
WRK_THREADS=${WRK_THREADS:-1}
PORT=${PORT:-18480}
HZ=$(getconf CLK_TCK)

cpu_ticks() { # sum of utime+stime over the given pids
    t=0
    for p in "$@"; do
        s=$(sed 's/^.*) //' "/proc/$p/stat")
        set -- $s
        # after "pid (comm) ", field 3 is state; utime/stime are fields 14/15 → ${12}/${13} here
        t=$((t + ${12} + ${13}))
    done
    echo $t
}

run() {
    n=$1
    $BIN --listen 127.0.0.1:$PORT --workers "$n" --log-level warn bench/workers/hello.lua &
    srv=$!
    sleep 0.5
    if [ "$n" -gt 1 ]; then workers=$(pgrep -P $srv | tr '\n' ' '); else workers=$srv; fi
    wrk -t"$WRK_THREADS" -c"$CONNS" -d2s http://127.0.0.1:$PORT/hello >/dev/null # warm-up
    w0=$(cpu_ticks $workers); m0=$(cpu_ticks $srv)
    out=$(wrk -t"$WRK_THREADS" -c"$CONNS" -d"${DUR}s" http://127.0.0.1:$PORT/hello)
    w1=$(cpu_ticks $workers); m1=$(cpu_ticks $srv)
    kill $srv; wait $srv 2>/dev/null || true
    reqs=$(echo "$out" | awk '/requests in/ {print $1}')
    rps=$(echo "$out" | awk '/Requests\/sec/ {print $2}')
    errs=$(echo "$out" | awk '/Socket errors|Non-2xx/ {print}' | tr '\n' ' ')
    wcpu=$(echo "$w1 $w0 $HZ" | awk '{printf "%.2f", ($1-$2)/$3}')
    if [ "$n" -gt 1 ]; then mcpu=$(echo "$m1 $m0 $HZ" | awk '{printf "%.2f", ($1-$2)/$3}'); else mcpu="-"; fi
    per=$(echo "$reqs $wcpu" | awk '{printf "%.0f", $1/$2}')
    printf "workers=%s  requests=%s  req/s=%s  worker_cpu_s=%s  master_cpu_s=%s  req_per_cpu_s=%s %s\n" \
        "$n" "$reqs" "$rps" "$wcpu" "$mcpu" "$per" "$errs"
}

echo "# $(nproc) cores, wrk -t$WRK_THREADS -c$CONNS -d${DUR}s, $ROUNDS rounds each"
i=0
while [ $i -lt "$ROUNDS" ]; do
    run 1
    run 2
    i=$((i + 1))
done
