#!/bin/sh
# Requests per second on an app with --workers 1, --workers 2 (one socket per
# worker, the default) and --workers 2 --reuseport off (one shared socket),
# interleaved in rounds, with each worker's CPU-seconds during the run: wrk's
# keep-alive connections are spread once, at connect, so the CPU split shows
# how evenly the workers shared the load, and so do the sockets each worker
# holds halfway through (wrk's connections plus a few of its own).
#
# wrk shares the cores with the server, so on a 2-core machine the absolute
# figures mostly show how the cores are split; compare the rows of one run.
#
# usage: bench/workers/balance.sh [duration_s] [connections] [rounds] [app]
set -eu
cd "$(dirname "$0")/../.."
BIN=${MOONHTTP_BIN:-build/moonhttp}
DUR=${1:-5}
CONNS=${2:-64}
ROUNDS=${3:-2}
APP=${4:-examples/api.lua}
URL_PATH=${URL_PATH:-/api/users}
PORT=${PORT:-18481}
HZ=$(getconf CLK_TCK)

cpu_ticks() { # sum of utime+stime over the given pids
    t=0
    for p in "$@"; do
        s=$(sed 's/^.*) //' "/proc/$p/stat")
        set -- $s
        t=$((t + ${12} + ${13}))
    done
    echo $t
}

run() { # label, flags...
    label=$1
    shift
    $BIN --listen 127.0.0.1:$PORT --log-level warn "$@" "$APP" &
    srv=$!
    sleep 0.7
    workers=$(pgrep -P $srv | tr '\n' ' ')
    [ -n "$workers" ] || workers=$srv
    wrk -t1 -c"$CONNS" -d1s http://127.0.0.1:$PORT$URL_PATH >/dev/null # warm-up
    before=""
    for p in $workers; do before="$before $(cpu_ticks $p)"; done
    out_file=$(mktemp)
    wrk -t1 -c"$CONNS" -d"${DUR}s" http://127.0.0.1:$PORT$URL_PATH >"$out_file" &
    wrk_pid=$!
    sleep $((DUR / 2))
    conns="" # sockets each worker holds mid-run (its listening and internal ones included)
    for p in $workers; do conns="$conns $(find /proc/$p/fd -lname 'socket:*' 2>/dev/null | wc -l)"; done
    wait $wrk_pid
    out=$(cat "$out_file")
    rm -f "$out_file"
    split=""
    set -- $before
    for p in $workers; do
        split="$split $(echo "$(cpu_ticks $p) $1 $HZ" | awk '{printf "%.2f", ($1-$2)/$3}')"
        shift
    done
    kill $srv
    wait $srv 2>/dev/null || true
    rps=$(echo "$out" | awk '/Requests\/sec/ {print $2}')
    errs=$(echo "$out" | awk '/Socket errors|Non-2xx/ {print}' | tr '\n' ' ')
    printf "%-22s req/s=%-10s worker_cpu_s=%-12s sockets=%s %s\n" "$label" "$rps" "$split" "$conns" "$errs"
}

echo "# $(nproc) cores, wrk -t1 -c$CONNS -d${DUR}s on $APP$URL_PATH, $ROUNDS rounds; $(uptime | sed 's/.*load/load/')"
i=0
while [ $i -lt "$ROUNDS" ]; do
    run "workers=1" --workers 1
    run "workers=2 reuseport" --workers 2
    run "workers=2 shared" --workers 2 --reuseport off
    i=$((i + 1))
done
echo "# $(uptime | sed 's/.*load/load/')"
