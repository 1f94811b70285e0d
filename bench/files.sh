#!/usr/bin/env bash
# Static files and gzip: moonhttp (http.files, compress) against nginx-light
# (sendfile, open_file_cache, gzip) in one interleaved run. bench/notes/2026-12-03-files.md has
# the method and results.
#
#   bench/files.sh [--rounds R] [--duration S]
#
# Loads (wrk pinned to CPU 1, each server one worker pinned to CPU 0):
#   f1k    -t1 -c100   GET /static/1k.txt            CPU per request
#   f100m  -t1 -c4     GET /static/100m.bin          throughput (req/s × 100 MiB)
#   r304   -t1 -c100   GET /static/1k.txt with the server's own ETag in
#                      If-None-Match                  CPU per 304
#   gz20k  -t1 -c100   GET /json (20 KiB JSON from Lua) with Accept-Encoding: gzip,
#                      level 1 on both                CPU per request
# Output: bench/results/files-<stamp>/ (raw.tsv, summary.md, wrk reports).
set -eu
cd "$(dirname "$0")/.."
ROOT=$(pwd)

ROUNDS=3
DURATION=5
usage() {
    echo "usage: bench/files.sh [--rounds R] [--duration S]" >&2
    exit 2
}
while [ $# -gt 0 ]; do
    case "$1" in
    --rounds) ROUNDS=$2; shift 2 ;;
    --duration) DURATION=$2; shift 2 ;;
    *) usage ;;
    esac
done
case "$ROUNDS$DURATION" in '' | *[!0-9]*) usage ;; esac
[ "$ROUNDS" -ge 1 ] && [ "$ROUNDS" -le 10 ] && [ "$DURATION" -ge 1 ] && [ "$DURATION" -le 60 ] || usage

source bench/lib.sh
SERVER_CPU=0
CLIENT_CPU=1
for tool in wrk taskset curl nginx; do
    command -v "$tool" >/dev/null || { echo "files.sh: $tool is missing (scripts/deps.sh --bench)" >&2; exit 1; }
done
ulimit -n "$(ulimit -Hn)"

STAMP=$(date +%Y%m%d-%H%M%S)
OUT=$ROOT/bench/results/files-$STAMP
mkdir -p "$OUT"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/moonhttp-files.XXXXXX")
trap 'stop_server; rm -rf "$WORK"' EXIT
trap 'exit 130' INT TERM

# The site both servers serve: the same files, the same JSON.
SITE=$WORK/site
mkdir -p "$SITE/public"
head -c 1024 /dev/urandom | base64 -w 64 | head -c 1024 >"$SITE/public/1k.txt"
head -c $((100 << 20)) /dev/urandom >"$SITE/public/100m.bin"
awk 'BEGIN { printf "["; for (i = 1; i <= 260; i++) printf "%s{\"id\":%d,\"name\":\"user %d\",\"email\":\"user%d@example.com\",\"active\":true}", (i > 1 ? "," : ""), i, i, i; printf "]" }' >"$SITE/json20k.json"
cp bench/files/app.lua "$SITE/app.lua"
sed -e "s|@SITE@|$SITE|g" bench/files/nginx.conf.in >"$WORK/nginx-files.conf.in"
cat "$SITE/public/100m.bin" >/dev/null # into the page cache before anyone is measured
export MOONHTTP_SCRIPT=$SITE/app.lua NGINX_CONF_IN=$WORK/nginx-files.conf.in

RAW=$OUT/raw.tsv
printf 'round\tserver\tload\trps\trequests\tp50_ms\tp99_ms\tsocket_errors\tnon2xx\tproc_us_per_req\tcpu0_us_per_req\tsteal_pct\twrk_cpu_pct\n' >"$RAW"
LOADS="f1k f100m r304 gz20k"

check_site() {
    local port=${PORT[$1]}
    cmp -s <(curl -s --max-time 5 "http://127.0.0.1:$port/static/1k.txt") "$SITE/public/1k.txt" || {
        echo "files.sh: $1 did not serve 1k.txt" >&2
        return 1
    }
    cmp -s <(curl -s --max-time 5 -H 'Accept-Encoding: gzip' "http://127.0.0.1:$port/json" | gzip -dc) "$SITE/json20k.json" || {
        echo "files.sh: $1 did not serve /json gzipped" >&2
        return 1
    }
}

log "files $STAMP: rounds=$ROUNDS duration=${DURATION}s, results in $OUT"
for round in $(seq "$ROUNDS"); do
    if [ $((round % 2)) = 1 ]; then order="moonhttp nginx-lua"; else order="nginx-lua moonhttp"; fi
    for s in $order; do
        port=${PORT[$s]}
        log "round $round/$ROUNDS: $s"
        start_server "$s" "$OUT/$s.log" 10 taskset -c $SERVER_CPU || exit 1
        check_site "$s" || exit 1
        etag=$(curl -sI "http://127.0.0.1:$port/static/1k.txt" | awk -F': ' 'tolower($1) == "etag" { sub("\r", "", $2); print $2 }')
        [ "$(curl -s -o /dev/null -w '%{http_code}' -H "If-None-Match: $etag" "http://127.0.0.1:$port/static/1k.txt")" = 304 ] ||
            { echo "files.sh: $s did not answer 304 to its own ETag $etag" >&2; exit 1; }
        taskset -c $CLIENT_CPU wrk -t1 -c100 -d1s "http://127.0.0.1:$port/static/1k.txt" >/dev/null 2>&1 || true
        for load in $LOADS; do
            sleep 1
            case $load in
            f1k) args=(-t1 -c100 "http://127.0.0.1:$port/static/1k.txt") ;;
            f100m) args=(-t1 -c4 "http://127.0.0.1:$port/static/100m.bin") ;;
            r304) args=(-t1 -c100 -H "If-None-Match: $etag" "http://127.0.0.1:$port/static/1k.txt") ;;
            gz20k) args=(-t1 -c100 -H "Accept-Encoding: gzip" "http://127.0.0.1:$port/json") ;;
            esac
            row=$(wrk_measure "$OUT/wrk-r$round-$s-$load.txt" -d"${DURATION}s" --latency "${args[@]}")
            printf '%s\t%s\t%s\t%s\n' "$round" "$s" "$load" "$row" >>"$RAW"
            echo "$row" | awk -F'\t' -v l="$load" '{ printf "  %-6s %9.1f req/s  p50 %.3f ms  p99 %.3f ms  proc %.2f us/req  cpu0 %.2f us/req  steal %s%%  wrk cpu %s%%  errors %d/%d\n",
                l, $1, $3, $4, $7, $8, $9, $10, $5, $6 }' >&2
        done
        stop_server
    done
done

# median of field F over rows of server S and load L
med() {
    awk -F'\t' -v f="$1" -v s="$2" -v l="$3" 'NR > 1 && $2 == s && $3 == l { v[n++] = $f }
        END {
            if (!n) { print 0; exit }
            for (i = 0; i < n; i++) for (j = i + 1; j < n; j++) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
            print (n % 2 ? v[int(n / 2)] : (v[n / 2 - 1] + v[n / 2]) / 2)
        }' "$RAW"
}
{
    echo "files.sh run $STAMP: $ROUNDS round(s) × ${DURATION} s per load; one worker each on CPU 0, wrk on CPU 1; medians."
    echo
    echo "| load | server | req/s | MiB/s | p99 ms | CPU µs/req (process) | CPU µs/req (cpu0) | steal % |"
    echo "|---|---|---|---|---|---|---|---|"
    for load in $LOADS; do
        for s in moonhttp nginx-lua; do
            rps=$(med 4 $s $load)
            mib=$(awk -v r="$rps" -v l="$load" 'BEGIN { if (l == "f100m") printf "%.0f", r * 100; else printf "—" }')
            printf '| %s | %s | %s | %s | %s | %s | %s | %s |\n' "$load" "$s" "$rps" "$mib" \
                "$(med 7 $s $load)" "$(med 10 $s $load)" "$(med 11 $s $load)" "$(med 12 $s $load)"
        done
    done
    echo
    echo "moonhttp ÷ nginx (medians): "
    for load in $LOADS; do
        awk -v l="$load" -v a="$(med 4 moonhttp $load)" -v b="$(med 4 nginx-lua $load)" \
            -v pa="$(med 10 moonhttp $load)" -v pb="$(med 10 nginx-lua $load)" \
            'BEGIN { printf "- %s: req/s %.3f, process CPU/req %.3f\n", l, (b ? a / b : 0), (pb ? pa / pb : 0) }'
    done
} >"$OUT/summary.md"
cat "$OUT/summary.md"
log "results in $OUT"
