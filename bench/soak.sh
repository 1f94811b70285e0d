#!/usr/bin/env bash
# The soak test (issue 29): examples/linkboard.lua with two workers, its own
# Redis and PostgreSQL on free loopback ports, under a modest mixed load
# (HTTP/1.1, HTTP/2 over TLS, WebSocket, SSE, DB reads and writes, Redis,
# static files, one wrk burst) for SOAK_SECONDS (default 600), with quiet
# gaps longer than the pools' idle timeout, a SIGHUP every minute (every
# third of a shorter run), a worker SIGKILLed twice, Redis and PostgreSQL
# each restarted once. The driver is bench/soak.py; its docstring and
# bench/notes/2026-12-02-lab-notebook.md ("Soak") state what it checks and the bounds.
#
#   bench/soak.sh                        # 10 minutes
#   SOAK_SECONDS=90 bench/soak.sh        # the CI version (make test)
#
# Environment: MOONHTTP_BIN (default build/moonhttp), SOAK_SECONDS, SOAK_OUT
# (report.txt and server.log; default build/soak), PG_BINDIR.
# Exit status: 0 passed, 1 failed (the report says why), 2 could not set up.
set -u
cd "$(dirname "$0")/.."
seconds=${SOAK_SECONDS:-600}
state=$(mktemp /tmp/mh-soak-state-XXXXXX)

# The driver stops what it started; this is the net under it for when it is
# killed outright (or by the timeout below): every pid it recorded, and the
# PostgreSQL cluster.
cleanup() {
    while read -r kind what; do
        case $kind in
        pid) # a moonhttp master's workers first (stopped, it cannot fork new ones)
            kill -STOP "$what" 2>/dev/null && pkill -9 -P "$what"
            kill -9 "$what" 2>/dev/null ;;
        pgdata)
            if [ -f "$what/postmaster.pid" ]; then
                runuser -u postgres -- "${PG_BINDIR:-/usr/lib/postgresql/15/bin}/pg_ctl" \
                    -D "$what" -w -t 30 stop -m immediate >/dev/null 2>&1 ||
                    "${PG_BINDIR:-/usr/lib/postgresql/15/bin}/pg_ctl" -D "$what" -w -t 30 stop -m immediate >/dev/null 2>&1
            fi
            rm -rf "$(dirname "$(dirname "$what")")" ;;
        esac
    done <"$state"
    rm -f "$state"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Bounded in time whatever happens: the run, plus set-up and the final stop.
SOAK_STATE=$state timeout -k 10 $((${seconds%.*} + 120)) /usr/bin/python3 bench/soak.py
rc=$?
[ $rc -eq 124 ] && echo "soak: timed out" >&2
exit $rc
