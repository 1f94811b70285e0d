#!/bin/sh
# Installs the Debian 12 packages moonhttp needs to build, run and test.
# Only what is missing is installed, so running it again is cheap.
set -e
# haproxy: spec/deploy_spec.lua rolls two instances behind it (examples/deploy);
# wrk: the load in the reload/worker/deploy specs. Without them those specs
# skip with a message (deploy) or fall back to a Lua request loop (reload).
# procps: pgrep in the worker specs (minimal Debian images lack it);
# ca-certificates: the bundle http.fetch verifies HTTPS against by default.
PKGS="cmake make gcc clang libclang-rt-14-dev pkg-config \
liblua5.4-dev lua5.4 libev-dev libmbedtls-dev node-llhttp \
lua-busted lua-cjson lua-socket curl openssl procps ca-certificates haproxy wrk"
if [ "$1" = "--bench" ]; then
    PKGS="$PKGS nginx-light libnginx-mod-http-lua golang-go h2o valgrind"
fi
missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
echo "installing:$missing"
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO=sudo
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing
