# Shared by bench/run.sh, bench/alloc.sh and bench/callgrind.sh (bash, sourced
# from the repository root): how each server is built, started, checked and
# stopped, so all three measure the same servers the same way.
#
# The caller sets WORK (a private temp dir) before calling anything here.

MOONHTTP_BIN=${MOONHTTP_BIN:-build/moonhttp}
# Each server has its own port, so a server that failed to stop can never be
# measured in place of the next one. Loopback only, everywhere.
declare -A PORT=([moonhttp]=18080 [nginx-lua]=18081 [go]=18082 [floor]=18083 [h2o]=18084)
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
        [ -f examples/api.lua ] || { SKIP_REASON="examples/api.lua missing"; return 1; }
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
    moonhttp) cmd=("$MOONHTTP_BIN" --listen "127.0.0.1:$port" --workers 1 examples/api.lua) ;;
    nginx-lua)
        sed -e "$fill" bench/nginx/nginx.conf.in >"$dir/nginx.conf"
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

# A server answering the wrong thing must not be measured.
check_body() {
    local body
    body=$(curl -s --max-time 2 "http://127.0.0.1:${PORT[$1]}/api/users" || true)
    [ "$body" = "$EXPECTED_BODY" ] && return 0
    echo "bench: $1 answered /api/users with '$body', expected '$EXPECTED_BODY'" >&2
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
