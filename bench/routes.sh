#!/usr/bin/env bash
# Does a big route table cost the requests? moonhttp serving examples/api.lua
# (12 routes) against bench/routes/api_1000.lua (the same 12 + 1,000 more),
# measured with wrk and with callgrind. bench/notes/2026-12-02-routes.md has method and results.
#
#   bench/routes.sh [--rounds R] [--duration S] [--no-callgrind]
#
# wrk: `wrk -t1 -c100 -d S --latency` on /api/users and on /api/items/3, server
# (one worker) on CPU 0, wrk on CPU 1; each round runs both scripts (the order
# alternates between rounds), a fresh server per script and round, 1 s of
# unmeasured warm-up. Medians and (min–max) over rounds.
# callgrind: bench/callgrind.sh with MOONHTTP_SCRIPT set to each script:
# instructions/request over kaclient's fixed cycle of the 12 routes.
#
# Output: bench/results/routes-<stamp>/ (raw.tsv, summary.md, wrk reports).
set -eu
cd "$(dirname "$0")/.."
ROOT=$(pwd)

ROUNDS=3
DURATION=10
CALLGRIND=1
usage() {
    echo "usage: bench/routes.sh [--rounds R] [--duration S] [--no-callgrind]" >&2
    exit 2
}
while [ $# -gt 0 ]; do
    case "$1" in
    --rounds) ROUNDS=$2; shift 2 ;;
    --duration) DURATION=$2; shift 2 ;;
    --no-callgrind) CALLGRIND=0; shift ;;
    *) usage ;;
    esac
done
case "$ROUNDS$DURATION" in '' | *[!0-9]*) usage ;; esac
[ "$ROUNDS" -ge 1 ] && [ "$ROUNDS" -le 10 ] && [ "$DURATION" -ge 1 ] && [ "$DURATION" -le 60 ] || usage

source bench/lib.sh
SERVER_CPU=0
CLIENT_CPU=1
for tool in wrk taskset curl; do
    command -v "$tool" >/dev/null || { echo "routes.sh: $tool is missing" >&2; exit 1; }
done
ulimit -n "$(ulimit -Hn)"
declare -A SCRIPT=([r12]=examples/api.lua [r1012]=bench/routes/api_1000.lua)
URLS="/api/users /api/items/3"
PORTN=${PORT[moonhttp]}

STAMP=$(date +%Y%m%d-%H%M%S)
OUT=$ROOT/bench/results/routes-$STAMP
mkdir -p "$OUT"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/moonhttp-routes.XXXXXX")
trap 'stop_server; rm -rf "$WORK"' EXIT
trap 'exit 130' INT TERM

for k in r12 r1012; do
    "$MOONHTTP_BIN" --check "${SCRIPT[$k]}" >&2 || { echo "routes.sh: ${SCRIPT[$k]} does not load" >&2; exit 1; }
done

RAW=$OUT/raw.tsv
printf 'round\tscript\turl\trps\trequests\tp50_ms\tp99_ms\tsocket_errors\tnon2xx\tproc_us_per_req\tcpu0_us_per_req\tsteal_pct\twrk_cpu_pct\n' >"$RAW"
log "routes $STAMP: rounds=$ROUNDS duration=${DURATION}s, results in $OUT"
for round in $(seq "$ROUNDS"); do
    if [ $((round % 2)) = 1 ]; then order="r12 r1012"; else order="r1012 r12"; fi
    for k in $order; do
        log "round $round/$ROUNDS: ${SCRIPT[$k]}"
        MOONHTTP_SCRIPT=${SCRIPT[$k]} start_server moonhttp "$OUT/$k.log" 10 taskset -c $SERVER_CPU || exit 1
        check_response moonhttp || exit 1
        taskset -c $CLIENT_CPU wrk -t1 -c100 -d1s "http://127.0.0.1:$PORTN/api/users" >/dev/null 2>&1 || true
        for url in $URLS; do
            sleep 1
            row=$(wrk_measure "$OUT/wrk-r$round-$k-${url//\//_}.txt" -t1 -c100 -d"${DURATION}s" --latency "http://127.0.0.1:$PORTN$url")
            printf '%s\t%s\t%s\t%s\n' "$round" "$k" "$url" "$row" >>"$RAW"
            echo "$row" | awk -F'\t' -v u="$url" '{ printf "  %-13s %8.0f req/s  p50 %.3f ms  p99 %.3f ms  proc %.2f us/req  cpu0 %.2f us/req  steal %s%%  wrk cpu %s%%  errors %d/%d\n",
                u, $1, $3, $4, $7, $8, $9, $10, $5, $6 }' >&2
        done
        stop_server
    done
done

declare -A IPR=()
if [ "$CALLGRIND" = 1 ] && command -v valgrind >/dev/null; then
    for k in r12 r1012; do
        log "callgrind: ${SCRIPT[$k]}"
        MOONHTTP_SCRIPT=${SCRIPT[$k]} bench/callgrind.sh >"$OUT/callgrind-$k.txt" 2>"$OUT/callgrind-$k.err" || true
        IPR[$k]=$(awk '/ instructions\/request$/ { print $2; exit }' "$OUT/callgrind-$k.txt")
        log "  ${IPR[$k]:-?} instructions/request"
    done
fi

# median (min–max) of field F over rows of script K and url U
stat() {
    awk -F'\t' -v f="$1" -v k="$2" -v u="$3" 'NR > 1 && $2 == k && $3 == u { v[n++] = $f }
        END {
            if (!n) { print "—"; exit }
            for (i = 0; i < n; i++) for (j = i + 1; j < n; j++) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
            med = n % 2 ? v[int(n / 2)] : (v[n / 2 - 1] + v[n / 2]) / 2
            if (n > 1) printf "%.4g (%.4g–%.4g)\n", med, v[0], v[n - 1]; else printf "%.4g\n", med
        }' "$RAW"
}
med() { stat "$@" | cut -d' ' -f1; }
{
    echo "routes.sh run $STAMP: $ROUNDS round(s) × ${DURATION} s per load, wrk -t1 -c100; server on CPU 0, wrk on CPU 1."
    echo
    echo "| url | routes | req/s | p50 ms | p99 ms | CPU µs/req (process) | CPU µs/req (cpu0) | steal % | wrk CPU % | errors |"
    echo "|---|---|---|---|---|---|---|---|---|---|"
    for url in $URLS; do
        for k in r12 r1012; do
            errs=$(awk -F'\t' -v k="$k" -v u="$url" 'NR > 1 && $2 == k && $3 == u { e += $8 + $9 } END { print e + 0 }' "$RAW")
            printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$url" "${k#r}" \
                "$(stat 4 $k "$url")" "$(stat 6 $k "$url")" "$(stat 7 $k "$url")" "$(stat 10 $k "$url")" \
                "$(stat 11 $k "$url")" "$(stat 12 $k "$url")" "$(stat 13 $k "$url")" "$errs"
        done
    done
    echo
    echo "1,012 routes ÷ 12 routes (medians):"
    for url in $URLS; do
        awk -v u="$url" -v a="$(med 4 r12 "$url")" -v b="$(med 4 r1012 "$url")" \
            -v pa="$(med 10 r12 "$url")" -v pb="$(med 10 r1012 "$url")" \
            -v qa="$(med 7 r12 "$url")" -v qb="$(med 7 r1012 "$url")" \
            'BEGIN { printf "- %s: req/s %.3f, process CPU/req %.3f, p99 %.2f\n", u, b / a, pb / pa, qb / qa }'
    done
    if [ -n "${IPR[r12]:-}" ] && [ -n "${IPR[r1012]:-}" ]; then
        echo
        echo "callgrind (bench/callgrind.sh, kaclient cycling the 12 routes, 2000 → 12000 requests):"
        echo "- 12 routes: ${IPR[r12]} instructions/request"
        echo "- 1,012 routes: ${IPR[r1012]} instructions/request ($(awk -v a="${IPR[r12]}" -v b="${IPR[r1012]}" 'BEGIN { printf "%.3f", b / a }')×)"
    fi
} >"$OUT/summary.md"
cat "$OUT/summary.md"
log "results in $OUT"
