#!/usr/bin/env bash
# Small JSON through a reverse proxy: moonhttp's http.proxy against nginx
# proxy_pass (keepalive upstreams) and Go's httputil.ReverseProxy
# (bench/proxy/go, GOMAXPROCS=1), each with one worker, in front of the same
# upstream (moonhttp examples/api.lua, one worker). wrk on loopback, the
# proxies interleaved in each round; each proxy's CPU seconds are read from
# /proc before and after each run, so the figure that matters on a shared
# machine is requests per CPU-second.
#   bench/proxy.sh [duration_s=10] [connections=32]      ROUNDS=3 by default
#   bench/proxy.sh --callgrind [N1=2000 N2=10000]
# GROUP=1: two upstreams (also with --callgrind), balanced round robin by an http.upstream group and
# by nginx's upstream block (Go is left out: ReverseProxy has no balancer).
# --callgrind: the moonhttp proxy worker under valgrind, N1 then N2
# keep-alive GETs on one curl connection: instructions per proxied request
# by difference (start-up cancels out) and the top functions per request.
set -euo pipefail
source "$(dirname "$0")/callgrind_lib.sh"
BIN=${MOONHTTP_BIN:-build/moonhttp}
CALLGRIND=""
if [ "${1:-}" = --callgrind ]; then CALLGRIND=1; N1=${2:-2000}; N2=${3:-10000}; fi
DUR=${1:-10}
CONNS=${2:-32}
ROUNDS=${ROUNDS:-3}
WORK=$(mktemp -d)
UPPORT=18180 MHPORT=18181 NGPORT=18182 UPPORT2=18183 GOPORT=18184
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$WORK"; }
trap cleanup EXIT

wait_port() { for _ in $(seq 200); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.05; done; return 1; }
# utime + stime of processes (all their threads), in seconds
cpu() {
    local t=0 p
    for p in "$@"; do
        read -r -a f <"/proc/$p/stat"
        t=$((t + f[13] + f[14]))
    done
    echo "scale=3; $t / $(getconf CLK_TCK)" | bc
}
children() { cat /proc/"$1"/task/*/children 2>/dev/null || true; }
# a wrk latency ("812.00us", "3.08ms", "1.20s") in ms
ms() { awk -v v="$1" 'BEGIN { u = v; sub(/^[0-9.]+/, "", u); n = v + 0
    printf "%.2f", u == "us" ? n / 1000 : u == "s" ? n * 1000 : n }'; }

"$BIN" --listen 127.0.0.1:$UPPORT --workers 1 examples/api.lua >"$WORK/up.log" 2>&1 &
PIDS+=($!)
wait_port $UPPORT

SERVERS="server 127.0.0.1:$UPPORT;"
if [ "${GROUP:-0}" = 1 ]; then
    "$BIN" --listen 127.0.0.1:$UPPORT2 --workers 1 examples/api.lua >"$WORK/up2.log" 2>&1 &
    PIDS+=($!)
    wait_port $UPPORT2
    export PROXY_UPSTREAMS="127.0.0.1:$UPPORT,127.0.0.1:$UPPORT2"
    SERVERS="server 127.0.0.1:$UPPORT; server 127.0.0.1:$UPPORT2;"
fi

# callgrind_run N: the proxy's instructions (all its processes) for N requests, start to exit
callgrind_run() {
    local n=$1 pid
    PROXY_UPSTREAM="http://127.0.0.1:$UPPORT" valgrind --tool=callgrind --trace-children=yes \
        --callgrind-out-file="$OUT/callgrind.out.$n.%p" \
        "$BIN" --listen 127.0.0.1:$MHPORT --workers 1 --log-level warn bench/proxy/proxy.lua \
        >"$OUT/callgrind-$n.log" 2>&1 &
    pid=$!
    wait_port $MHPORT
    curl -sf -o /dev/null "http://127.0.0.1:$MHPORT/api/users?n=[1-$n]"
    kill $pid
    wait $pid 2>/dev/null || true
    cg_total "$OUT/callgrind.out.$n"
}
if [ -n "$CALLGRIND" ]; then
    OUT=bench/results/proxy-callgrind-$(date +%Y%m%d-%H%M%S)
    mkdir -p "$OUT"
    i1=$(callgrind_run "$N1")
    i2=$(callgrind_run "$N2")
    awk -v n1="$N1" -v n2="$N2" -v i1="$i1" -v i2="$i2" \
        'BEGIN { printf "http.proxy: %.0f instructions/request (%d -> %d, %d -> %d)\n", (i2 - i1) / (n2 - n1), n1, i1, n2, i2 }' |
        tee "$OUT/callgrind.txt"
    echo "top functions by own instructions per request:" | tee -a "$OUT/callgrind.txt"
    cg_own_per_request "$OUT/callgrind.out.$N1" "$OUT/callgrind.out.$N2" $((N2 - N1)) 30 |
        tee -a "$OUT/callgrind.txt"
    echo "callgrind output in $OUT" >&2
    exit 0
fi

PROXY_UPSTREAM="http://127.0.0.1:$UPPORT" "$BIN" --listen 127.0.0.1:$MHPORT --workers 1 bench/proxy/proxy.lua >"$WORK/mh.log" 2>&1 &
MH=$!
PIDS+=($MH)
wait_port $MHPORT
mkdir -p "$WORK/nginx"
sed -e "s|@PORT@|$NGPORT|; s|@SERVERS@|$SERVERS|; s|@PREFIX@|$WORK/nginx|g; s|@USER@|$(id -un)|" \
    bench/proxy/nginx.conf.in >"$WORK/nginx/nginx.conf"
nginx -p "$WORK/nginx" -c "$WORK/nginx/nginx.conf" -e "$WORK/nginx/error.log" &
NG=$!
PIDS+=($NG)
wait_port $NGPORT
PROXIES="moonhttp nginx"
# Go: built offline from the standard library alone (Debian's golang-go)
if [ "${GROUP:-0}" != 1 ] && command -v go >/dev/null &&
    (cd bench/proxy/go && GO111MODULE=off GOCACHE=$WORK/gocache GOPATH=$WORK/gopath GOPROXY=off \
        GOTOOLCHAIN=local go build -o "$WORK/proxy-go" .) >&2; then
    GOMAXPROCS=1 "$WORK/proxy-go" 127.0.0.1:$GOPORT "http://127.0.0.1:$UPPORT" >"$WORK/go.log" 2>&1 &
    GO=$!
    PIDS+=($GO)
    wait_port $GOPORT
    PROXIES="$PROXIES go"
fi

echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '| round | proxy | req/s | p50 ms | p99 ms | proxy CPU s | req per CPU-second |\n|---:|---|---:|---:|---:|---:|---:|\n'
for round in $(seq "$ROUNDS"); do
    for name in $PROXIES; do
        case $name in
        moonhttp) port=$MHPORT procs="$MH" ;;
        nginx) port=$NGPORT procs="$NG $(children $NG)" ;;
        go) port=$GOPORT procs="$GO" ;;
        esac
        curl -sf "http://127.0.0.1:$port/api/users" >/dev/null
        wrk -t1 -c"$CONNS" -d2s "http://127.0.0.1:$port/api/users" >/dev/null # warm the upstream pools
        c0=$(cpu $procs)
        out=$(wrk -t1 -c"$CONNS" -d"${DUR}s" --latency "http://127.0.0.1:$port/api/users")
        c1=$(cpu $procs)
        rps=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
        total=$(awk '/requests in/ {print $1}' <<<"$out")
        p50=$(ms "$(awk '$1 == "50%" {print $2}' <<<"$out")")
        p99=$(ms "$(awk '$1 == "99%" {print $2}' <<<"$out")")
        used=$(echo "$c1 - $c0" | bc)
        printf '| %s | %s | %s | %s | %s | %s | %.0f |\n' "$round" $name "$rps" "$p50" "$p99" "$used" "$(echo "$total / $used" | bc -l)"
    done
done
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
