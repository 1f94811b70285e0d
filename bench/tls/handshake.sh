#!/bin/sh
# Full TLS handshakes per CPU-second of the server: each server runs one
# process on CPU 0; $PAR concurrent `openssl s_time -new` (never resumes) on
# CPU 1 for $DURATION seconds; the server's CPU time (utime + stime from
# /proc) is read before and after, so a machine shared with other work
# still gives a fair figure (handshakes / server CPU second).
# Usage: bench/tls/handshake.sh NEW_BIN [OLD_BIN]   (env: DURATION RUNS PAR MODE)
#   MODE=-reuse: resumed handshakes instead (s_time offers the first
#   connection's session on every later one)
#   NEW_BIN: moonhttp with Mbed TLS 3.6 (TLS 1.3 and 1.2 measured)
#   OLD_BIN: optionally a moonhttp built with 2.28 (TLS 1.2 only)
set -e
NEW=$(realpath "$1")
OLD=${2:+$(realpath "$2")}
HERE=$(cd "$(dirname "$0")" && pwd)
DURATION=${DURATION:-8}
RUNS=${RUNS:-3}
PAR=${PAR:-4}
MODE=${MODE:--new}
KIND=full
[ "$MODE" = -reuse ] && KIND=resumed
DIR=$(mktemp -d /tmp/mh-bench-hs-XXXXXX)
mkdir -p "$DIR/body" "$DIR/proxy"
PIDS=""
trap 'kill $PIDS 2>/dev/null; wait 2>/dev/null; rm -rf "$DIR"' EXIT INT TERM
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
    -keyout "$DIR/cert.key" -out "$DIR/cert.pem" -subj /CN=localhost >/dev/null 2>&1
sed -e "s|@DIR@|$DIR|g" -e "s|@PORT@|18454|g" "$HERE/nginx.conf.in" >"$DIR/nginx.conf"

start_mh() { # bin port
    taskset -c 0 "$1" --listen 127.0.0.1:"$2" --workers 1 --log-level error \
        --tls-cert "$DIR/cert.pem" --tls-key "$DIR/cert.key" "$HERE/app.lua" &
    PIDS="$PIDS $!"
}
start_mh "$NEW" 18451
[ -n "$OLD" ] && start_mh "$OLD" 18452
taskset -c 0 nginx -p "$DIR" -c "$DIR/nginx.conf" &
PIDS="$PIDS $!"
sleep 1

# Every process holding the listening socket (moonhttp's master and worker, nginx).
server_pid() { # port
    ss -ltnpH "sport = :$1" | grep -o 'pid=[0-9]*' | cut -d= -f2 | sort -u | tr '\n' ' '
}
cpu_ticks() { for p in $1; do cat "/proc/$p/stat"; done | awk '{ s += $14 + $15 } END { print s }'; }

measure() { # port version-flag → "handshakes/cpu-second handshakes/wall-second"
    pid=$(server_pid "$1")
    c0=$(cpu_ticks "$pid")
    for i in $(seq "$PAR"); do
        taskset -c 1 openssl s_time -connect "127.0.0.1:$1" "$MODE" "$2" -time "$DURATION" 2>/dev/null |
            awk '/connections in .* real seconds/ { print $1 }' >"$DIR/st.$i" &
    done
    wait_st=0
    while [ "$(cat "$DIR"/st.* 2>/dev/null | wc -l)" -lt "$PAR" ] && [ $wait_st -lt $((DURATION * 4)) ]; do
        sleep 0.5; wait_st=$((wait_st + 1))
    done
    c1=$(cpu_ticks "$pid")
    n=$(cat "$DIR"/st.* | awk '{ s += $1 } END { print s }')
    rm -f "$DIR"/st.*
    awk -v n="$n" -v c="$((c1 - c0))" -v hz="$(getconf CLK_TCK)" -v d="$DURATION" \
        'BEGIN { printf "%d %d\n", (c > 0 ? n / (c / hz) : 0), n / d }'
}

ROWS="moonhttp-3.6:18451:-tls1_3 moonhttp-3.6:18451:-tls1_2 nginx:18454:-tls1_3 nginx:18454:-tls1_2"
[ -n "$OLD" ] && ROWS="$ROWS moonhttp-2.28:18452:-tls1_2"
for r in $(seq "$RUNS"); do
    for row in $ROWS; do
        name=${row%%:*}; rest=${row#*:}; port=${rest%%:*}; flag=${rest#*:}
        v=$(measure "$port" "$flag")
        echo "run $r $name $flag: $v" >&2
        echo "$v" >>"$DIR/$name$flag"
    done
done
median() { sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
echo "| server | version | $KIND handshakes / CPU-s (median) | per wall-s (median) |"
echo "|---|---|---:|---:|"
for row in $ROWS; do
    name=${row%%:*}; flag=${row##*:}
    cpu=$(cut -d' ' -f1 "$DIR/$name$flag" | median); wall=$(cut -d' ' -f2 "$DIR/$name$flag" | median)
    echo "| $name | ${flag#-} | $cpu | $wall |"
done
