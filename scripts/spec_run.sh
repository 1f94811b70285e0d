#!/bin/sh
# The busted specs, SPEC_JOBS files at a time (default 1: one busted over
# spec/, as always). Most specs wait on sockets, timers and child servers
# rather than compute, so on a 2-core machine two at once finish sooner.
# Each file runs in its own busted, so what a spec proves does not change,
# only its neighbour in time (and the few that time the machine itself run
# with none, below). A file's output is printed whole when it ends (in
# finishing order); then one summary line over all files. Exits 1 when any
# file failed. Files: the arguments, or spec/*_spec.lua.
set -u
JOBS=${SPEC_JOBS:-1}
if [ "$JOBS" -le 1 ]; then exec busted "$@"; fi
cd "$(dirname "$0")/.."
out=$(mktemp -d /tmp/mh-specs-XXXXXX)
trap 'rm -rf "$out"' EXIT
if [ $# -eq 0 ]; then set -- spec/*_spec.lua; fi
# Files that bound the machine's own promptness in wall time (a health
# check within 50 ms, a stop within shutdown_timeout + 1 s, three 50 ms
# waits in about 50 ms, a reused connection before the peer's next write):
# with a second spec beside them on two cores they failed under ASan, so
# they run alone, after the others.
ALONE="password guards threads client fetch_timeouts client_timeouts deploy notify"
# The slowest of the rest first, so the last file to start is a short one
# and the queues end together (times from a run under ASan; a file not
# listed goes after these in name order).
SLOW="tfb stays_up h2 tls channel pg linkboard_example limits socket_duplex
body_timeout error_text jwt session shared redis reload socket websocket"
pick() { # the files of "$@" named in list $1, in its order
    list=$1; shift
    for s in $list; do
        for f in "$@"; do [ "$f" = "spec/${s}_spec.lua" ] && echo "$f"; done
    done
}
alone=$(pick "$ALONE" "$@")
order=$(pick "$SLOW" "$@")
for f in "$@"; do
    case " $(echo $order $alone) " in *" $f "*) ;; *) order="$order $f" ;; esac
done
# Each file's output comes under a line with its name and wall time.
run_one='
    log="$2/$(basename "$1").log"
    t=$(date +%s)
    busted "$1" >"$log" 2>&1
    echo $? >"$log.rc"
    echo "== $1: $(($(date +%s) - t)) s" >"$log.head"
    flock "$2/lock" cat "$log.head" "$log"'
t0=$(date +%s)
printf '%s\n' $order | xargs -P "$JOBS" -I{} sh -c "$run_one" _ {} "$out"
[ -z "$alone" ] || printf '%s\n' $alone | xargs -P 1 -I{} sh -c "$run_one" _ {} "$out"
passed=0 failed=0 skipped=0 bad=""
for rc in "$out"/*.rc; do
    log=${rc%.rc}
    line=$(grep -E '^[0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$' "$log" | tail -n 1)
    set -- $line
    if [ $# -eq 6 ]; then
        passed=$((passed + $1)) failed=$((failed + $3)) skipped=$((skipped + $5))
    fi
    if [ "$(cat "$rc")" != 0 ] || [ $# -ne 6 ]; then bad="$bad $(basename "$log" .log)"; fi
done
echo
echo "spec files that failed:${bad:- none} ($JOBS at a time, $(($(date +%s) - t0)) s)"
echo "$passed passed, $failed failed, $skipped skipped"
[ -z "$bad" ]
