#!/bin/sh
# HTTPS benchmark: moonhttp vs nginx-light, one worker each on CPU 0, the
# load generator on CPU 1, the same ECDSA P-256 certificate, TLS 1.3 (both
# servers also offer 1.2: bench/tls/handshake.sh measures each version).
#   keep-alive  wrk -t1 -c$CONNS over long-lived connections
#   resumed     wrk -H "Connection: close": wrk keeps the TLS session across
#               reconnects (SSL_clear), so these are ticket resumptions
#   full        $PAR concurrent `openssl s_time -new` (no resumption): full
#               ECDHE-ECDSA handshakes per second
# Runs alternate between the servers; the table shows medians of $RUNS.
# Usage: bench/tls/run.sh [build/moonhttp]   (env: DURATION RUNS CONNS PAR)
set -e
BIN=$(realpath "${1:-build/moonhttp}")
HERE=$(cd "$(dirname "$0")" && pwd)
DURATION=${DURATION:-10}
RUNS=${RUNS:-3}
CONNS=${CONNS:-50}
PAR=${PAR:-4}
MH_PORT=18443
NG_PORT=18444
DIR=$(mktemp -d /tmp/mh-bench-tls-XXXXXX)
mkdir -p "$DIR/body" "$DIR/proxy"
trap 'kill $MH_PID $NG_PID 2>/dev/null; wait 2>/dev/null; rm -rf "$DIR"' EXIT INT TERM

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
    -keyout "$DIR/cert.key" -out "$DIR/cert.pem" -subj /CN=localhost >/dev/null 2>&1
sed -e "s|@DIR@|$DIR|g" -e "s|@PORT@|$NG_PORT|g" "$HERE/nginx.conf.in" >"$DIR/nginx.conf"

taskset -c 0 "$BIN" --listen 127.0.0.1:$MH_PORT --workers 1 --log-level error \
    --tls-cert "$DIR/cert.pem" --tls-key "$DIR/cert.key" "$HERE/app.lua" &
MH_PID=$!
taskset -c 0 nginx -p "$DIR" -c "$DIR/nginx.conf" &
NG_PID=$!
sleep 1

wrk_rps() { # port [extra wrk args]
    port=$1; shift
    taskset -c 1 wrk -t1 -c"$CONNS" -d"${DURATION}s" "$@" "https://127.0.0.1:$port/" |
        awk '/Requests\/sec/ { print int($2) }'
}

full_hs() { # port
    for i in $(seq "$PAR"); do
        taskset -c 1 openssl s_time -connect "127.0.0.1:$1" -new -time "$DURATION" 2>/dev/null |
            awk '/connections in .* real seconds/ { print $1 }' >"$DIR/st.$i" &
    done
    wait_st=0
    while [ "$(cat "$DIR"/st.* 2>/dev/null | wc -l)" -lt "$PAR" ] && [ $wait_st -lt $((DURATION * 4)) ]; do
        sleep 0.5; wait_st=$((wait_st + 1))
    done
    cat "$DIR"/st.* | awk -v d="$DURATION" '{ s += $1 } END { print int(s / d) }'
    rm -f "$DIR"/st.*
}

median() { sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }

for mode in keepalive resumed full; do
    : >"$DIR/mh.$mode"; : >"$DIR/ng.$mode"
    for r in $(seq "$RUNS"); do
        for s in mh ng; do
            port=$MH_PORT; [ $s = ng ] && port=$NG_PORT
            case $mode in
            keepalive) v=$(wrk_rps $port) ;;
            resumed) v=$(wrk_rps $port -H "Connection: close") ;;
            full) v=$(full_hs $port) ;;
            esac
            echo "$mode run $r $s: $v" >&2
            echo "$v" >>"$DIR/$s.$mode"
        done
    done
done

echo "| test | moonhttp | nginx | ratio |"
echo "|---|---:|---:|---:|"
for mode in keepalive resumed full; do
    m=$(median <"$DIR/mh.$mode"); n=$(median <"$DIR/ng.$mode")
    echo "| $mode | $m | $n | $(awk -v m="$m" -v n="$n" 'BEGIN { printf "%.2f", m / n }') |"
done
