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
# dpkg-dev, debhelper, fakeroot, lintian: `make deb` (debian/); dpkg-dev's
# dpkg-source also unpacks Mbed TLS's source package (below). systemd: its
# systemd-analyze checks the units (spec/deploy_spec.lua would be pending without it).
# strace: spec/client_watch_spec.lua counts the client's epoll_ctl calls.
# lua-filesystem: docs/guide/lua-libraries.md's example loads it (a Debian
# Lua library, as an app would), and spec/docs_spec.lua runs that example.
# lua-sec: moonhttp.test's TLS client (an app's https listeners, client
# certificates), which spec/app_test_spec.lua drives.
# pebble: Let's Encrypt's ACME test server, with pebble-challtestsrv in the
# same package as its DNS; spec/pebble_helper.lua starts both on free
# loopback ports so the automatic HTTPS specs get real certificates offline.
# It ships no certificate for its own HTTPS API: the helper makes one.
PKGS="cmake make gcc clang libclang-rt-14-dev pkg-config \
liblua5.4-dev lua5.4 libev-dev node-llhttp libnghttp2-dev zlib1g-dev libargon2-dev \
media-types lua-busted lua-cjson lua-socket lua-sec lua-filesystem curl openssl procps ca-certificates haproxy wrk \
redis-server postgresql python3 python3-websockets python3-h2 python3-h11 nghttp2-client \
dpkg-dev debhelper fakeroot lintian systemd strace pebble"
if [ "$1" = "--bench" ]; then
    # golang-github-*: the Go peer of bench/tfb, built in GOPATH mode from
    # Debian's sources (no module download); gnuplot-nox: its charts.
    PKGS="$PKGS nginx-light libnginx-mod-http-lua golang-go h2o valgrind postgresql-contrib nodejs \
golang-github-jackc-pgx-v4-dev golang-github-gomodule-redigo-dev gnuplot-nox"
    # A nodejs from elsewhere (NodeSource) ships its own npm and conflicts
    # with Debian's package: ask for npm only when there is none.
    command -v npm >/dev/null 2>&1 || PKGS="$PKGS npm"
fi
# Mbed TLS 3.6 (the LTS branch; TLS 1.3), built here from Debian 13's source
# package on every release (Debian 12 has only 2.28, out of support since
# 2024; Debian 13's libmbedtls-dev is built without the options moonhttp's
# handshakes and idle connections need), so Debian 12 and 13 run one build
# and one set of figures. Our configuration is scripts/mbedtls_user_config.h
# (each option with the measurement that chose it, bench/TLS.md): Mbed TLS's
# default configuration with those changes, built into .deps/mbedtls-3.6
# (headers, static libraries), which CMake links. Nothing on the system
# changes: apt reads a configuration of its own (Debian 13's source index
# only, lists and downloads under .deps/, signed by the archive keys Debian
# 12 already has), from the archive this machine's own apt sources name.
# The downloaded source stays in .deps/mbedtls-src, so a changed
# configuration rebuilds offline, and a present build of the same
# configuration is kept (builds stay offline). A security fix to 3.6:
# `MH_MBEDTLS_UPDATE=1 scripts/deps.sh` fetches trixie's current source.
# Building needs only make and a C compiler: the release's generated files
# are in the source (GEN_FILES unset: no Python or Perl); dpkg-source
# (dpkg-dev, above) unpacks the package. About 25 s of CPU, under two
# minutes on a loaded 2-core machine.
ROOT=$(cd "$(dirname "$0")/.." && pwd)
# MH_MBEDTLS_CONFIG and MH_MBEDTLS_BUILD build another configuration elsewhere
# (bench/tls/options.sh measures each option that way).
MBEDTLS_DIR=${MH_MBEDTLS_BUILD:-"$ROOT/.deps/mbedtls-3.6"}
MBEDTLS_SRC="$ROOT/.deps/mbedtls-src"
MBEDTLS_CONFIG=${MH_MBEDTLS_CONFIG:-"$ROOT/scripts/mbedtls_user_config.h"}
# Debian's own hardening flags (what its libmbedtls-dev was built with), so
# the options in our configuration are the only difference measured.
MBEDTLS_CFLAGS="-O2 -fstack-protector-strong -fstack-clash-protection -fcf-protection -D_FORTIFY_SOURCE=2"
# The archive: the first URI of this machine's apt sources that serves its
# own release (apt's own reading of sources.list and sources.list.d, both
# formats; without the Release files, so before any apt-get update too), as
# a Debian mirror serves every release. MH_DEBIAN_ARCHIVE
# overrides it (a machine whose sources name only a snapshot or a proxy).
debian_archive() {
    if [ -n "${MH_DEBIAN_ARCHIVE:-}" ]; then
        echo "$MH_DEBIAN_ARCHIVE"
        return
    fi
    codename=$(. "${MH_OS_RELEASE:-/etc/os-release}" && echo "${VERSION_CODENAME:-}")
    apt-get indextargets --no-release-info --format '$(REPO_URI) $(RELEASE) $(TARGET_OF)' 2>/dev/null |
        awk -v c="$codename" '$2 == c && ($3 == "deb" || $3 == "deb-src") { print $1; exit }'
}

# --mbedtls-archive: says which archive Mbed TLS's source would come from, and stops.
if [ "$1" = "--mbedtls-archive" ]; then
    archive=$(debian_archive)
    [ -n "$archive" ] || { echo "deps: no Debian archive for this release in the apt sources; set MH_DEBIAN_ARCHIVE to one" >&2; exit 1; }
    echo "$archive"
    exit 0
fi

mbedtls_build() {
    # What a build is made of: the source package, our configuration, this
    # script (the flags, what is installed).
    made_of="$(cd "$MBEDTLS_SRC" 2>/dev/null && ls -- *.dsc) $(cat "$MBEDTLS_CONFIG" "$0" | sha256sum | cut -c1-16)"
    if [ -z "${MH_MBEDTLS_UPDATE:-}" ] && [ -f "$MBEDTLS_DIR/.made-of" ] &&
        [ "$(cat "$MBEDTLS_DIR/.made-of")" = "$made_of" ]; then
        return 0
    fi
    if [ -n "${MH_MBEDTLS_UPDATE:-}" ] || ! ls "$MBEDTLS_SRC"/*.dsc >/dev/null 2>&1; then
        mbedtls_fetch
        made_of="$(cd "$MBEDTLS_SRC" && ls -- *.dsc) $(cat "$MBEDTLS_CONFIG" "$0" | sha256sum | cut -c1-16)"
    fi
    dsc=$(ls "$MBEDTLS_SRC"/*.dsc)
    echo "building Mbed TLS from $(basename "$dsc") with $MBEDTLS_CONFIG into $MBEDTLS_DIR"
    work="$MBEDTLS_DIR.build"
    rm -rf "$work" "$MBEDTLS_DIR.new"
    mkdir -p "$work"
    dpkg-source -x "$dsc" "$work/src" >"$work/log" 2>&1 || { cat "$work/log" >&2; exit 1; }
    cp "$MBEDTLS_CONFIG" "$work/src/include/mbedtls/moonhttp_user_config.h"
    # The library only (no programs, no tests). MBEDTLS_USER_CONFIG_FILE is
    # read after the default configuration; CMakeLists.txt compiles moonhttp
    # with the same define.
    make -C "$work/src/library" -j"$(nproc)" static \
        CFLAGS="$MBEDTLS_CFLAGS -DMBEDTLS_USER_CONFIG_FILE='\"mbedtls/moonhttp_user_config.h\"'" \
        >"$work/log" 2>&1 || { tail -40 "$work/log" >&2; echo "deps: building Mbed TLS failed (log: $work/log)" >&2; exit 1; }
    mkdir -p "$MBEDTLS_DIR.new/include" "$MBEDTLS_DIR.new/lib"
    cp -r "$work/src/include/mbedtls" "$work/src/include/psa" "$MBEDTLS_DIR.new/include/"
    # ecdh.h includes Everest's header where X25519 comes from it (the configuration).
    cp -r "$work/src/3rdparty/everest/include/everest" "$MBEDTLS_DIR.new/include/"
    cp "$work/src/library"/libmbedcrypto.a "$work/src/library"/libmbedx509.a \
        "$work/src/library"/libmbedtls.a "$MBEDTLS_DIR.new/lib/"
    echo "$made_of" >"$MBEDTLS_DIR.new/.made-of"
    rm -rf "$MBEDTLS_DIR" "$work"
    mv "$MBEDTLS_DIR.new" "$MBEDTLS_DIR" # whole or not at all: a failed build leaves the old one
}

# Debian 13's mbedtls source package (.dsc, upstream tarball, Debian's
# changes), its hashes checked by apt against the signed source index.
mbedtls_fetch() {
    archive=$(sh "$0" --mbedtls-archive)
    apt_dir="$ROOT/.deps/apt"
    mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial"
    echo "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $archive trixie main" \
        >"$apt_dir/sources.list"
    # Only this configuration: no system sources, lists or package cache are read or written.
    set -- -o "Dir::Etc::SourceList=$apt_dir/sources.list" -o Dir::Etc::SourceParts=/dev/null \
        -o "Dir::State::Lists=$apt_dir/lists" -o "Dir::Cache=$apt_dir/cache" \
        -o Dir::Cache::pkgcache= -o Dir::Cache::srcpkgcache= -o Dir::Etc::Preferences=/dev/null \
        -o Dir::Etc::PreferencesParts=/dev/null -o APT::Sandbox::User=root
    apt-get "$@" update -qq
    version=$(apt-cache "$@" showsrc --only-source mbedtls | sed -n 's/^Version: //p' | sort -V | tail -1)
    case "$version" in
    3.6.*) ;;
    *) echo "deps: trixie's mbedtls source is '$version', not 3.6" >&2; exit 1 ;;
    esac
    echo "fetching the mbedtls $version source package from Debian 13 ($archive)"
    rm -rf "$MBEDTLS_SRC.new"
    mkdir -p "$MBEDTLS_SRC.new"
    (cd "$MBEDTLS_SRC.new" && apt-get "$@" source --download-only -qq "mbedtls=$version")
    rm -rf "$MBEDTLS_SRC"
    mv "$MBEDTLS_SRC.new" "$MBEDTLS_SRC"
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
mbedtls_build

