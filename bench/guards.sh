#!/usr/bin/env bash
# handler_cpu_limit under load: wrk -c100 on /api/users against --workers 2,
# once alone and once while a second client requests GET /spin (a handler
# that never yields) every second; prints both req/s, their ratio, and how
# long each spinning request took to get its 500 (handler_cpu_limit = LIMIT).
#
#   bench/guards.sh [SECONDS [LIMIT [ROUNDS]]]     (default 10 2 3)
#
# Rounds alternate (alone, with spin, alone, with spin, ...); the server is
# pinned to CPU 0 and wrk to CPU 1, as bench/notes/2026-12-02-lab-notebook.md asks.
set -eu
cd "$(dirname "$0")/.."
SECS=${1:-10}
LIMIT=${2:-2}
ROUNDS=${3:-3}
BIN=${MOONHTTP_BIN:-build/moonhttp}
PORT=${PORT:-18480}
OUT=$(mktemp -d "${TMPDIR:-/tmp}/moonhttp-guards.XXXXXX")
taskset -c 0 "$BIN" --listen "127.0.0.1:$PORT" --workers 2 --handler-cpu-limit "$LIMIT" \
    --log-level warn bench/guards/app.lua >"$OUT/server.log" 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null; wait $SERVER 2>/dev/null; rm -rf "$OUT"' EXIT
sleep 1
wrk_run() { # prints req/s
    taskset -c 1 wrk -t2 -c100 -d"${SECS}s" "http://127.0.0.1:$PORT/api/users" |
        awk '/^Requests\/sec/ { print $2 }'
}
spinner() { # one GET /spin a second; prints status and seconds per request
    local end=$(($(date +%s) + SECS))
    while [ "$(date +%s)" -lt "$end" ]; do
        curl -s -o /dev/null -m 10 -w '%{http_code} %{time_total}\n' \
            "http://127.0.0.1:$PORT/spin" >>"$OUT/spin.txt" &
        sleep 1
    done
    wait
}
printf 'round alone_rps spin_rps ratio\n'
for r in $(seq "$ROUNDS"); do
    a=$(wrk_run)
    spinner &
    SP=$!
    b=$(wrk_run)
    wait $SP
    awk -v r="$r" -v a="$a" -v b="$b" 'BEGIN { printf "%d %.0f %.0f %.3f\n", r, a, b, b / a }'
done
echo "spinning requests (status, seconds):"
sort "$OUT/spin.txt" | uniq -c | sort -rn | head -5
awk -v l="$LIMIT" '{ n++; if ($1 != 500) bad++; if ($2 > l + 0.1) late++; if ($2 > max) max = $2 }
    END { printf "%d spinning requests, %d not 500, %d later than limit + 0.1 s, slowest %.3f s\n",
          n, bad, late, max }' "$OUT/spin.txt"
