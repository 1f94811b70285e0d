#!/usr/bin/env bash
# Small JSON through a reverse proxy: moonhttp's http.proxy against nginx
# proxy_pass (keepalive upstreams), both with one worker, in front of the same
# upstream (moonhttp examples/api.lua, one worker). wrk on loopback; the
# proxy's CPU seconds are read from /proc before and after each run, so the
# figure that matters on a shared machine is requests per CPU-second.
#   bench/proxy.sh [duration_s=10] [connections=32]
# GROUP=1: two upstreams, balanced round robin by an http.upstream group and
# by nginx's upstream block.
set -euo pipefail
BIN=${MOONHTTP_BIN:-build/moonhttp}
DUR=${1:-10}
CONNS=${2:-32}
WORK=$(mktemp -d)
UPPORT=18180 MHPORT=18181 NGPORT=18182 UPPORT2=18183
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$WORK"; }
trap cleanup EXIT

wait_port() { for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.05; done; return 1; }
# utime + stime of a process and its children threads, in seconds
cpu() {
    local t=0 p
    for p in "$@"; do
        read -r -a f <"/proc/$p/stat"
        t=$((t + f[13] + f[14]))
    done
    echo "scale=3; $t / $(getconf CLK_TCK)" | bc
}
children() { cat /proc/"$1"/task/*/children 2>/dev/null || true; }

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

curl -sf "http://127.0.0.1:$MHPORT/api/users" >/dev/null
curl -sf "http://127.0.0.1:$NGPORT/api/users" >/dev/null
printf '| proxy | req/s | p50 ms | p99 ms | proxy CPU s | req per CPU-second |\n|---|---:|---:|---:|---:|---:|\n'
for name in moonhttp nginx; do
    if [ $name = moonhttp ]; then port=$MHPORT; procs="$MH"; else port=$NGPORT; procs="$NG $(children $NG)"; fi
    wrk -t1 -c"$CONNS" -d2s "http://127.0.0.1:$port/api/users" >/dev/null # warm the upstream pools
    c0=$(cpu $procs)
    out=$(wrk -t1 -c"$CONNS" -d"${DUR}s" --latency "http://127.0.0.1:$port/api/users")
    c1=$(cpu $procs)
    rps=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
    total=$(awk '/requests in/ {print $1}' <<<"$out")
    p50=$(awk '$1 == "50%" {print $2}' <<<"$out")
    p99=$(awk '$1 == "99%" {print $2}' <<<"$out")
    used=$(echo "$c1 - $c0" | bc)
    printf '| %s | %s | %s | %s | %s | %.0f |\n' $name "$rps" "$p50" "$p99" "$used" "$(echo "$total / $used" | bc -l)"
done
