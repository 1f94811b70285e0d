#!/bin/sh
# Checks a built moonhttp .deb without installing it: control fields, the
# files it ships and where, that /etc/moonhttp/app.lua is a conffile, that
# the maintainer scripts create the user and enable the service, and that
# systemd-analyze accepts the unit. Usage: scripts/check_deb.sh moonhttp_*.deb
set -eu
deb=$1
fail() { echo "check_deb: $*" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

info=$(dpkg-deb -I "$deb")
for f in "Package: moonhttp" "Depends: .*lua-cjson" "Depends: .*adduser" "Depends: .*libev4"; do
    echo "$info" | grep -q "$f" || fail "control lacks $f"
done
list=$(dpkg-deb -c "$deb")
for f in ./usr/bin/moonhttp ./usr/share/lua/5.4/moonhttp/test.lua ./usr/share/lua/5.4/moonhttp/init.lua \
    ./usr/share/lua/5.4/moonhttp/pg/proto.lua ./usr/share/man/man1/moonhttp.1.gz \
    ./usr/share/doc/moonhttp/examples/api.lua ./usr/share/moonhttp/meta/moonhttp/init.lua \
    ./lib/systemd/system/moonhttp.service ./lib/systemd/system/moonhttp.socket ./etc/moonhttp/app.lua; do
    echo "$list" | grep -q " $f\$" || fail "$f is not in the package"
done

# docs/ (dh_compress gzips the pages over 4 kB, as Debian policy asks)
echo "$list" | grep -Eq " ./usr/share/doc/moonhttp/reference/settings.md(.gz)?$" ||
    fail "docs/reference/settings.md is not in the package"

dpkg-deb -e "$deb" "$tmp/control"
grep -qx /etc/moonhttp/app.lua "$tmp/control/conffiles" || fail "/etc/moonhttp/app.lua is not a conffile"
grep -q "adduser --system" "$tmp/control/postinst" || fail "postinst does not create the moonhttp user"
grep -q "deb-systemd-helper enable moonhttp.service\|deb-systemd-helper.*moonhttp.service" "$tmp/control/postinst" ||
    fail "postinst does not enable moonhttp.service"

dpkg-deb -x "$deb" "$tmp/root"
unit=$tmp/root/lib/systemd/system/moonhttp.service
grep -q "^Type=notify" "$unit" || fail "the unit is not Type=notify"
grep -q "^ExecStart=/usr/bin/moonhttp /etc/moonhttp/app.lua" "$unit" || fail "ExecStart is not the installed app"
# systemd-analyze looks for ExecStart's binary on this machine: point it into the
# extracted root (and for the man page, which is not installed: --man=no).
sed "s#/usr/bin/moonhttp#$tmp/root/usr/bin/moonhttp#g" "$unit" >"$tmp/moonhttp.service"
cp "$tmp/root/lib/systemd/system/moonhttp.socket" "$tmp/moonhttp.socket"
out=$(systemd-analyze verify --man=no "$tmp/moonhttp.service" "$tmp/moonhttp.socket" 2>&1) ||
    fail "systemd-analyze verify: $out"
[ -z "$out" ] || fail "systemd-analyze verify: $out"
"$tmp/root/usr/bin/moonhttp" --check "$tmp/root/etc/moonhttp/app.lua" >/dev/null || fail "the starter app does not load"
echo "check_deb: $deb ok"
