#!/bin/sh
# bench/data/run.sh: the fan-out and Redis figures of bench/notes/2026-12-03-data.md.
# Server pinned to core 0, wrk to core 1, redis-server on core 0 beside the
# server. ROUNDS (default 3) interleaved rounds of DURATION seconds (default 5).
set -eu
cd "$(dirname "$0")/../.."
BIN=${MOONHTTP_BIN:-build/moonhttp}
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-5}
POOL=${POOL:-16}
BASE=${BENCH_PORT_BASE:-19380}
UP=$BASE; APP=$((BASE + 1)); RAPP=$((BASE + 2)); RPORT=$((BASE + 3))
OUT=$(mktemp -d)
pids=""
cleanup() { for p in $pids; do kill "$p" 2>/dev/null || true; done; rm -rf "$OUT"; }
trap cleanup EXIT INT TERM

wait_port() { for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$1/" && return 0; sleep 0.05; done; return 1; }

taskset -c 0 "$BIN" --workers 1 --listen 127.0.0.1:$UP bench/data/upstream.lua >"$OUT/up.log" 2>&1 & pids="$pids $!"
UPSTREAM=127.0.0.1:$UP taskset -c 0 "$BIN" --workers 1 --listen 127.0.0.1:$APP bench/data/fanout.lua >"$OUT/app.log" 2>&1 & pids="$pids $!"
taskset -c 0 redis-server --port $RPORT --bind 127.0.0.1 --save '' --appendonly no --daemonize no >"$OUT/redis.log" 2>&1 & pids="$pids $!"
sleep 0.3
redis-cli -p $RPORT set bench:key value >/dev/null
REDIS_PORT=$RPORT POOL=$POOL taskset -c 0 "$BIN" --workers 1 --listen 127.0.0.1:$RAPP bench/data/redis_app.lua >"$OUT/rapp.log" 2>&1 & pids="$pids $!"
wait_port $UP; wait_port $APP; wait_port $RAPP

echo "## fan-out: time for one request (curl, 20 sequential requests, median)"
for path in serial threads; do
  for i in $(seq 20); do curl -s -o /dev/null -w '%{time_total}\n' "http://127.0.0.1:$APP/$path"; done |
    sort -n | sed -n 10p | awk -v p=$path '{ printf "%s\t%.1f ms\n", p, $1 * 1000 }'
done

echo "## redis: requests/s at -c100 (wrk -t1, $DURATION s), rounds interleaved"
for r in $(seq "$ROUNDS"); do
  for path in plain redis; do
    taskset -c 1 wrk -t1 -c100 -d"${DURATION}s" "http://127.0.0.1:$RAPP/$path" >"$OUT/wrk.txt" &
    w=$!
    sleep $((DURATION / 2))
    # connections to Redis in the middle of the load, not counting redis-cli's own
    conns=$(redis-cli -p $RPORT client list | grep -vc 'cmd=client' || true)
    wait $w
    rps=$(awk '/Requests\/sec/ { print $2 }' "$OUT/wrk.txt")
    echo "round $r	$path	$rps	redis connections under load: $conns (pool size $POOL)"
  done
  floor=$(taskset -c 1 redis-benchmark -p $RPORT -c 100 -n 200000 -P 1 -t get --csv 2>/dev/null | awk -F'"' '/^"GET"/ { print $4 }')
  echo "round $r	redis-benchmark -P 1 -c100 GET	$floor"
done
