#!/usr/bin/env bash
# The TechEmpower test types and the seed's Redis routes (bench/notes/2026-12-05-tfb.md):
# moonhttp, Go net/http, Fastify and nginx + Lua side by side in one run.
#   bench/tfb/run.sh [--rounds N] [--duration S] [--verify-only] [--servers a,b] [--tests a,b]
#                    [--conns 16,64,256] [--plaintext-conns 256,1024]
#   bench/tfb/run.sh --callgrind PATH [N1 N2]   moonhttp's instructions per request
#                    on PATH (by difference of N1 and N2 requests) and its top functions
#   bench/tfb/run.sh --strace [--servers ..] [--tests ..] [--conns ..]   one round, each
#                    server's system calls per request (strace -c -f on it over the wrk run)
# A throw-away PostgreSQL 15 cluster (bench/tfb/setup.sql) and a redis-server
# on free loopback ports, both on core 1; every server started once, pinned
# to core 0 (one process, one thread where it has the choice), and checked
# by bench/tfb/verify.py: a server that fails any of its tests is not
# measured at all. Then rounds of wrk (core 1, --latency), tests and servers
# interleaved, at each concurrency step (wrk connections), each server's CPU
# time read from /proc around each run: requests per server CPU-second,
# req/s, p50/p99/max, errors; medians and spreads (min..max) over the
# rounds, a table per test and a chart per test (summary.py).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROUNDS=3 DURATION=5 VERIFY_ONLY="" CALLGRIND="" STRACE="" SERVERS="moonhttp,go,fastify,nginx" TESTS="json,db,queries,fortunes,updates,plaintext,cached,redis"
# TechEmpower's concurrency steps that fit 2 cores: wrk connections per run;
# plaintext (pipelined 16 deep) at its own, higher steps.
STEPS="16,64,256" PLAINTEXT_STEPS="256,1024"
while [ $# -gt 0 ]; do
    case "$1" in
    --rounds) ROUNDS=$2; shift 2 ;;
    --duration) DURATION=$2; shift 2 ;;
    --verify-only) VERIFY_ONLY=1; shift ;;
    --callgrind) CALLGRIND=$2; N1=${3:-200}; N2=${4:-1000}; shift $(($# >= 4 ? 4 : 2)) ;;
    --strace) STRACE=1; shift ;;
    --servers) SERVERS=$2; shift 2 ;;
    --tests) TESTS=$2; shift 2 ;;
    --conns) STEPS=$2; shift 2 ;;
    --plaintext-conns) PLAINTEXT_STEPS=$2; shift 2 ;;
    *) sed -n '2,9p' "$0" >&2; exit 2 ;;
    esac
done
[ -n "$STRACE" ] && ROUNDS=1  # the counts are exact: one round
MOONHTTP_BIN=${MOONHTTP_BIN:-build/moonhttp}
POOL=${POOL:-16}      # database / Redis connections per server
OUT=bench/results/tfb-$(date +%Y%m%d-%H%M%S)
mkdir -p "$OUT"
WORK=$(mktemp -d /tmp/mh-tfb-XXXXXX)
declare -A PID=() PORT=()
REDIS_PID=""
log() { printf '%s %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
source bench/pgcluster.sh
source bench/callgrind_lib.sh
cleanup() {
    local s
    for s in "${!PID[@]}"; do kill "${PID[$s]}" 2>/dev/null || true; done
    for s in "${!PID[@]}"; do wait "${PID[$s]}" 2>/dev/null || true; done
    [ -n "$REDIS_PID" ] && { kill "$REDIS_PID" 2>/dev/null; wait "$REDIS_PID" 2>/dev/null || true; }
    pg_cluster_stop
    rm -rf "$WORK"
}
trap cleanup EXIT

# -- services, on core 1 beside wrk ------------------------------------------
PGPORT=$(free_port)
pg_cluster_start
"$PGBIN/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$PGPORT" -U postgres -d postgres -f bench/tfb/setup.sql >/dev/null
REDIS_PORT=$(free_port)
taskset -c 1 redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no >"$WORK/redis.log" 2>&1 &
REDIS_PID=$!
for _ in $(seq 50); do port_open "$REDIS_PORT" && break; sleep 0.1; done
for k in users user orders order item:{0..7}; do redis-cli -p "$REDIS_PORT" SET "tfb:$k" baseline >/dev/null; done
log "postgres 127.0.0.1:$PGPORT (World 10000 rows, Fortune 12), redis 127.0.0.1:$REDIS_PORT"

# -- moonhttp under callgrind: N1 then N2 keep-alive requests (one curl
# connection), start to exit; startup cancels out of the difference. Each
# process (--trace-children) writes a file; no CPU limit, as valgrind runs
# on_start's 10,000-row cache load 50 times slower than the 2 s it allows.
callgrind_run() {
    local n=$1 port
    port=$(free_port)
    PGPORT="$PGPORT" REDIS_PORT="$REDIS_PORT" POOL=1 valgrind --tool=callgrind --trace-children=yes \
        --callgrind-out-file="$OUT/callgrind.out.$n.%p" \
        "$MOONHTTP_BIN" --listen "127.0.0.1:$port" --workers 1 --log-level warn --handler-cpu-limit 0 \
        bench/tfb/moonhttp/app.lua >"$OUT/callgrind-$n.log" 2>&1 &
    PID[callgrind]=$!
    local sep="?"
    [[ "$CALLGRIND" == *"?"* ]] && sep="&"
    # Until the worker answers (its on_start fills the cache): one request
    # or two, the same in both runs give or take one.
    for _ in $(seq 600); do curl -sf -o /dev/null "http://127.0.0.1:$port$CALLGRIND" && break; sleep 0.2; done
    curl -sf -o /dev/null "http://127.0.0.1:$port$CALLGRIND${sep}n=[1-$n]"
    kill "${PID[callgrind]}"
    wait "${PID[callgrind]}" 2>/dev/null || true
    unset "PID[callgrind]"
    cg_total "$OUT/callgrind.out.$n"
}
if [ -n "$CALLGRIND" ]; then
    i1=$(callgrind_run "$N1")
    i2=$(callgrind_run "$N2")
    awk -v p="$CALLGRIND" -v n1="$N1" -v n2="$N2" -v i1="$i1" -v i2="$i2" \
        'BEGIN { printf "%s: %.0f instructions/request (%d -> %d, %d -> %d)\n", p, (i2 - i1) / (n2 - n1), n1, i1, n2, i2 }' |
        tee "$OUT/callgrind.txt"
    # the worker: the process with the most instructions
    main=$(cg_busiest "$OUT/callgrind.out.$N2")
    callgrind_annotate --threshold=100 "$main" 2>/dev/null | grep -E '^ *[0-9,]+ +\( *[0-9.]+%\) ' |
        sed -n '1,30p' >>"$OUT/callgrind.txt"
    log "results in $OUT (kcachegrind $main)"
    exit 0
fi

# -- servers, on core 0 --------------------------------------------------------
# tests_of NAME: the tests an implementation has.
tests_of() {
    case "$1" in
    nginx) echo "json,plaintext,redis" ;;
    *) echo "json,db,queries,fortunes,updates,plaintext,cached,redis" ;;
    esac
}

start() {
    local name=$1 port dir=$WORK/$1
    port=$(free_port)
    mkdir -p "$dir"
    local -a cmd env=(PGPORT="$PGPORT" REDIS_PORT="$REDIS_PORT" POOL="$POOL" PORT="$port")
    case "$name" in
    moonhttp)
        [ -x "$MOONHTTP_BIN" ] || { log "skip moonhttp: $MOONHTTP_BIN missing"; return 1; }
        cmd=("$MOONHTTP_BIN" --listen "127.0.0.1:$port" --workers 1 --log-level warn bench/tfb/moonhttp/app.lua) ;;
    go)
        command -v go >/dev/null || { log "skip go: golang-go not installed"; return 1; }
        # GOPATH mode over Debian's packaged sources (golang-github-jackc-pgx-v4-dev,
        # golang-github-gomodule-redigo-dev): no module download, no network.
        (cd bench/tfb/go && GO111MODULE=off GOPATH="$WORK/gopath:/usr/share/gocode" GOCACHE="${GOCACHE:-$WORK/gocache}" \
            GOPROXY=off GOTOOLCHAIN=local go build -o "$dir/tfb-go" .) >"$dir/build.log" 2>&1 ||
            { log "skip go: build failed, see $dir/build.log"; cat "$dir/build.log" >&2; return 1; }
        cmd=(env GOMAXPROCS=1 "$dir/tfb-go") ;;
    fastify)
        command -v node >/dev/null || { log "skip fastify: nodejs not installed"; return 1; }
        [ -d bench/tfb/fastify/node_modules ] || (cd bench/tfb/fastify && npm ci --no-audit --no-fund >/dev/null) ||
            { log "skip fastify: npm ci failed"; return 1; }
        cmd=(node bench/tfb/fastify/app.js) ;;
    nginx)
        [ -f /usr/lib/nginx/modules/ngx_http_lua_module.so ] ||
            { log "skip nginx: nginx-light or libnginx-mod-http-lua not installed"; return 1; }
        sed -e "s|@PORT@|$port|g; s|@PREFIX@|$dir|g; s|@USER@|$(id -un)|g; s|@REDIS_PORT@|$REDIS_PORT|g; s|@POOL@|$POOL|g" \
            bench/tfb/nginx/nginx.conf.in >"$dir/nginx.conf"
        cmd=(nginx -p "$dir" -c "$dir/nginx.conf" -e "$dir/error.log") ;;
    *) log "unknown server $name"; return 1 ;;
    esac
    env "${env[@]}" taskset -c 0 "${cmd[@]}" >"$dir/server.log" 2>&1 &
    PID[$name]=$! PORT[$name]=$port
    for _ in $(seq 100); do port_open "$port" && return 0; sleep 0.1; done
    log "skip $name: not listening on $port, see $dir/server.log"
    cat "$dir/server.log" >&2
    return 1
}

MEASURED=()
for s in ${SERVERS//,/ }; do
    start "$s" || continue
    if python3 bench/tfb/verify.py --name "$s" --url "http://127.0.0.1:${PORT[$s]}" --pg-port "$PGPORT" \
        --redis-port "$REDIS_PORT" --tests "$(tests_of "$s")" | tee -a "$OUT/verify.txt"; then
        MEASURED+=("$s")
    else
        log "not measuring $s: it failed the verifier (see above)"
    fi
done
for k in users user orders order item:{0..7}; do redis-cli -p "$REDIS_PORT" SET "tfb:$k" baseline >/dev/null; done
[ -n "$VERIFY_ONLY" ] && { log "verified: ${MEASURED[*]:-none}"; exit 0; }
[ ${#MEASURED[@]} -gt 0 ] || { log "nothing passed the verifier"; exit 1; }

# -- measuring -----------------------------------------------------------------
# CPU seconds (user + system) of a process and its descendants (nginx's worker).
cpu_of() {
    local p c total=0
    for p in "$@"; do
        total=$(awk -v t="$total" '{ print t + $14 + $15 }' "/proc/$p/stat" 2>/dev/null || echo "$total")
        for c in $(cat /proc/"$p"/task/*/children 2>/dev/null); do
            total=$(awk -v t="$total" -v c="$(cpu_of "$c")" 'BEGIN { print t + c }')
        done
    done
    echo "$total"
}
TICKS=$(getconf CLK_TCK)

# run_wrk SERVER TEST ROUND CONNS
run_wrk() {
    local s=$1 t=$2 r=$3 c=$4 url="http://127.0.0.1:${PORT[$s]}"
    local -a extra=()
    case "$t" in
    json) url+=/json ;;
    db) url+=/db ;;
    queries) url+="/queries?queries=20" ;;
    fortunes) url+=/fortunes ;;
    updates) url+="/updates?queries=20" ;;
    cached) url+="/cached-queries?count=100" ;;
    plaintext) extra=(-s bench/tfb/wrk/pipeline.lua) ;;
    redis) extra=(-s bench/tfb/wrk/seed.lua) ;;
    esac
    local f="$OUT/wrk-$s-$t-c$c-$r.txt" before after
    taskset -c 1 wrk -t1 -c"$c" -d1s "${extra[@]}" "$url" >/dev/null 2>&1 || true  # warm-up
    [ -n "$STRACE" ] && { strace_wrk "$@"; return; }
    before=$(cpu_of "${PID[$s]}")
    taskset -c 1 wrk -t1 -c"$c" -d"${DURATION}s" --latency "${extra[@]}" "$url" >"$f" 2>&1 || true
    after=$(cpu_of "${PID[$s]}")
    python3 - "$f" "$s" "$t" "$r" "$c" "$before" "$after" "$TICKS" >>"$OUT/raw.tsv" <<'PY'
import re, sys
f, s, t, r, c, before, after, ticks = sys.argv[1:]
text = open(f).read()
def ms(v):
    m = re.match(r"([\d.]+)(us|ms|s|m)$", v)
    # wrk prints 0.00us for a percentile its histogram lost: unknown, not 0.
    if not m or float(m.group(1)) == 0:
        return float("nan")
    return float(m.group(1)) * {"us": 0.001, "ms": 1, "s": 1000, "m": 60000}[m.group(2)]
req = re.search(r"(\d+) requests in", text)
req = int(req.group(1)) if req else 0
rps = re.search(r"Requests/sec:\s*([\d.]+)", text)
lat = {m.group(1): ms(m.group(2)) for m in re.finditer(r"^\s+(50|99)%\s+(\S+)", text, re.M)}
mx = re.search(r"^\s+Latency\s+\S+\s+\S+\s+(\S+)", text, re.M)
errs = sum(int(x) for x in re.findall(r"(?:connect|read|write|timeout) (\d+)", text))
non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
errs += int(non2xx.group(1)) if non2xx else 0
cpu = (float(after) - float(before)) / float(ticks)
per_cpu = req / cpu if cpu > 0 else float("nan")
print("\t".join(map(str, [s, t, r, c, rps.group(1) if rps else "nan", "%.0f" % per_cpu, "%.2f" % cpu,
                          lat.get("50", "nan"), lat.get("99", "nan"), ms(mx.group(1)) if mx else "nan", errs])))
PY
}

# strace_wrk SERVER TEST ROUND CONNS: the system calls of the server's
# process and its children (nginx's worker) over one wrk run, per request.
# strace slows the server several times over: the counts, not the rates,
# are the figures.
strace_wrk() {
    local s=$1 t=$2 c=$4 url=$url f="$OUT/strace-$s-$t-c$4.txt" sp p
    local -a pids=(-p "${PID[$s]}")
    for p in $(cat /proc/"${PID[$s]}"/task/*/children 2>/dev/null); do pids+=(-p "$p"); done
    strace -c -f -o "$f" "${pids[@]}" &
    sp=$!
    sleep 1
    taskset -c 1 wrk -t1 -c"$c" -d"${DURATION}s" "${extra[@]}" "$url" >"$f.wrk" 2>&1 || true
    kill -INT "$sp"
    wait "$sp" 2>/dev/null || true
    python3 - "$f" "$s" "$t" "$c" >>"$OUT/strace.md" <<'PY'
import re, sys
f, s, t, c = sys.argv[1:]
req = int(re.search(r"(\d+) requests in", open(f + ".wrk").read()).group(1))
calls = {}
for line in open(f):
    m = re.match(r"\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?(\w+)$", line)
    if m and m.group(2) != "total":
        calls[m.group(2)] = int(m.group(1))
total = sum(calls.values())
top = ", ".join("%s %.2f" % (k, v / req) for k, v in sorted(calls.items(), key=lambda kv: -kv[1]) if v / req >= 0.01)
print("| %s | %s | %s | %d | %.2f | %s |" % (t, c, s, req, total / req, top))
PY
}

printf 'server\ttest\tround\tconns\treq_s\treq_per_cpu_s\tcpu_s\tp50_ms\tp99_ms\tmax_ms\terrors\n' >"$OUT/raw.tsv"
for r in $(seq "$ROUNDS"); do
    for t in ${TESTS//,/ }; do
        steps=$STEPS
        [ "$t" = plaintext ] && steps=$PLAINTEXT_STEPS
        for c in ${steps//,/ }; do
            # The servers' order turns each round, so none always runs first.
            n=${#MEASURED[@]}
            for i in $(seq 0 $((n - 1))); do
                s=${MEASURED[$(((i + r) % n))]}
                [[ ",$(tests_of "$s")," == *",$t,"* ]] || continue
                log "round $r: $t -c$c on $s"
                run_wrk "$s" "$t" "$r" "$c"
            done
        done
    done
done
if [ -n "$STRACE" ]; then
    printf '| test | wrk -c | server | requests | system calls per request | of which |\n|---|---:|---|---:|---:|---|\n'
    cat "$OUT/strace.md"
    log "results in $OUT"
    exit 0
fi
python3 bench/tfb/summary.py "$OUT/raw.tsv" | tee "$OUT/summary.md"
log "results in $OUT"
