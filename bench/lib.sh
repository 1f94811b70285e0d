# shellcheck shell=bash
# Shared by bench/run.sh, alloc.sh, callgrind.sh, conns.sh and routes.sh (bash, sourced
# from the repository root): how each server is built, started, checked and
# stopped, so all of them measure the same servers the same way.
#
# The caller sets WORK (a private temp dir) before calling anything here.

MOONHTTP_BIN=${MOONHTTP_BIN:-build/moonhttp}
# The script moonhttp serves and extra flags (bench/routes.sh, bench/conns.sh
# change them; run.sh, alloc.sh and callgrind.sh leave the defaults).
MOONHTTP_SCRIPT=${MOONHTTP_SCRIPT:-examples/api.lua}
MOONHTTP_ARGS=${MOONHTTP_ARGS:-}
# Each server has its own port, so a server that failed to stop can never be
# measured in place of the next one. Loopback only, everywhere.
# BENCH_PORT_BASE moves all five (e.g. when another session's test holds 18081).
BENCH_PORT_BASE=${BENCH_PORT_BASE:-18080}
declare -A PORT=([moonhttp]=$BENCH_PORT_BASE [nginx-lua]=$((BENCH_PORT_BASE + 1)) [go]=$((BENCH_PORT_BASE + 2))
    [floor]=$((BENCH_PORT_BASE + 3)) [h2o]=$((BENCH_PORT_BASE + 4)))
EXPECTED_BODY='{"name":"baseline","users":[]}'
SERVER_PID=""

log() { printf '%s %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

# All descendants of a pid (nginx and moonhttp fork workers, h2o a helper).
tree_pids() {
    local p c
    for p in "$@"; do
        echo "$p"
        for c in $(cat /proc/"$p"/task/*/children 2>/dev/null); do
            tree_pids "$c"
        done
    done
}

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# Builds the helper programs into $WORK. Go's caches go there too, so
# nothing outside the tree is written and no network is needed.
build_floor() { cc -O2 -o "$WORK/epoll_floor" bench/floor/epoll_floor.c; }
build_client() { cc -O2 -o "$WORK/kaclient" bench/client/kaclient.c; }
build_go() {
    command -v go >/dev/null || return 0
    (cd bench/go && GOCACHE=$WORK/gocache GOPATH=$WORK/gopath GOFLAGS=-mod=mod \
        GOPROXY=off GOTOOLCHAIN=local go build -o "$WORK/go-bench" .)
}

# Returns 1 and sets SKIP_REASON when the server cannot run on this machine.
available() {
    SKIP_REASON=""
    case "$1" in
    moonhttp)
        [ -x "$MOONHTTP_BIN" ] || { SKIP_REASON="binary $MOONHTTP_BIN missing (build it: make build)"; return 1; }
        [ -f "$MOONHTTP_SCRIPT" ] || { SKIP_REASON="$MOONHTTP_SCRIPT missing"; return 1; }
        ;;
    nginx-lua)
        command -v nginx >/dev/null && [ -f /usr/lib/nginx/modules/ngx_http_lua_module.so ] ||
            { SKIP_REASON="nginx-light or libnginx-mod-http-lua not installed"; return 1; }
        ;;
    go) [ -x "$WORK/go-bench" ] || { SKIP_REASON="golang-go not installed (or bench/go did not build)"; return 1; } ;;
    floor) [ -x "$WORK/epoll_floor" ] || { SKIP_REASON="bench/floor did not build"; return 1; } ;;
    h2o) command -v h2o >/dev/null || { SKIP_REASON="h2o not installed"; return 1; } ;;
    *) SKIP_REASON="unknown server '$1'"; return 1 ;;
    esac
}

# start_server NAME LOGFILE TIMEOUT_S [WRAPPER...]
# Renders the server's config into $WORK/NAME and starts it in the
# background behind WRAPPER (taskset, valgrind, env LD_PRELOAD=...), which
# must exec the server so that SERVER_PID is the server (or valgrind running
# it). Waits until the port accepts; returns 1 if it never does.
start_server() {
    local name=$1 logf=$2 timeout=$3
    shift 3
    local port=${PORT[$name]} dir=$WORK/$name
    rm -rf "$dir"
    mkdir -p "$dir"
    if port_open "$port"; then
        echo "bench: port $port is already taken; not measuring whatever listens there" >&2
        return 1
    fi
    local fill="s|@PORT@|$port|g; s|@PREFIX@|$dir|g; s|@USER@|$(id -un)|g"
    local -a cmd
    case "$name" in
    moonhttp)
        # shellcheck disable=SC2206 # MOONHTTP_ARGS is a word list on purpose
        # --max-connections: the same 15000 ceiling every peer gets (-c10000).
        cmd=("$MOONHTTP_BIN" --listen "127.0.0.1:$port" --workers 1 --max-connections 15000 $MOONHTTP_ARGS "$MOONHTTP_SCRIPT")
        ;;
    nginx-lua)
        sed -e "$fill" "${NGINX_CONF_IN:-bench/nginx/nginx.conf.in}" >"$dir/nginx.conf"
        cmd=(nginx -p "$dir" -c "$dir/nginx.conf" -e "$dir/error.log")
        ;;
    go) cmd=(env GOMAXPROCS=1 "$WORK/go-bench" "$port") ;;
    floor) cmd=("$WORK/epoll_floor" "$port") ;;
    h2o)
        printf '%s' "$EXPECTED_BODY" >"$dir/users.json"
        sed -e "$fill" bench/h2o/h2o.conf.in >"$dir/h2o.conf"
        cmd=(h2o -c "$dir/h2o.conf")
        ;;
    esac
    "$@" "${cmd[@]}" >>"$logf" 2>&1 &
    SERVER_PID=$!
    local i
    for i in $(seq $((timeout * 10))); do
        port_open "$port" && return 0
        if ! kill -0 "$SERVER_PID" 2>/dev/null; then
            echo "bench: $name exited at start, see $logf" >&2
            SERVER_PID=""
            return 1
        fi
        sleep 0.1
    done
    echo "bench: $name did not listen on $port within $timeout s, see $logf" >&2
    stop_server
    return 1
}

# A server answering the wrong thing, or answering with other bytes, must not
# be measured: one raw GET /api/users, read for half a second, must give
# exactly EXPECTED_HEAD (status line and headers, names compared without
# case, in any order) and EXPECTED_BODY. Date and Server are left out of the
# comparison (every server names itself and stamps the time), and so is
# `Connection: keep-alive`, which nginx and h2o add to every HTTP/1.1
# keep-alive response and no directive removes (24 bytes, noted in
# bench/notes/2026-12-02-lab-notebook.md). Anything else (chunking, ETag, other headers) refuses
# the peer. Sets CHECK_REASON on failure.
EXPECTED_HEAD=$'HTTP/1.1 200 OK\ncontent-length: 30\ncontent-type: application/json'
raw_get() {
    local port=$1
    (
        exec 3<>"/dev/tcp/127.0.0.1/$port" || exit 1
        printf 'GET /api/users HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n' >&3
        timeout 0.5 cat <&3
    ) 2>/dev/null
}
# Prints the normalized head (status line, then sorted lowercase headers
# without date/server/connection: keep-alive), a line "--", and the body.
normalize_response() {
    awk 'BEGIN { RS = "\r\n"; head = 1 }
        head && NR == 1 { status = $0; next }
        head && $0 == "" { head = 0; next }
        head {
            i = index($0, ":"); name = tolower(substr($0, 1, i - 1)); value = substr($0, i + 1)
            sub(/^[ \t]+/, "", value); sub(/[ \t]+$/, "", value)
            if (name == "date" || name == "server") next
            if (name == "connection" && tolower(value) == "keep-alive") next
            h[++n] = name ": " value; next
        }
        { body = body (nbody++ ? RS : "") $0 }
        END {
            for (a = 2; a <= n; a++) for (b = a; b > 1 && h[b - 1] > h[b]; b--) { t = h[b]; h[b] = h[b - 1]; h[b - 1] = t }
            print status; for (a = 1; a <= n; a++) print h[a]; print "--"; printf "%s", body
        }'
}
check_response() {
    local got want
    CHECK_REASON=""
    got=$(raw_get "${PORT[$1]}" | normalize_response)
    want=$(printf '%s\n--\n%s' "$EXPECTED_HEAD" "$EXPECTED_BODY")
    [ "$got" = "$want" ] && return 0
    CHECK_REASON="response differs from moonhttp's (Date, Server excluded): $(printf '%s' "$got" | tr '\n' '|')"
    echo "bench: $1 answered GET /api/users with other bytes; expected" >&2
    printf '%s\n' "$want" | sed 's/^/    /' >&2
    echo "  got" >&2
    printf '%s\n' "$got" | sed 's/^/    /' >&2
    return 1
}

# TERM first, so servers (and valgrind, and LD_PRELOAD shims) can write their
# reports on the way out; KILL whatever is left of the process tree after
# STOP_WAIT seconds.
stop_server() {
    [ -n "$SERVER_PID" ] || return 0
    local pids p i
    pids=$(tree_pids "$SERVER_PID")
    kill -TERM "$SERVER_PID" 2>/dev/null || true
    for i in $(seq $((${STOP_WAIT:-5} * 10))); do
        kill -0 "$SERVER_PID" 2>/dev/null || break
        sleep 0.1
    done
    for p in $pids; do
        kill -KILL "$p" 2>/dev/null || true
    done
    wait "$SERVER_PID" 2>/dev/null || true
    SERVER_PID=""
}

# ---- measuring (run.sh, conns.sh, routes.sh) -------------------------------
# The caller sets SERVER_CPU and CLIENT_CPU (0 and 1) before using these.

# utime+stime in clock ticks summed over the server's process tree. A
# process's stat already includes all of its threads (Go's runtime threads);
# live children must be added by hand (cutime only counts reaped ones).
# The comm field may contain spaces, so cut after the last ')'.
tree_ticks() {
    local sum=0 p f
    for p in $(tree_pids "$1"); do
        f=$(cat /proc/"$p"/stat 2>/dev/null) || continue
        set -- ${f##*) }
        # after comm: state(3) ... utime is field 14, stime 15 => $12 $13 here
        sum=$((sum + ${12} + ${13}))
    done
    echo "$sum"
}

# CPU counters in ticks: "busy total steal" of the server CPU, then "busy
# total" of the client CPU. Busy is user+nice+system+irq+softirq: all work that
# ran on the CPU. idle and iowait are not work; steal is time the hypervisor
# ran someone else, not our work, so it is left out of busy but reported as a
# noise gauge. guest is already part of user. The client CPU's busy share
# tells whether wrk, not the server, was the limit.
cpu_ticks() {
    awk -v s="cpu$SERVER_CPU" -v c="cpu$CLIENT_CPU" '
        $1 == s || $1 == c { busy[$1] = $2 + $3 + $4 + $7 + $8; total[$1] = busy[$1] + $5 + $6 + $9; steal[$1] = $9 }
        END { print busy[s], total[s], steal[s], busy[c], total[c] }' /proc/stat
}

# Converts wrk's latency ("812.00us", "1.20ms", "2.01s") to milliseconds.
# Pipelined runs print 0.00us for high percentiles: wrk times a pipelined
# batch, not each response, so those figures are not read (see README).
parse_wrk() {
    awk '
    function ms(v) {
        if (v ~ /us$/) return v / 1000
        if (v ~ /ms$/) return v + 0
        if (v ~ /s$/) return v * 1000
        return v
    }
    /^ +50%/ { p50 = ms($2) }
    /^ +99%/ { p99 = ms($2) }
    / requests in / { req = $1 }
    /^Requests\/sec:/ { rps = $2 }
    /Socket errors:/ { gsub(",", ""); err = $4 + $6 + $8 + $10 }
    /Non-2xx or 3xx responses:/ { non2xx = $5 }
    END { printf "%s\t%d\t%.3f\t%.3f\t%d\t%d\n", rps, req, p50, p99, err + 0, non2xx + 0 }
    ' "$1"
}

# p99.9 and max in ms from the TAIL line bench/wrk/latency.lua prints
# (tab-separated; 0 0 when the load ran without that script).
parse_wrk_tail() {
    awk '/^TAIL / { split($2, a, "="); split($3, b, "="); p = a[2] / 1000; m = b[2] / 1000 }
        END { printf "%.3f\t%.3f\n", p, m }' "$1"
}

# wrk_measure OUT WRK_ARGS... URL: runs wrk pinned to $CLIENT_CPU (output in
# OUT) and prints one tab-separated row: rps requests p50_ms p99_ms
# socket_errors non2xx proc_us_per_req cpu0_us_per_req steal_pct wrk_cpu_pct
# (the same figures, computed the same way, as run.sh's raw.tsv).
wrk_measure() {
    local out=$1 c0 c1 p0 p1 wrk_fields req
    shift
    c0=$(cpu_ticks)
    p0=$(tree_ticks "$SERVER_PID")
    taskset -c "$CLIENT_CPU" wrk "$@" >"$out" 2>&1 || true
    p1=$(tree_ticks "$SERVER_PID")
    c1=$(cpu_ticks)
    wrk_fields=$(parse_wrk "$out")
    req=$(echo "$wrk_fields" | cut -f2)
    # shellcheck disable=SC2086
    set -- $c0 $c1
    awk -v w="$wrk_fields" -v req="$req" \
        -v dp=$((p1 - p0)) -v db=$(($6 - $1)) -v dt=$(($7 - $2)) -v ds=$(($8 - $3)) \
        -v cb=$(($9 - $4)) -v ct=$((${10} - $5)) -v hz="$(getconf CLK_TCK)" '
        BEGIN {
            proc = req > 0 ? dp / hz * 1e6 / req : 0
            cpu0 = req > 0 ? db / hz * 1e6 / req : 0
            steal = dt > 0 ? 100 * ds / dt : 0
            client = ct > 0 ? 100 * cb / ct : 0
            printf "%s\t%.3f\t%.3f\t%.1f\t%.1f\n", w, proc, cpu0, steal, client
        }'
}

# Client processes a bench started (pids, space-separated): stop_clients
# ends them (TERM, up to 5 s, then KILL). cleanup_bench is the EXIT trap of
# a bench with clients: them, the server, then $WORK.
CLIENT_PIDS=""
stop_clients() {
    local p
    for p in $CLIENT_PIDS; do kill -TERM "$p" 2>/dev/null || true; done
    for p in $CLIENT_PIDS; do
        for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$p" 2>/dev/null || true
        wait "$p" 2>/dev/null || true
    done
    CLIENT_PIDS=""
}
cleanup_bench() {
    stop_clients
    stop_server
    rm -rf "$WORK"
}

# VmRSS (or the field given second, e.g. VmHWM: peak RSS) in KiB summed over
# a process tree.
tree_rss_kb() {
    local sum=0 p v
    for p in $(tree_pids "$1"); do
        v=$(awk -v f="${2:-VmRSS}:" '$1 == f { print $2 }' /proc/"$p"/status 2>/dev/null) || continue
        sum=$((sum + ${v:-0}))
    done
    echo "$sum"
}
