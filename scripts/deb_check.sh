#!/bin/sh
# The Debian package as an operator meets it, on this machine (as root):
# build it (`make deb`: dpkg-buildpackage, lintian, scripts/check_deb.sh),
# install it with apt-get, check the installed unit with systemd-analyze,
# start the installed binary as the moonhttp user the way the unit's
# ExecStart does, with a stand-in NOTIFY_SOCKET (systemd need not be PID 1:
# CI containers have none), see READY=1, reload it with SIGHUP
# (RELOADING=1 then READY=1), stop it (STOPPING=1, exit 0), run a busted
# spec outside the tree that requires the installed moonhttp.test, then
# purge the package and any package its installation pulled in, leaving
# the machine as found.
#
#   scripts/deb_check.sh                  # make deb, then the checks
#   scripts/deb_check.sh moonhttp_*.deb   # the checks on a built package
set -eu
cd "$(dirname "$0")/.."
src=$(pwd)
fail() { echo "deb_check: $*" >&2; exit 1; }
say() { echo "deb_check: $*"; }
[ "$(id -u)" = 0 ] || fail "run as root: it installs and purges the package"
if dpkg-query -W -f '${Status}' moonhttp 2>/dev/null | grep -q "ok installed"; then
    fail "moonhttp is installed already; this check installs and purges it, so it will not run here"
fi

if [ $# -gt 0 ]; then
    deb=$1
else
    # The package builds with scripts/deps.sh's Mbed TLS (.deps/mbedtls-3.6) and
    # nothing of the system's: debian/control names no libmbedtls-dev, and
    # the build runs without it installed. Where it is (Debian 12's 2.28
    # headers, put there by hand), it is removed for the build and put back.
    ! grep -q libmbedtls debian/control || fail "debian/control names libmbedtls"
    readd=
    if dpkg-query -W -f '${Status}' libmbedtls-dev 2>/dev/null | grep -q "ok installed"; then
        apt-get remove -y -qq libmbedtls-dev >/dev/null || fail "could not remove libmbedtls-dev for the build"
        readd=1
    fi
    rc=0
    make deb || rc=$?
    [ -z "$readd" ] || apt-get install -y -qq --no-install-recommends libmbedtls-dev >/dev/null ||
        echo "deb_check: could not reinstall libmbedtls-dev" >&2
    [ "$rc" = 0 ] || fail "make deb failed"
    say "make deb: built without libmbedtls-dev installed${readd:+ (removed for the build, put back)}"
    set -- build-deb/moonhttp_*.deb
    deb=$1
fi
[ -f "$deb" ] || fail "no package at $deb"
case $deb in /*) ;; *) deb=$src/$deb ;; esac

tmp=$(mktemp -d)
chmod 755 "$tmp"
server=
listener=
installed=
dpkg-query -W -f '${Package}\n' | sort >"$tmp/before"
had_user=
! id moonhttp >/dev/null 2>&1 || had_user=1
cleanup() {
    rc=$?
    [ -z "$server" ] || kill "$server" 2>/dev/null || true
    [ -z "$listener" ] || kill "$listener" 2>/dev/null || true
    if [ -n "$installed" ]; then
        apt-get purge -y -qq moonhttp >/dev/null || rc=1
        # What apt-get pulled in for the package goes too.
        dpkg-query -W -f '${Package}\n' | sort >"$tmp/after"
        extra=$(comm -13 "$tmp/before" "$tmp/after" | tr '\n' ' ')
        # shellcheck disable=SC2086 # one word per package
        [ -z "$extra" ] || apt-get purge -y -qq $extra >/dev/null || rc=1
        dpkg-query -W -f '${Status}' moonhttp 2>/dev/null | grep -q "ok installed" && rc=1
        # The package keeps its system user after a purge (Debian policy); this check made it.
        if [ -z "$had_user" ] && id moonhttp >/dev/null 2>&1; then
            deluser --system --quiet moonhttp >/dev/null 2>&1 || rc=1
        fi
        say "purged moonhttp${extra:+ and $extra}"
    fi
    rm -rf "$tmp"
    exit $rc
}
trap cleanup EXIT
trap 'exit 1' INT TERM

t0=$(date +%s)
installed=1
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$deb" >"$tmp/apt.log" 2>&1 ||
    { cat "$tmp/apt.log" >&2; fail "apt-get install $deb failed"; }
say "installed $(dpkg-query -W -f '${Package} ${Version}' moonhttp)"
id moonhttp >/dev/null 2>&1 || fail "the package did not create the moonhttp user"
unit=/lib/systemd/system/moonhttp.service
[ -f "$unit" ] || fail "no $unit"
out=$(systemd-analyze verify "$unit" 2>&1) || fail "systemd-analyze verify: $out"
[ -z "$out" ] || fail "systemd-analyze verify: $out"
say "systemd-analyze verify $unit: clean"

# The unit's own command lines, run as its User= in a working directory of
# its own (StateDirectory is systemd's to make), on a free loopback port.
user=$(sed -n 's/^User=//p' "$unit")
check=$(sed -n 's/^ExecStartPre=//p' "$unit")
start=$(sed -n 's/^ExecStart=//p' "$unit")
[ "$user" = moonhttp ] || fail "the unit runs as '$user', not moonhttp"
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
mkdir "$tmp/state" && chown moonhttp:moonhttp "$tmp/state"
notify="@moonhttp-deb-check-$$"
python3 -u "$src/spec/servers/notify_listener.py" "$notify" >"$tmp/notify.log" &
listener=$!
for _ in $(seq 50); do grep -q listening "$tmp/notify.log" && break; sleep 0.1; done
# setpriv, not runuser: it execs, so $server is the master itself.
as_moonhttp="setpriv --reuid=moonhttp --regid=moonhttp --init-groups"
cd "$tmp/state"
# shellcheck disable=SC2086 # the unit's command lines split on blanks, as systemd splits them
$as_moonhttp $check >"$tmp/check.log" 2>&1 || { cat "$tmp/check.log" >&2; fail "ExecStartPre failed: $check"; }
# --listen goes before the script: what follows the script is the script's.
# shellcheck disable=SC2086
set -- $start
bin=$1
shift
NOTIFY_SOCKET=$notify $as_moonhttp "$bin" --listen "127.0.0.1:$port" "$@" >"$tmp/server.log" 2>&1 &
server=$!
cd "$src"

# The messages the master sent so far, watchdog pings left out, one a line.
states() { grep -v "WATCHDOG=1" "$tmp/notify.log" | sed -n 's/^[0-9.]* //p' | cut -d'|' -f1; }
wait_states() { # $1: how many messages
    for _ in $(seq 100); do [ "$(states | wc -l)" -ge "$1" ] && return 0; sleep 0.1; done
    cat "$tmp/server.log" >&2
    fail "waited for $1 notify messages, got: $(states | tr '\n' ' ')"
}
wait_states 1
[ "$(states | sed -n 1p)" = READY=1 ] || fail "first message $(states | sed -n 1p), not READY=1"
body=$(curl -sS --max-time 5 "http://127.0.0.1:$port/") || fail "no answer on port $port"
echo "$body" | grep -q '"hello":"moonhttp"' || fail "unexpected answer: $body"
master=$server
[ "$(ps -o user= -p "$master")" = moonhttp ] || fail "the server does not run as moonhttp"
say "serves on 127.0.0.1:$port as $(ps -o user= -p "$master") (pid $master): $body"

kill -HUP "$master"
wait_states 3
if [ "$(states | sed -n 2p)" != RELOADING=1 ] || [ "$(states | sed -n 3p)" != READY=1 ]; then
    fail "after SIGHUP: $(states | tr '\n' ' ')"
fi
curl -sfS --max-time 5 "http://127.0.0.1:$port/healthz" >/dev/null || fail "no answer after the reload"
say "SIGHUP: RELOADING=1, READY=1, serving"

kill -TERM "$master"
rc=0
wait "$server" || rc=$?
server=
[ "$rc" = 0 ] || { cat "$tmp/server.log" >&2; fail "the server exited $rc after SIGTERM"; }
states | grep -qx STOPPING=1 || fail "no STOPPING=1: $(states | tr '\n' ' ')"
say "SIGTERM: STOPPING=1, exit 0"

# An app's own spec, outside the tree, with nothing but the installed files.
mkdir -p "$tmp/app/spec"
cat >"$tmp/app/spec/app_spec.lua" <<'EOF'
local test = require "moonhttp.test"
describe("the installed starter app", function()
  it("answers through the installed moonhttp.test", function()
    local app = test.start("/etc/moonhttp/app.lua")
    local status, _, body = app:get("/healthz")
    app:stop()
    assert.equal(200, status)
    assert.equal("ok\n", body)
  end)
end)
EOF
(cd "$tmp/app" && env -i PATH=/usr/bin:/bin HOME="$tmp/app" busted -o TAP spec/app_spec.lua) >"$tmp/busted.log" 2>&1 ||
    { cat "$tmp/busted.log" >&2; fail "the busted spec outside the tree failed"; }
grep -q "^ok 1 " "$tmp/busted.log" || { cat "$tmp/busted.log" >&2; fail "the busted spec did not pass"; }
say "busted outside the tree, installed moonhttp.test: ok"
say "all checks passed in $(($(date +%s) - t0)) s after the build"
