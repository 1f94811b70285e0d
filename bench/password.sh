#!/bin/sh
# Does password hashing keep the loop serving? wrk on GET /health alone, then
# again while one client logs in continuously (each login an Argon2id verify
# at the default parameters, on the worker's thread pool). Rounds interleave;
# prints each round's rates and the median ratio. Two placements:
#   pinned:   the whole server (loop and pool threads) on core 0, clients on core 1
#   unpinned: the server's threads left to the scheduler, clients on core 1
# usage: bench/password.sh [rounds] [seconds]
set -eu
cd "$(dirname "$0")/.."
BIN=${MOONHTTP_BIN:-build/moonhttp}
ROUNDS=${1:-3}
SECS=${2:-5}
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
URL=http://127.0.0.1:$PORT
rate() { taskset -c 1 wrk -t1 -c8 -d"${SECS}s" "$URL/health" | awk '/Requests\/sec/ {print $2}'; }
for placement in pinned unpinned; do
    if [ "$placement" = pinned ]; then
        taskset -c 0 "$BIN" --listen "127.0.0.1:$PORT" --workers 1 bench/password/app.lua >/dev/null 2>&1 &
    else
        "$BIN" --listen "127.0.0.1:$PORT" --workers 1 bench/password/app.lua >/dev/null 2>&1 &
    fi
    srv=$!
    sleep 1
    curl -s -o /dev/null -X POST "$URL/login" # the pool's threads start here
    ratios=""
    for r in $(seq "$ROUNDS"); do
        alone=$(rate)
        # one client logging in continuously, one login at a time, on one connection
        taskset -c 1 wrk -t1 -c1 -d"$((SECS + 2))s" -s bench/password/login.lua "$URL" > /tmp/mh-password-logins.txt &
        lp=$!
        busy=$(rate)
        wait "$lp" 2>/dev/null || true # its report: how many logins it got
        logins=$(awk '/Requests\/sec/ {print $2}' /tmp/mh-password-logins.txt)
        ratio=$(awk -v a="$alone" -v b="$busy" 'BEGIN { printf "%.2f", b / a }')
        echo "$placement round $r: alone $alone req/s, with logins $busy req/s: $ratio (logins/s: ${logins:-?})"
        ratios="$ratios $ratio"
    done
    echo "$placement median ratio: $(echo $ratios | tr ' ' '\n' | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')"
    kill "$srv"; wait "$srv" 2>/dev/null || true
done
