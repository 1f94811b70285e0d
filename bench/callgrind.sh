#!/usr/bin/env bash
# Instructions per request, by difference, and where they go: the server runs
# twice under callgrind, answering N1 and then N2 keep-alive requests (the 12
# routes in a fixed order, from bench/client/kaclient.c), each run from start
# to exit. Startup and shutdown cost the same in both, so
#
#   instructions/request = (Ir(N2) - Ir(N1)) / (N2 - N1)
#
# is the steady-state cost, and it is exactly repeatable (instructions, not
# time: no noise from the host). The top functions are those of the N2 run,
# inclusive of nothing (self cost), from callgrind_annotate.
#
#   bench/callgrind.sh [N1 N2]                (default 2000 12000, moonhttp)
#   bench/callgrind.sh --server floor|nginx-lua [N1 N2]   (to check the script)
#   DEPTH=16 bench/callgrind.sh               (pipelined: 16 requests per write)
#
# Then the functions whose own instructions grow most per request, the
# difference of the two runs divided by N2 - N1 (startup cancels out).
#
# Output files stay in bench/results/callgrind-<stamp>/ for kcachegrind.
set -eu
cd "$(dirname "$0")/.."
source bench/lib.sh
source bench/callgrind_lib.sh

SERVER=moonhttp
if [ "${1:-}" = "--server" ]; then
    SERVER=$2
    shift 2
fi
N1=${1:-2000}
N2=${2:-12000}
TOP=15
DEPTH=${DEPTH:-1}

command -v valgrind >/dev/null || { echo "callgrind.sh: valgrind is missing (scripts/deps.sh --bench)" >&2; exit 1; }
WORK=$(mktemp -d "${TMPDIR:-/tmp}/moonhttp-callgrind.XXXXXX")
trap 'stop_server; rm -rf "$WORK"' EXIT
trap 'exit 130' INT TERM

build_floor
build_client
if ! available "$SERVER"; then
    echo "callgrind.sh: skipping $SERVER: $SKIP_REASON" >&2
    exit 0
fi
OUT=bench/results/callgrind-$(date +%Y%m%d-%H%M%S)
mkdir -p "$OUT"

# run N: prints the run's total instructions over all processes (nginx's
# master and worker each write a file; %p keeps them apart). Valgrind is
# slow to start and to write its output, hence the long waits.
run() {
    local n=$1
    STOP_WAIT=60 start_server "$SERVER" "$OUT/$SERVER-$n.log" 60 \
        valgrind --tool=callgrind --trace-children=yes \
        --callgrind-out-file="$OUT/callgrind.out.$n.%p" ||
        { cat "$OUT/$SERVER-$n.log" >&2; exit 1; }
    "$WORK/kaclient" "${PORT[$SERVER]}" "$n" "$DEPTH" >&2
    STOP_WAIT=60 stop_server
    cg_total "$OUT/callgrind.out.$n"
}

log "callgrind: $SERVER, $N1 then $N2 requests (pipelining depth $DEPTH)"
I1=$(run "$N1")
I2=$(run "$N2")
awk -v s="$SERVER" -v n1="$N1" -v n2="$N2" -v i1="$I1" -v i2="$I2" 'BEGIN {
    printf "%s: %d requests -> %d instructions, %d requests -> %d instructions\n", s, n1, i1, n2, i2
    printf "%s: %.0f instructions/request\n", s, (i2 - i1) / (n2 - n1)
}' | tee "$OUT/summary.txt"

# The process that served the requests is the one with the most instructions
# (for nginx, the worker rather than the master).
main=$(cg_busiest "$OUT/callgrind.out.$N2")
echo "top $TOP functions by own instructions, $N2-request run ($main):" | tee -a "$OUT/summary.txt"
callgrind_annotate --threshold=100 "$main" 2>/dev/null |
    grep -E '^ *[0-9,]+ +\( *[0-9.]+%\) ' | grep -v 'PROGRAM TOTALS' | head -n "$TOP" |
    tee -a "$OUT/summary.txt"

echo "top $TOP functions by own instructions per request ($N2 - $N1 run):" | tee -a "$OUT/summary.txt"
cg_own_per_request "$OUT/callgrind.out.$N1" "$OUT/callgrind.out.$N2" $((N2 - N1)) "$TOP" |
    tee -a "$OUT/summary.txt"
log "callgrind output in $OUT"
