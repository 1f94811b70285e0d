#!/bin/sh
# Memory per idle TLS 1.3 connection: moonhttp (one worker) and nginx (one
# process, bench/tls/nginx.conf.in), the same P-256 certificate. A Python
# client (ssl module) opens $N connections to each server, finishes every
# handshake and sends nothing more; the servers' RSS (VmRSS of every process
# holding the listening socket) is read before and after.
# Usage: bench/tls/idle_mem.sh MOONHTTP_BIN   (env: N, default 1000)
set -e
BIN=$(realpath "$1")
HERE=$(cd "$(dirname "$0")" && pwd)
N=${N:-1000}
DIR=$(mktemp -d /tmp/mh-bench-mem-XXXXXX)
mkdir -p "$DIR/body" "$DIR/proxy"
PIDS=""
trap 'kill $PIDS 2>/dev/null; wait 2>/dev/null; rm -rf "$DIR"' EXIT INT TERM
ulimit -n 8192
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
    -keyout "$DIR/cert.key" -out "$DIR/cert.pem" -subj /CN=localhost >/dev/null 2>&1
sed -e "s|@DIR@|$DIR|g" -e "s|@PORT@|18464|g" "$HERE/nginx.conf.in" >"$DIR/nginx.conf"
"$BIN" --listen 127.0.0.1:18461 --workers 1 --log-level error \
    --tls-cert "$DIR/cert.pem" --tls-key "$DIR/cert.key" "$HERE/app.lua" &
PIDS="$PIDS $!"
nginx -p "$DIR" -c "$DIR/nginx.conf" &
PIDS="$PIDS $!"
sleep 1

rss_kib() { # port → summed VmRSS of the processes holding it
    for p in $(ss -ltnpH "sport = :$1" | grep -o 'pid=[0-9]*' | cut -d= -f2 | sort -u); do
        awk '/^VmRSS/ { print $2 }' "/proc/$p/status"
    done | awk '{ s += $1 } END { print s }'
}

for row in moonhttp:18461 nginx:18464; do
    name=${row%%:*}; port=${row#*:}
    before=$(rss_kib "$port")
    python3 - "$port" "$N" "$DIR/ready.$name" <<'PY' &
import socket, ssl, sys, time
port, n, ready = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
ctx = ssl.create_default_context()
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE
ctx.minimum_version = ssl.TLSVersion.TLSv1_3
conns = []
for _ in range(n):
    s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port)), server_hostname="localhost")
    conns.append(s)
open(ready, "w").write("%d\n" % len(conns))
time.sleep(30)
PY
    PY_PID=$!
    while [ ! -s "$DIR/ready.$name" ]; do sleep 0.2; done
    sleep 1
    after=$(rss_kib "$port")
    kill "$PY_PID" 2>/dev/null || true
    wait "$PY_PID" 2>/dev/null || true
    awk -v n="$N" -v b="$before" -v a="$after" -v name="$name" \
        'BEGIN { printf "%s: %d idle TLS 1.3 connections: RSS %d -> %d KiB, %.1f KiB per connection\n", name, n, b, a, (a - b) / n }'
done
