#!/bin/bash
# System calls of the http.proxy worker per request (bench/PROXY.md, "System calls per
# proxied request"): examples/api.lua as the upstream, bench/proxy/proxy.lua as the
# proxy (one worker each), 50 requests to fill the pool, then strace -c on the worker
# over N keep-alive GETs on one curl connection. Usage: bench/proxy/strace.sh [N=2000]
set -e
OUT=$(mktemp)
BIN=${BIN:-build/moonhttp}; N=${1:-2000}; UP=18190; PX=18191
$BIN --listen 127.0.0.1:$UP --workers 1 examples/api.lua >/dev/null 2>&1 & upid=$!
PROXY_UPSTREAM=http://127.0.0.1:$UP $BIN --listen 127.0.0.1:$PX --workers 1 --log-level warn bench/proxy/proxy.lua >/dev/null 2>&1 & ppid=$!
sleep 1
curl -sf -o /dev/null "http://127.0.0.1:$PX/api/users?n=[1-50]"   # warm: the pool's connection
w=$(cat /proc/$ppid/task/*/children 2>/dev/null | tr ' ' '\n' | grep . | head -1); w=${w:-$ppid}
strace -c -f -p $w -o "$OUT" & spid=$!
sleep 0.5
curl -sf -o /dev/null "http://127.0.0.1:$PX/api/users?n=[1-$N]"
kill -INT $spid; wait $spid 2>/dev/null || true
kill $ppid $upid; wait 2>/dev/null || true
cat "$OUT"; rm -f "$OUT"
