#!/bin/sh
# Installs the Debian 12 packages moonhttp needs to build, run and test.
# Only what is missing is installed, so running it again is cheap.
set -e
# haproxy: spec/deploy_spec.lua rolls two instances behind it (examples/deploy);
# wrk: the load in the reload/worker/deploy specs. Without them those specs
# skip with a message (deploy) or fall back to a Lua request loop (reload).
# procps: pgrep in the worker specs (minimal Debian images lack it);
# ca-certificates: the bundle http.fetch verifies HTTPS against by default.
# libnghttp2-dev: HTTP/2 framing; zlib1g-dev: gzip; libargon2-dev: Argon2id
# password hashing (the reference implementation); media-types: /etc/mime.types
# for static files. redis-server, postgresql: real servers the specs start on
# free loopback ports (and stop). python3-websockets, python3-h2,
# nghttp2-client: third-party WebSocket and HTTP/2 peers in the specs and in
# bench/soak.sh (Debian's /usr/bin/python3 sees the python3-* packages);
# python3-h11: the strict HTTP/1.1 parser spec/h11_diff_spec.lua compares with.
PKGS="cmake make gcc clang libclang-rt-14-dev pkg-config \
liblua5.4-dev lua5.4 libev-dev libmbedtls-dev node-llhttp libnghttp2-dev zlib1g-dev libargon2-dev \
media-types lua-busted lua-cjson lua-socket curl openssl procps ca-certificates haproxy wrk \
redis-server postgresql python3 python3-websockets python3-h2 python3-h11 nghttp2-client"
if [ "$1" = "--bench" ]; then
    # golang-github-*: the Go peer of bench/tfb, built in GOPATH mode from
    # Debian's sources (no module download); gnuplot-nox: its charts.
    PKGS="$PKGS nginx-light libnginx-mod-http-lua golang-go h2o valgrind postgresql-contrib nodejs \
golang-github-jackc-pgx-v4-dev golang-github-gomodule-redigo-dev gnuplot-nox"
    # A nodejs from elsewhere (NodeSource) ships its own npm and conflicts
    # with Debian's package: ask for npm only when there is none.
    command -v npm >/dev/null 2>&1 || PKGS="$PKGS npm"
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
