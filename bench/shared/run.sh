#!/usr/bin/env bash
# bench/notes/2026-12-03-shared.md: shared dict get and incr operations per second in one
# worker, moonhttp vs OpenResty's ngx.shared.DICT, both pinned to core 0,
# rounds interleaved; then two moonhttp workers incrementing one key.
#   bench/shared/run.sh [rounds] [ops per request]
set -euo pipefail
cd "$(dirname "$0")/../.."
ROUNDS=${1:-5}
N=${2:-1000000}
BIN=${MOONHTTP_BIN:-build/moonhttp}
PORT_MH=${BENCH_PORT_BASE:-18090}
PORT_NGX=$((PORT_MH + 1))
WORK=$(mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$WORK"; }
trap cleanup EXIT

wait_port() { for _ in $(seq 100); do curl -sf "http://127.0.0.1:$1/fill" >/dev/null && return 0; sleep 0.05; done; return 1; }

taskset -c 0 "$BIN" --listen "127.0.0.1:$PORT_MH" --workers 1 --log-level warn bench/shared/app.lua \
    2>"$WORK/moonhttp.log" &
PIDS+=($!)
sed -e "s|@PORT@|$PORT_NGX|" -e "s|@PREFIX@|$WORK|g" -e "s|@USER@|$(id -un)|" \
    bench/shared/nginx.conf.in >"$WORK/nginx.conf"
taskset -c 0 nginx -p "$WORK" -c "$WORK/nginx.conf" -e "$WORK/error.log" &
PIDS+=($!)
wait_port "$PORT_MH" && wait_port "$PORT_NGX" || { cat "$WORK"/*.log; exit 1; }

printf 'round\top\tmoonhttp\topenresty\tratio\n'
for r in $(seq "$ROUNDS"); do
    for op in get incr; do
        mh=$(taskset -c 1 curl -s "http://127.0.0.1:$PORT_MH/$op?n=$N")
        ngx=$(taskset -c 1 curl -s "http://127.0.0.1:$PORT_NGX/$op?n=$N")
        printf '%s\t%s\t%s\t%s\t%.2f\n' "$r" "$op" "$mh" "$ngx" "$(echo "$mh / $ngx" | bc -l)"
    done
done
kill "${PIDS[@]}" 2>/dev/null || true
wait 2>/dev/null || true
PIDS=()

# Two workers, one key, 8 connections at once, 20 requests each of 10,000 incr.
"$BIN" --listen "127.0.0.1:$PORT_MH" --workers 2 --log-level warn bench/shared/app.lua 2>"$WORK/two.log" &
PIDS+=($!)
wait_port "$PORT_MH"
LOOPS=()
for c in $(seq 8); do
    (for _ in $(seq 20); do curl -s "http://127.0.0.1:$PORT_MH/one?n=10000"; echo; done) >"$WORK/pids.$c" &
    LOOPS+=($!)
done
wait "${LOOPS[@]}"
total=$(curl -s "http://127.0.0.1:$PORT_MH/one/total")
workers=$(cat "$WORK"/pids.* | sort | uniq -c | awk '{printf "pid %s served %s requests; ", $2, $1}')
echo "two workers: total $total, expected $((8 * 20 * 10000)); $workers"
