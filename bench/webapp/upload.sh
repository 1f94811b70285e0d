#!/bin/sh
# 1 GiB multipart upload streamed to disk: RSS of the worker before and after.
# usage: bench/webapp/upload.sh [build/moonhttp] [bytes]
set -e
BIN=${1:-build/moonhttp}
SIZE=${2:-1073741824}
OUT=$(mktemp /tmp/mh-bench-upload.XXXXXX)
LOG=$(mktemp)
UPLOAD_PATH=$OUT taskset -c 0 "$BIN" --listen 127.0.0.1:0 --workers 1 bench/webapp/upload_app.lua >"$LOG" 2>&1 &
MASTER=$!
trap 'kill $MASTER 2>/dev/null; rm -f "$OUT" "$LOG"' EXIT
for i in $(seq 100); do grep -q "port [0-9]*)" "$LOG" && break; sleep 0.05; done
PORT=$(sed -n 's/.*(port \([0-9]*\)).*/\1/p' "$LOG" | head -1)
sleep 0.2; WORKER=$(pgrep -P $MASTER | head -1); WORKER=${WORKER:-$MASTER}
echo "master $MASTER worker $WORKER"
rss() { awk '/VmRSS/ {print $2}' /proc/$WORKER/status; }
hwm() { awk '/VmHWM/ {print $2}' /proc/$WORKER/status; }
before=$(rss)
start=$(date +%s.%N)
taskset -c 1 lua5.4 bench/webapp/upload_client.lua "$PORT" "$SIZE" | tail -1
end=$(date +%s.%N)
echo "worker RSS before: ${before} KiB, after: $(rss) KiB, peak (VmHWM): $(hwm) KiB"
echo "peak growth: $(( $(hwm) - before )) KiB; file on disk: $(stat -c %s "$OUT") bytes"
echo "time: $(echo "$end - $start" | bc) s"
