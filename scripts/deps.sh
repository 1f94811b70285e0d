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
# dpkg-dev, debhelper, fakeroot, lintian: `make deb` (debian/). systemd: its
# systemd-analyze checks the units (spec/deploy_spec.lua would be pending without it).
# strace: spec/client_watch_spec.lua counts the client's epoll_ctl calls.
# lua-filesystem: docs/guide/lua-libraries.md's example loads it (a Debian
# Lua library, as an app would), and spec/docs_spec.lua runs that example.
PKGS="cmake make gcc clang libclang-rt-14-dev pkg-config \
liblua5.4-dev lua5.4 libev-dev node-llhttp libnghttp2-dev zlib1g-dev libargon2-dev \
media-types lua-busted lua-cjson lua-socket lua-filesystem curl openssl procps ca-certificates haproxy wrk \
redis-server postgresql python3 python3-websockets python3-h2 python3-h11 nghttp2-client \
dpkg-dev debhelper fakeroot lintian systemd strace"
if [ "$1" = "--bench" ]; then
    # golang-github-*: the Go peer of bench/tfb, built in GOPATH mode from
    # Debian's sources (no module download); gnuplot-nox: its charts.
    PKGS="$PKGS nginx-light libnginx-mod-http-lua golang-go h2o valgrind postgresql-contrib nodejs \
golang-github-jackc-pgx-v4-dev golang-github-gomodule-redigo-dev gnuplot-nox"
    # A nodejs from elsewhere (NodeSource) ships its own npm and conflicts
    # with Debian's package: ask for npm only when there is none.
    command -v npm >/dev/null 2>&1 || PKGS="$PKGS npm"
fi
# Mbed TLS 3.6 (the LTS branch; TLS 1.3). Debian 13 ships it: use the system
# package. Debian 12 has only 2.28 (out of support since 2024, no TLS 1.3), so
# mbedtls_from_trixie below takes Debian 13's libmbedtls-dev and unpacks it
# into .deps/mbedtls in the source tree, where CMake looks first; moonhttp
# links its static libraries. Why not apt pinning: installing 3.6's -dev
# package replaces 2.28's headers for every build on the machine (a checkout of
# an older moonhttp, or anything else built against 2.28, would break), and a
# trixie source in the system's apt lists is one mistyped pin away from a
# partial upgrade to Debian 13. Unpacked into the tree, nothing on the system
# changes: the download uses an apt configuration of its own (trixie only,
# lists and cache under .deps/apt, signed by the archive keys Debian 12
# already has). The cost: security fixes to 3.6 need `scripts/deps.sh` and a
# rebuild: `MH_MBEDTLS_UPDATE=1 scripts/deps.sh` fetches trixie's current
# one (otherwise a present .deps/mbedtls is kept, so builds stay offline).
ROOT=$(cd "$(dirname "$0")/.." && pwd)
MBEDTLS_DIR="$ROOT/.deps/mbedtls"
# Which release: /etc/os-release, not /etc/debian_version, which reads
# "trixie/sid" (not a number) on testing and unstable. Debian 12 says
# VERSION_ID="12", VERSION_CODENAME=bookworm; Debian 13 "13"/trixie;
# testing and sid have no VERSION_ID and the next release's codename (sid
# may say "sid"). Only bookworm lacks 3.6: every other release takes the
# system's libmbedtls-dev. MH_OS_RELEASE names another file (scripts' test).
is_bookworm() (
    f=${MH_OS_RELEASE:-/etc/os-release}
    [ -r "$f" ] || exit 1
    VERSION_ID="" VERSION_CODENAME=""
    . "$f"
    [ "$VERSION_ID" = 12 ] || [ "$VERSION_CODENAME" = bookworm ]
)
if is_bookworm; then
    BOOKWORM=1
else
    PKGS="$PKGS libmbedtls-dev"
    BOOKWORM=""
fi
# --mbedtls-source: says where Mbed TLS 3.6 would come from here, and stops.
if [ "$1" = "--mbedtls-source" ]; then
    [ -n "$BOOKWORM" ] && echo "unpack Debian 13's libmbedtls-dev into .deps/mbedtls" || echo "system libmbedtls-dev"
    exit 0
fi

mbedtls_from_trixie() {
    [ -f "$MBEDTLS_DIR/.version" ] && [ -z "$MH_MBEDTLS_UPDATE" ] && return 0
    apt_dir="$ROOT/.deps/apt"
    mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial" "$apt_dir/debs"
    echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian trixie main" \
        >"$apt_dir/sources.list"
    # Only this configuration: no system sources, lists or package cache are read or written.
    set -- -o "Dir::Etc::SourceList=$apt_dir/sources.list" -o Dir::Etc::SourceParts=/dev/null \
        -o "Dir::State::Lists=$apt_dir/lists" -o "Dir::Cache=$apt_dir/cache" \
        -o Dir::Cache::pkgcache= -o Dir::Cache::srcpkgcache= -o Dir::Etc::Preferences=/dev/null \
        -o Dir::Etc::PreferencesParts=/dev/null -o APT::Sandbox::User=root
    apt-get "$@" update -qq
    version=$(apt-cache "$@" show --no-all-versions libmbedtls-dev | sed -n 's/^Version: //p')
    case "$version" in
    3.6.*) ;;
    *) echo "deps: trixie's libmbedtls-dev is '$version', not 3.6" >&2; exit 1 ;;
    esac
    [ -f "$MBEDTLS_DIR/.version" ] && [ "$(cat "$MBEDTLS_DIR/.version")" = "$version" ] && return 0
    echo "fetching libmbedtls-dev $version from Debian 13 into $MBEDTLS_DIR"
    rm -f "$apt_dir/debs"/*.deb
    (cd "$apt_dir/debs" && apt-get "$@" download -qq "libmbedtls-dev=$version")
    rm -rf "$MBEDTLS_DIR.new"
    dpkg-deb -x "$apt_dir/debs"/libmbedtls-dev_*.deb "$MBEDTLS_DIR.new"
    echo "$version" >"$MBEDTLS_DIR.new/.version"
    rm -rf "$MBEDTLS_DIR"
    mv "$MBEDTLS_DIR.new" "$MBEDTLS_DIR" # whole or not at all: a broken download leaves the old one
}

missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
done
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO=sudo
if [ -n "$missing" ]; then
    echo "installing:$missing"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing
fi
[ -n "$BOOKWORM" ] && mbedtls_from_trixie
exit 0
