#!/usr/bin/env bash
# Heap allocations per request, by difference: the server runs twice under the
# bench/alloc LD_PRELOAD shim, once answering N1 keep-alive requests and once
# N2, each run from start to a clean exit. Startup, the first connection and
# shutdown cost the same in both runs, so
#
#   allocations/request = (total(N2) - total(N1)) / (N2 - N1)
#
# counts only what the steady state allocates per request. Totals are summed
# over all processes of the server (nginx's master and worker). "allocations"
# are malloc + calloc + realloc + the aligned family; frees are shown apart.
#
#   bench/alloc.sh [moonhttp|nginx-lua|floor] [N1 N2]     (default moonhttp 11000 31000)
#
# The requests come from bench/client/kaclient.c: one connection, the 12
# routes in a fixed order, so runs are repeatable. Go is not supported: its
# runtime does not allocate through malloc.
set -eu
cd "$(dirname "$0")/.."
source bench/lib.sh

SERVER=${1:-moonhttp}
N1=${2:-11000}
N2=${3:-31000}
case "$SERVER" in
go | h2o)
    echo "alloc.sh: $SERVER is not supported (Go does not use malloc; h2o serves a file, not the routes)" >&2
    exit 2
    ;;
esac

WORK=$(mktemp -d "${TMPDIR:-/tmp}/moonhttp-alloc.XXXXXX")
trap 'stop_server; rm -rf "$WORK"' EXIT
trap 'exit 130' INT TERM

build_floor
build_client
if ! available "$SERVER"; then
    echo "alloc.sh: skipping $SERVER: $SKIP_REASON" >&2
    exit 0
fi
cc -O2 -shared -fPIC -o "$WORK/alloc_count.so" bench/alloc/alloc_count.c

# run N: prints "allocs frees" summed over every process that reported.
run() {
    local n=$1 out=$WORK/counts-$1.txt
    : >"$out"
    start_server "$SERVER" "$WORK/$SERVER-$n.log" 10 \
        env LD_PRELOAD="$WORK/alloc_count.so" ALLOC_COUNT_OUT="$out" ||
        { cat "$WORK/$SERVER-$n.log" >&2; exit 1; }
    "$WORK/kaclient" "${PORT[$SERVER]}" "$n" >&2
    stop_server
    if [ ! -s "$out" ]; then
        echo "alloc.sh: $SERVER wrote no counts: it did not exit through exit() on SIGTERM" >&2
        exit 1
    fi
    awk '{ for (i = 2; i <= NF; i++) { split($i, kv, "="); c[kv[1]] += kv[2] } }
        END { print c["malloc"] + c["calloc"] + c["realloc"] + c["memalign"], c["free"],
                    c["malloc"], c["calloc"], c["realloc"], c["memalign"] }' "$out"
}

# Assignments, not `set -- $(run)`: set -e stops here only if run fails in one.
counts1=$(run "$N1")
counts2=$(run "$N2")
read -r a1 f1 m1 c1 r1 al1 <<<"$counts1"
read -r a2 f2 m2 c2 r2 al2 <<<"$counts2"

awk -v s="$SERVER" -v n1="$N1" -v n2="$N2" -v a1="$a1" -v a2="$a2" -v f1="$f1" -v f2="$f2" \
    -v m="$((m2 - m1))" -v c="$((c2 - c1))" -v r="$((r2 - r1))" -v al="$((al2 - al1))" 'BEGIN {
    d = n2 - n1
    printf "%s: %d requests -> %d allocations, %d requests -> %d allocations\n", s, n1, a1, n2, a2
    printf "%s: %.2f allocations/request (malloc %.2f, calloc %.2f, realloc %.2f, aligned %.2f), %.2f frees/request\n",
        s, (a2 - a1) / d, m / d, c / d, r / d, al / d, (f2 - f1) / d
}'
