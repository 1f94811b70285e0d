#!/bin/bash
# System calls of the proxy worker per request (bench/PROXY.md, "System calls per
# proxied request"): examples/api.lua as the upstream, bench/proxy/proxy.lua (or nginx
# proxy_pass with bench/proxy/nginx.conf.in) as the proxy, one worker each, 50 requests
# to fill the pool, then strace -c on the proxy's worker over N keep-alive GETs on one
# curl connection. Usage: bench/proxy/strace.sh [N=2000] [moonhttp|nginx]
set -e
OUT=$(mktemp)
WORK=$(mktemp -d)
BIN=${BIN:-build/moonhttp}; N=${1:-2000}; PROXY=${2:-moonhttp}; UP=18190; PX=18191
$BIN --listen 127.0.0.1:$UP --workers 1 examples/api.lua >/dev/null 2>&1 & upid=$!
if [ "$PROXY" = nginx ]; then
    sed -e "s|@PORT@|$PX|; s|@SERVERS@|server 127.0.0.1:$UP;|; s|@PREFIX@|$WORK|g; s|@USER@|$(id -un)|" \
        bench/proxy/nginx.conf.in >"$WORK/nginx.conf"
    nginx -p "$WORK" -c "$WORK/nginx.conf" -e "$WORK/error.log" & ppid=$!
else
    PROXY_UPSTREAM=http://127.0.0.1:$UP $BIN --listen 127.0.0.1:$PX --workers 1 --log-level warn bench/proxy/proxy.lua >/dev/null 2>&1 & ppid=$!
fi
sleep 1
curl -sf -o /dev/null "http://127.0.0.1:$PX/api/users?n=[1-50]"   # warm: the pool's connection
w=$(cat /proc/$ppid/task/*/children 2>/dev/null | tr ' ' '\n' | grep . | head -1); w=${w:-$ppid}
strace -c -f -p $w -o "$OUT" & spid=$!
sleep 0.5
curl -sf -o /dev/null "http://127.0.0.1:$PX/api/users?n=[1-$N]"
kill -INT $spid; wait $spid 2>/dev/null || true
kill $ppid $upid; wait 2>/dev/null || true
cat "$OUT"; rm -rf "$OUT" "$WORK"
