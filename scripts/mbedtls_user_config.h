/* moonhttp's changes to Mbed TLS 3.6's default configuration
 * (include/mbedtls/mbedtls_config.h of its release), read after it as
 * MBEDTLS_USER_CONFIG_FILE. scripts/deps.sh builds .deps/mbedtls-3.6 with this
 * file; CMakeLists.txt compiles moonhttp with the same define and refuses a
 * .deps/mbedtls-3.6 built from another version of it (the structures' layout
 * depends on these options). Each option says what it was measured to give:
 * bench/TLS.md has the commands and the whole table. */
#ifndef MH_MBEDTLS_USER_CONFIG_H
#define MH_MBEDTLS_USER_CONFIG_H

/* The worker's thread pool (src/base/workpool.c: PBKDF2 for passwords) calls
 * Mbed TLS beside the event loop, which shares PSA's key store and random
 * generator: they need their locks. Debian's build has them too. */
#define MBEDTLS_THREADING_C
#define MBEDTLS_THREADING_PTHREAD

#endif
