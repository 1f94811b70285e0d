#!/bin/sh
# The client benchmark (bench/notes/2026-12-02-client.md): 100 sequential GETs that never read
# the body, against spec/servers/upstream.lua behind bench/client/delayproxy
# (10 ms each way = 20 ms RTT; TLS terminated behind the delay), over HTTP
# and HTTPS. Clients: moonhttp with draining on (defaults) and off
# (drain_bytes = 0), moonhttp reading every body fully, and Go's net/http
# (Debian golang-go 1.19). Median of RUNS runs; connections counted at the
# upstream. Usage: bench/client/run.sh [build-dir]
# (env: RUNS, N, DELAY_MS, and ENDPOINTS / SCHEMES / CLIENTS to run a subset)
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${1:-$ROOT/build}
RUNS=${RUNS:-3}
N=${N:-100}
DELAY_MS=${DELAY_MS:-10}
MOON=$BUILD/moonhttp
W=$(mktemp -d /tmp/mh-client-bench.XXXXXX)
PIDS=""
cleanup() { for p in $PIDS; do kill "$p" 2>/dev/null || true; done; rm -rf "$W"; }
trap cleanup EXIT INT TERM

cp "$BUILD/delayproxy" "$W/delayproxy" # CMake builds it against the same Mbed TLS as moonhttp
(cd "$ROOT/bench/client/goclient" && GOFLAGS=-mod=mod GOPATH=$W/gopath GOCACHE=$W/gocache \
    go build -o "$W/goclient" .)

cd "$W"
EC="-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes"
openssl req -x509 $EC -keyout ca.key -out ca.pem -days 2 -subj "/CN=bench CA" 2>/dev/null
openssl req $EC -keyout srv.key -out srv.csr -subj /CN=localhost 2>/dev/null
printf 'subjectAltName=DNS:localhost\n' >ext.cnf
openssl x509 -req -in srv.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out srv.pem -days 2 \
    -extfile ext.cnf 2>/dev/null

port_of() { i=0; while ! grep -q '^port ' "$1" 2>/dev/null; do i=$((i+1)); [ $i -gt 250 ] && exit 1; sleep 0.02; done; sed -n 's/^port //p' "$1"; }
lua5.4 "$ROOT/spec/servers/upstream.lua" 0 >up.log 2>&1 & PIDS="$PIDS $!"
UP=$(port_of up.log)
"$W/delayproxy" -u 127.0.0.1:$UP -d $DELAY_MS >px.log 2>&1 & PIDS="$PIDS $!"
"$W/delayproxy" -u 127.0.0.1:$UP -d $DELAY_MS --cert srv.pem --key srv.key >pxs.log 2>&1 & PIDS="$PIDS $!"
HTTP=http://127.0.0.1:$(port_of px.log)
HTTPS=https://localhost:$(port_of pxs.log)

get() { lua5.4 -e "
local s = require('socket').tcp(); s:settimeout(5); assert(s:connect('127.0.0.1', $UP))
s:send('GET $1 HTTP/1.1\r\nHost: x\r\n\r\n')
local all = s:receive('*a') or '' ; io.write((all:match('\r\n\r\n(.*)$') or ''))"; }

median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

run_client() { # client url -> "ms conns"
    get /_reset >/dev/null
    out=""
    case $1 in
    moon-drain) out=$(timeout 120 "$MOON" run "$ROOT/bench/client/fetch100.lua" "$2" drain "$3" $N) ;;
    moon-nodrain) out=$(timeout 120 "$MOON" run "$ROOT/bench/client/fetch100.lua" "$2" nodrain "$3" $N) ;;
    moon-nodrain-noresume) out=$(timeout 120 "$MOON" run "$ROOT/bench/client/fetch100.lua" "$2" nodrain-noresume "$3" $N) ;;
    moon-readall) out=$(timeout 120 "$MOON" run "$ROOT/bench/client/fetch100.lua" "$2" readall "$3" $N) ;;
    go) out=$(timeout 120 "$W/goclient" -url "$2" -n $N ${3:+-ca "$3"}) ;;
    go-readall) out=$(timeout 120 "$W/goclient" -url "$2" -n $N -readall ${3:+-ca "$3"}) ;;
    esac
    ms=$(echo "$out" | sed -n 's/^ms //p')
    echo "${ms:-fail} $(get /_count)"
}

echo "| endpoint | scheme | client | median ms (3 runs) | connections (each run) |"
echo "|---|---|---|---:|---|"
for ep in ${ENDPOINTS:-/small /chunked /big /close}; do
    for scheme in ${SCHEMES:-http https}; do
        if [ $scheme = http ]; then base=$HTTP; ca=""; else base=$HTTPS; ca=$W/ca.pem; fi
        clients="moon-drain moon-nodrain moon-readall go go-readall"
        [ $scheme = https ] && clients="$clients moon-nodrain-noresume"
        clients=${CLIENTS:-$clients}
        for client in $clients; do
            times=""; conns=""
            for r in $(seq $RUNS); do
                set -- $(run_client $client "$base$ep" "$ca")
                times="$times $1"; conns="$conns $2"
            done
            med=$(for t in $times; do echo $t; done | median)
            case "$times" in *fail*) med="$med (failures:$(echo $times | tr ' ' '/'))";; esac
            echo "| $ep | $scheme | $client | $med | $(echo $conns | tr ' ' '/') |"
        done
    done
done
