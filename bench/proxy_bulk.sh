#!/usr/bin/env bash
# A 1 GiB download and a 1 GiB upload through a reverse proxy: moonhttp's
# http.proxy (bench/proxy/bulk_proxy.lua) against nginx proxy_pass with
# streaming both ways (proxy_request_buffering off, proxy_buffering off,
# as http.proxy streams), one worker each, in front of the same upstream
# (bench/proxy/bulk_upstream.lua). curl on loopback; the upload is a sparse
# file sent with Content-Length. Prints throughput (MiB/s, curl's figure),
# the proxy's CPU seconds and its peak RSS growth (VmHWM after minus VmRSS
# before, the worker process).
#   bench/proxy_bulk.sh [mib=1024] [rounds=3]
# NGINX_BUFFERING=1: nginx with its default response buffering (buffers,
# then temporary files, when the client reads slower than the upstream sends).
set -euo pipefail
BIN=${MOONHTTP_BIN:-build/moonhttp}
MIB=${1:-1024}
ROUNDS=${2:-3}
WORK=$(mktemp -d)
UPPORT=18190 MHPORT=18191 NGPORT=18192
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$WORK"; }
trap cleanup EXIT
wait_port() { for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.05; done; return 1; }
cpu() { read -r -a f <"/proc/$1/stat"; echo "scale=2; $((f[13] + f[14])) / $(getconf CLK_TCK)" | bc; }
kib() { awk -v k="$2:" '$1 == k {print $2}' "/proc/$1/status"; }

"$BIN" --listen 127.0.0.1:$UPPORT --workers 1 --log-level warn bench/proxy/bulk_upstream.lua >"$WORK/up.log" 2>&1 &
PIDS+=($!)
wait_port $UPPORT
PROXY_UPSTREAM="http://127.0.0.1:$UPPORT" "$BIN" --listen 127.0.0.1:$MHPORT --workers 1 --log-level warn \
    bench/proxy/bulk_proxy.lua >"$WORK/mh.log" 2>&1 &
MH=$!
PIDS+=($MH)
wait_port $MHPORT
mkdir -p "$WORK/nginx"
NGX_BUF="proxy_buffering off;"
[ "${NGINX_BUFFERING:-0}" = 1 ] && NGX_BUF=
sed -e "s|@PORT@|$NGPORT|; s|@SERVERS@|server 127.0.0.1:$UPPORT;|; s|@PREFIX@|$WORK/nginx|g; s|@USER@|$(id -un)|" \
    -e "s|location / {|location / { client_max_body_size 0; proxy_request_buffering off; $NGX_BUF|" \
    bench/proxy/nginx.conf.in >"$WORK/nginx/nginx.conf"
nginx -p "$WORK/nginx" -c "$WORK/nginx/nginx.conf" -e "$WORK/nginx/error.log" &
NG=$!
PIDS+=($NG)
wait_port $NGPORT
NGW=$(cat /proc/$NG/task/*/children | awk '{print $1}')
truncate -s "${MIB}M" "$WORK/upload.bin"

printf '| round | proxy | transfer | MiB/s | proxy CPU s | RSS growth KiB |\n|---|---|---|---:|---:|---:|\n'
for round in $(seq "$ROUNDS"); do
    for name in moonhttp nginx; do
        if [ $name = moonhttp ]; then port=$MHPORT; pid=$MH; else port=$NGPORT; pid=$NGW; fi
        for kind in download upload; do
            rss0=$(kib $pid VmRSS); c0=$(cpu $pid)
            if [ $kind = download ]; then
                bps=$(curl -sf -o /dev/null -w '%{speed_download}' "http://127.0.0.1:$port/big?mb=$MIB")
            else
                read -r got bps < <(curl -sf -T "$WORK/upload.bin" -w '%{speed_upload}\n' "http://127.0.0.1:$port/sink" | tr '\n' ' '; echo)
                [ "$got" = $((MIB * 1048576)) ] || { echo "upload through $name: the upstream got $got bytes" >&2; exit 1; }
            fi
            c1=$(cpu $pid); hwm=$(kib $pid VmHWM)
            printf '| %s | %s | %s | %.0f | %s | %s |\n' "$round" $name $kind "$(echo "$bps / 1048576" | bc -l)" \
                "$(echo "$c1 - $c0" | bc)" $((hwm - rss0))
        done
    done
done
