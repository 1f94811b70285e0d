#!/bin/sh
# WebSocket echo round trips, direct and through a moonhttp relay
# (http.proxy on an Upgrade request), with the same client
# (bench/ws/client_latency.lua: one 32-byte message in flight).
#   sh bench/proxy/ws_latency.sh [n] [runs]
# Prints one line per run and path; figures in bench/PROXY-WS.md.
set -e
BIN=${MOONHTTP_BIN:-./build/moonhttp}
N=${1:-5000}
RUNS=${2:-3}
ECHO_PORT=${ECHO_PORT:-18931}
RELAY_PORT=${RELAY_PORT:-18932}
$BIN --listen 127.0.0.1:$ECHO_PORT --workers 1 bench/ws/echo.lua >/dev/null 2>&1 &
echo_pid=$!
UPSTREAM=http://127.0.0.1:$ECHO_PORT $BIN --listen 127.0.0.1:$RELAY_PORT --workers 1 \
  bench/proxy/ws_relay.lua >/dev/null 2>&1 &
relay_pid=$!
trap 'kill $echo_pid $relay_pid 2>/dev/null' EXIT
sleep 1
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
for i in $(seq "$RUNS"); do
  printf 'direct  '; $BIN run bench/ws/client_latency.lua ws://127.0.0.1:$ECHO_PORT/echo "$N"
  printf 'relayed '; $BIN run bench/ws/client_latency.lua ws://127.0.0.1:$RELAY_PORT/echo "$N"
done
