#!/usr/bin/env bash
# HTTP/2 benchmark (issue 16): moonhttp vs nginx (lua, `listen ... http2`) vs
# h2o (mruby), each one worker/thread pinned to CPU 0, h2load pinned to CPU 1,
# GET /api/users with the same bytes from all three.
#   h2c  h2load -c100 -m10 over cleartext HTTP/2 (prior knowledge)
#   tls  the same over TLS 1.2 with ALPN h2, after the handshakes
# Each run is timing-based: h2load --warm-up-time=$WARM (connections and
# handshakes happen there) then -D $DURATION of measurement; the server's CPU
# is read from the end of the warm-up to the end.
# Runs alternate between the servers; the table shows medians of $RUNS of
# requests/s, of server CPU microseconds per request (utime+stime of the
# server's process tree over the run, divided by the requests) and of p50/p99
# (h2load --log-file: each request's time to the end of its response). Then the RSS
# of each server with $IDLE idle h2c connections (bench/h2/idle.py).
# Usage: bench/h2.sh [build/moonhttp]
#   env: DURATION WARM RUNS IDLE H2_PORT_BASE; IDLE_ONLY=1 skips the h2load
#   runs; IDLE_SERVERS (default "moonhttp nginx h2o") and IDLE_MODES (default
#   "fresh request requests", see bench/h2/idle.py) pick the idle table's rows
set -eu
cd "$(dirname "$0")/.."
BIN=$(realpath "${1:-build/moonhttp}")
DURATION=${DURATION:-5}
WARM=${WARM:-1}
RUNS=${RUNS:-3}
IDLE=${IDLE:-10000}
IDLE_SERVERS=${IDLE_SERVERS:-moonhttp nginx h2o}
IDLE_MODES=${IDLE_MODES:-fresh request requests}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/moonhttp-h2.XXXXXX")
source bench/lib.sh
SERVER_CPU=0
CLIENT_CPU=1
BASE=${H2_PORT_BASE:-18180}
declare -A H2C=([moonhttp]=$BASE [nginx]=$((BASE + 1)) [h2o]=$((BASE + 2)))
declare -A TLS=([moonhttp]=$((BASE + 10)) [nginx]=$((BASE + 11)) [h2o]=$((BASE + 12)))
declare -A PID
trap 'for p in "${PID[@]}"; do kill $(tree_pids $p) 2>/dev/null || true; done; wait 2>/dev/null; rm -rf "$WORK"' EXIT
trap 'exit 130' INT TERM

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
    -keyout "$WORK/cert.key" -out "$WORK/cert.pem" -subj /CN=localhost >/dev/null 2>&1

start() { # name
    local name=$1 dir=$WORK/$1
    mkdir -p "$dir"
    local fill="s|@PORT@|${H2C[$name]}|g; s|@TLSPORT@|${TLS[$name]}|g; s|@PREFIX@|$dir|g; s|@USER@|$(id -un)|g"
    case $name in
    moonhttp)
        taskset -c $SERVER_CPU "$BIN" --workers 1 --log-level error --max-connections 15000 \
            --listen "127.0.0.1:${H2C[$name]}" --listen "https://127.0.0.1:${TLS[$name]}" \
            --tls-cert "$WORK/cert.pem" --tls-key "$WORK/cert.key" examples/api.lua >"$dir/log" 2>&1 &
        ;;
    nginx)
        sed -e "$fill" bench/h2/nginx.conf.in >"$dir/nginx.conf"
        taskset -c $SERVER_CPU nginx -p "$dir" -c "$dir/nginx.conf" -e "$dir/error.log" >"$dir/log" 2>&1 &
        ;;
    h2o)
        sed -e "$fill" bench/h2/h2o.conf.in >"$dir/h2o.conf"
        taskset -c $SERVER_CPU h2o -c "$dir/h2o.conf" >"$dir/log" 2>&1 &
        ;;
    esac
    PID[$name]=$!
    for _ in $(seq 50); do port_open "${TLS[$name]}" && port_open "${H2C[$name]}" && return 0; sleep 0.1; done
    echo "bench/h2.sh: $name did not start, see $dir/log" >&2
    cat "$dir/log" >&2
    exit 1
}

# measure name mode: prints "rps us_per_req mean_ms"
measure() {
    local name=$1 mode=$2 url out p0 p1
    if [ "$mode" = h2c ]; then url="http://127.0.0.1:${H2C[$name]}/api/users"; else url="https://127.0.0.1:${TLS[$name]}/api/users"; fi
    out=$WORK/h2load.out
    taskset -c $CLIENT_CPU h2load -c100 -m10 --warm-up-time="$WARM" -D "$DURATION" \
        --log-file="$WORK/h2load.log" "$url" >"$out" 2>&1 &
    local h=$!
    sleep "$WARM"
    p0=$(tree_ticks "${PID[$name]}")
    wait $h || true
    p1=$(tree_ticks "${PID[$name]}")
    awk -v t=$((p1 - p0)) -v hz="$(getconf CLK_TCK)" '
        /^finished in/ { rps = $4 + 0 }
        /^requests:/ { ok = $8 + 0; bad = $10 + $12 + $14 }
        /^time for request:/ { mean = $5 }
        END {
            if (mean ~ /us$/) m = mean / 1000; else if (mean ~ /ms$/) m = mean + 0; else m = mean * 1000
            printf "%d %.2f %.2f %d %d ", rps, ok ? t * 1e6 / hz / ok : 0, m, ok, bad }' "$out"
    # p50 and p99 in ms from the per-request log (third column: µs to the end of the response)
    cut -f3 "$WORK/h2load.log" | sort -n | awk '{ a[NR] = $1 }
        END { if (NR) printf "%.2f %.2f\n", a[int(NR * 0.5 + 0.5)] / 1000, a[int(NR * 0.99 + 0.5)] / 1000; else print "0 0" }'
    rm -f "$WORK/h2load.log"
}

median() { sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }

for s in moonhttp nginx h2o; do start $s; done
[ "${IDLE_ONLY:-0}" = 1 ] || {
for s in moonhttp nginx h2o; do # the same answer from each
    curl -sS --http2-prior-knowledge "http://127.0.0.1:${H2C[$s]}/api/users" | grep -qx '{"name":"baseline","users":\[\]}' ||
        { echo "bench/h2.sh: $s answers /api/users with other bytes" >&2; exit 1; }
done
for mode in h2c tls; do
    for r in $(seq "$RUNS"); do
        for s in moonhttp nginx h2o; do
            read -r rps us mean ok bad p50 p99 <<<"$(measure $s $mode)"
            echo "$mode run $r $s: $rps req/s, $us us CPU/req, mean $mean ms, p50 $p50 ms, p99 $p99 ms, $ok ok, $bad failed" >&2
            echo "$rps" >>"$WORK/$s.$mode.rps"; echo "$us" >>"$WORK/$s.$mode.us"; echo "$mean" >>"$WORK/$s.$mode.mean"
            echo "$p50" >>"$WORK/$s.$mode.p50"; echo "$p99" >>"$WORK/$s.$mode.p99"
        done
    done
done

echo "| mode | server | req/s | CPU µs/req | mean ms | p50 ms | p99 ms | CPU/req ÷ moonhttp's |"
echo "|---|---|---:|---:|---:|---:|---:|---:|"
for mode in h2c tls; do
    mus=$(median <"$WORK/moonhttp.$mode.us")
    for s in moonhttp nginx h2o; do
        us=$(median <"$WORK/$s.$mode.us")
        echo "| $mode | $s | $(median <"$WORK/$s.$mode.rps") | $us | $(median <"$WORK/$s.$mode.mean") | $(median <"$WORK/$s.$mode.p50") | $(median <"$WORK/$s.$mode.p99") | $(awk -v a="$us" -v b="$mus" 'BEGIN { printf "%.2f", a / b }') |"
    done
done
}

# Idle connections: RSS of each server's process tree before and with $IDLE
# open h2c connections, fresh (preface + SETTINGS only) and after one request
# each (bench/h2/idle.py), one freshly started server at a time.
rss() { # pid...: kB summed over the processes
    local p t=0
    for p in "$@"; do t=$((t + $(awk '/^VmRSS/ { print $2 }' /proc/"$p"/status))); done
    echo $t
}
idle() { # name mode
    local name=$1 mode=$2 r0 r1 fd
    kill $(tree_pids "${PID[$name]}") 2>/dev/null || true # a fresh server: none of the last run's heap
    wait "${PID[$name]}" 2>/dev/null || true
    start "$name"
    sleep 1
    r0=$(rss $(tree_pids "${PID[$name]}"))
    exec {fd}> >(/usr/bin/python3 bench/h2/idle.py "${H2C[$name]}" "$IDLE" "$mode" >"$WORK/idle.out")
    for _ in $(seq 600); do grep -q '^open' "$WORK/idle.out" 2>/dev/null && break; sleep 0.1; done
    sleep 2
    r1=$(rss $(tree_pids "${PID[$name]}"))
    exec {fd}>&-
    echo "| $mode | $name | $(cut -d' ' -f2 "$WORK/idle.out") | $r0 | $r1 | $(( (r1 - r0) * 1024 / IDLE )) |"
}
echo
echo "| idle h2c | server | connections | RSS kB before | RSS kB with them | bytes each |"
echo "|---|---|---:|---:|---:|---:|"
for mode in $IDLE_MODES; do
    for s in $IDLE_SERVERS; do idle "$s" "$mode"; done
done
