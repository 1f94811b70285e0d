#!/bin/sh
# The busted specs, SPEC_JOBS files at a time (default 1: one busted over
# spec/, as always). Most specs wait on sockets, timers and child servers
# rather than compute, so on a 2-core machine two at once finish sooner;
# each file still runs alone in its own busted, so what a spec proves does
# not change, only its neighbour in time. A file's output is printed whole
# when it ends (in finishing order); then one summary line over all files.
# Exits 1 when any file failed. Files: the arguments, or spec/*_spec.lua.
set -u
JOBS=${SPEC_JOBS:-1}
if [ "$JOBS" -le 1 ]; then exec busted "$@"; fi
cd "$(dirname "$0")/.."
out=$(mktemp -d /tmp/mh-specs-XXXXXX)
trap 'rm -rf "$out"' EXIT
if [ $# -eq 0 ]; then set -- spec/*_spec.lua; fi
# The slowest files first, so the last file to start is a short one and the
# two queues end together (times from a run under ASan; a file not listed
# goes after these in name order).
SLOW="tfb stays_up client_timeouts guards channel password pg linkboard_example
socket_duplex body_timeout error_text fetch_timeouts session shared redis reload socket threads"
order=""
for s in $SLOW; do
    for f in "$@"; do [ "$f" = "spec/${s}_spec.lua" ] && order="$order $f"; done
done
for f in "$@"; do
    case " $order " in *" $f "*) ;; *) order="$order $f" ;; esac
done
t0=$(date +%s)
printf '%s\n' $order | xargs -P "$JOBS" -I{} sh -c '
    log="$2/$(basename "$1").log"
    busted "$1" >"$log" 2>&1
    echo $? >"$log.rc"
    flock "$2/lock" cat "$log"' _ {} "$out"
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
