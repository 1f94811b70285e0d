#!/bin/sh
# Instructions per TLS handshake in the server, and where they go: moonhttp
# (one worker) runs under callgrind with an ECDSA P-256 certificate;
# bench/tls/handshakes.py makes $N full TLS 1.3 handshakes, then $N resumed
# ones, then $N full TLS 1.2 ones, each followed by one small request; the
# worker's counters are dumped (callgrind_control -d) before and after each
# batch, so a batch's dump holds exactly its handshakes (and their requests),
# with start-up and warm-up left out (the resumed batch's priming full
# handshake is taken off at the full batch's average). Instructions, not time: the figure is
# the same on a busy machine, so options are compared on it (bench/TLS.md).
#
#   bench/tls/callgrind.sh [build/moonhttp]        (env: N, default 20; TOP, default 12)
#   bench/tls/callgrind.sh nginx                   (nginx-light, bench/tls/nginx.conf.in, the same way)
#
# Prints per batch the instructions per handshake and the TOP functions by
# inclusive cost per handshake (in the resumed batch, the priming handshake's share included); the dumps stay in $OUT (default a new
# directory under /tmp) for callgrind_annotate or kcachegrind.
set -eu
SERVER=${1:-build/moonhttp}
HERE=$(cd "$(dirname "$0")" && pwd)
N=${N:-20}
TOP=${TOP:-12}
PORT=${PORT:-18471}
OUT=${OUT:-$(mktemp -d /tmp/mh-tls-callgrind-XXXXXX)}
mkdir -p "$OUT"
command -v valgrind >/dev/null || { echo "callgrind.sh: valgrind is missing (scripts/deps.sh --bench)" >&2; exit 1; }
PID=
trap '[ -z "$PID" ] || kill "$PID" 2>/dev/null; wait 2>/dev/null || true' EXIT INT TERM
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
    -keyout "$OUT/cert.key" -out "$OUT/cert.pem" -subj /CN=localhost >/dev/null 2>&1
if [ "$SERVER" = nginx ]; then
    mkdir -p "$OUT/body" "$OUT/proxy"
    sed -e "s|@DIR@|$OUT|g" -e "s|@PORT@|$PORT|g" "$HERE/nginx.conf.in" >"$OUT/nginx.conf"
    set -- nginx -p "$OUT" -c "$OUT/nginx.conf"
else
    set -- "$(realpath "$SERVER")" --listen 127.0.0.1:$PORT --workers 1 --log-level error \
        --tls-cert "$OUT/cert.pem" --tls-key "$OUT/cert.key" "$HERE/app.lua"
fi
valgrind --tool=callgrind --trace-children=yes --callgrind-out-file="$OUT/cg.%p" "$@" 2>"$OUT/valgrind.log" &
PID=$!
hs() { python3 "$HERE/handshakes.py" "$PORT" "$@"; }
for _ in $(seq 120); do hs 1 full 1.3 2>/dev/null && break; sleep 0.5; done
hs 3 full 1.3
hs 2 resumed 1.3
hs 2 full 1.2
# The worker: the process holding the port that is not valgrind's first (moonhttp's
# master); nginx runs as one process (master_process off).
worker=$(ss -ltnpH "sport = :$PORT" | grep -o 'pid=[0-9]*' | cut -d= -f2 | sort -u | grep -vx "$PID" | head -1)
[ -n "$worker" ] || worker=$PID
dump() { callgrind_control -d "$worker" >/dev/null; }
total() { awk '/^(summary|totals):/ { print $2; exit }' "$1"; }
dump
for batch in "full 1.3" "resumed 1.3" "full 1.2"; do
    # shellcheck disable=SC2086 # mode and version
    hs "$N" $batch
    dump
done
i=1
full=0
for batch in "full TLS 1.3" "resumed TLS 1.3" "full TLS 1.2"; do
    i=$((i + 1))
    f="$OUT/cg.$worker.$i"
    per=$(($(total "$f") / N))
    # The resumed batch began with its priming connection, a full TLS 1.3 one: take one off.
    [ "$batch" = "resumed TLS 1.3" ] && per=$((($(total "$f") - full) / N))
    [ "$batch" = "full TLS 1.3" ] && full=$per
    echo "$batch: $per instructions per handshake (+ one request), $f"
    callgrind_annotate --inclusive=yes --auto=no "$f" 2>/dev/null |
        grep -E '^ *[0-9,]+ +\( *[0-9.]+%\) ' | grep -v 'PROGRAM TOTALS' | head -n "$TOP" |
        awk -v n="$N" '{ c = $1; gsub(",", "", c); $1 = ""; $2 = ""; printf "  %12d %s\n", c / n, $0 }'
done
