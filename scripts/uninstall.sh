#!/bin/sh
# `make uninstall`: removes what the last install from build folder $1 put in
# place (CMake lists every file it wrote in install_manifest.txt, without
# DESTDIR: give the same DESTDIR as the install), then the folders of
# moonhttp's own that are left empty. The
# starter app (etc/moonhttp/app.lua) stays when it was edited: it is the
# user's configuration by then, and the script says so.
set -e
build=${1:-build}
manifest="$build/install_manifest.txt"
if [ ! -f "$manifest" ]; then
    echo "uninstall: no $manifest (nothing was installed from $build)" >&2
    exit 1
fi
while IFS= read -r f || [ -n "$f" ]; do  # CMake ends the list without a newline
    f="$DESTDIR$f"
    case "$f" in
    */etc/moonhttp/app.lua)
        if [ -f "$f" ] && ! cmp -s "$f" "$build/app.lua"; then
            echo "uninstall: kept $f (edited since it was installed)"
            continue
        fi ;;
    esac
    rm -f "$f"
done < "$manifest"
# Deepest first (a reverse sort puts a/b/c before a/b), each up to the first
# folder that is not moonhttp's own or not empty.
sed 's|/[^/]*$||' "$manifest" | sort -ur | while IFS= read -r d || [ -n "$d" ]; do
    d="$DESTDIR$d"
    while :; do
        case "$d" in */moonhttp|*/moonhttp/*) ;; *) break ;; esac
        rmdir "$d" 2>/dev/null || break
        d=${d%/*}
    done
done
echo "uninstall: removed the files listed in $manifest${DESTDIR:+ under $DESTDIR}"
