#!/bin/sh
# Each Mbed TLS option of scripts/mbedtls_user_config.h measured on and off:
# for every variant below, scripts/deps.sh builds Mbed TLS with the
# repository's configuration plus the variant's lines (MH_MBEDTLS_CONFIG,
# MH_MBEDTLS_BUILD: nothing in .deps/mbedtls-3.6 changes), moonhttp is built
# against it, and bench/tls/callgrind.sh counts the server's instructions per
# full and resumed TLS 1.3 handshake and per full TLS 1.2 one. Also the
# binary's code size (text), and with IDLE=1 the idle memory per TLS 1.3
# connection (bench/tls/idle_mem.sh, N connections).
#
#   bench/tls/options.sh [VARIANT...]      (default: all; env N, IDLE, WORK)
#
# A variant is a name and the lines appended to the configuration, "name|line;line".
set -eu
cd "$(dirname "$0")/../.."
ROOT=$(pwd)
WORK=${WORK:-/tmp/mh-tls-options}
N=${N:-20}
mkdir -p "$WORK"
cp scripts/mbedtls_user_config.h "$WORK/base.h" # the configuration as the run started
ALL="repository|
no-everest|#undef MBEDTLS_ECDH_VARIANT_EVEREST_ENABLED
p256m|#define MBEDTLS_PSA_P256M_DRIVER_ENABLED
p256m-signing|#define MBEDTLS_PSA_P256M_DRIVER_ENABLED;#define MBEDTLS_USE_PSA_CRYPTO;#undef MBEDTLS_ECDSA_DETERMINISTIC
use-psa|#define MBEDTLS_USE_PSA_CRYPTO
no-threading|#undef MBEDTLS_THREADING_C;#undef MBEDTLS_THREADING_PTHREAD
window-2|#undef MBEDTLS_ECP_WINDOW_SIZE;#define MBEDTLS_ECP_WINDOW_SIZE 2
window-6|#undef MBEDTLS_ECP_WINDOW_SIZE;#define MBEDTLS_ECP_WINDOW_SIZE 6
no-fixed-point|#undef MBEDTLS_ECP_FIXED_POINT_OPTIM;#define MBEDTLS_ECP_FIXED_POINT_OPTIM 0
no-aesni|#undef MBEDTLS_AESNI_C
no-asm|#undef MBEDTLS_HAVE_ASM;#undef MBEDTLS_AESNI_C
variable-buffers|#define MBEDTLS_SSL_VARIABLE_BUFFER_LENGTH"
if [ $# -gt 0 ]; then
    want=" $* "
    VARIANTS=$(echo "$ALL" | while IFS= read -r v; do case "$want" in *" ${v%%|*} "*) echo "$v" ;; esac; done)
else
    VARIANTS=$ALL
fi
echo "| variant | full TLS 1.3 | resumed TLS 1.3 | full TLS 1.2 | moonhttp text bytes |"
echo "|---|---:|---:|---:|---:|"
echo "$VARIANTS" | while IFS= read -r v; do
    name=${v%%|*}
    lines=${v#*|}
    dir="$WORK/$name"
    mkdir -p "$dir"
    { cat "$WORK/base.h"; echo "$lines" | tr ';' '\n'; } >"$dir/config.h"
    MH_MBEDTLS_CONFIG="$dir/config.h" MH_MBEDTLS_BUILD="$dir/mbedtls" sh scripts/deps.sh >"$dir/deps.log" 2>&1 ||
        { cat "$dir/deps.log" >&2; exit 1; }
    cmake -S . -B "$dir/build" -DCMAKE_BUILD_TYPE=Release -DMH_MBEDTLS_BUILD="$dir/mbedtls" \
        -DMH_MBEDTLS_CONFIG="$dir/config.h" >"$dir/cmake.log" 2>&1 || { cat "$dir/cmake.log" >&2; exit 1; }
    cmake --build "$dir/build" -j2 --target moonhttp >>"$dir/cmake.log" 2>&1 || { tail -30 "$dir/cmake.log" >&2; exit 1; }
    N=$N OUT="$dir/cg" sh bench/tls/callgrind.sh "$dir/build/moonhttp" >"$dir/callgrind.txt" 2>&1 ||
        { cat "$dir/callgrind.txt" >&2; exit 1; }
    full13=$(grep '^full TLS 1.3:' "$dir/callgrind.txt" | sed 's/^[^:]*: \([0-9]*\).*/\1/')
    res13=$(grep '^resumed TLS 1.3:' "$dir/callgrind.txt" | sed 's/^[^:]*: \([0-9]*\).*/\1/')
    full12=$(grep '^full TLS 1.2:' "$dir/callgrind.txt" | sed 's/^[^:]*: \([0-9]*\).*/\1/')
    text=$(size "$dir/build/moonhttp" | awk 'NR == 2 { print $1 }')
    idle=
    if [ -n "${IDLE:-}" ]; then
        idle=" $(N=${IDLE_N:-500} sh bench/tls/idle_mem.sh "$dir/build/moonhttp" 2>&1 | grep '^moonhttp' | sed 's/.*, //')"
    fi
    echo "| $name | $full13 | $res13 | $full12 | $text |$idle"
done
