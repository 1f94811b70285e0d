/* moonhttp's changes to Mbed TLS 3.6's default configuration
 * (include/mbedtls/mbedtls_config.h of its release), read after it as
 * MBEDTLS_USER_CONFIG_FILE. scripts/deps.sh builds .deps/mbedtls-3.6 with this
 * file; CMakeLists.txt compiles moonhttp with the same define and refuses a
 * .deps/mbedtls-3.6 built from another version of it (the structures' layout
 * depends on these options).
 *
 * Each option says what it was measured to give: the server's instructions
 * per handshake (bench/tls/callgrind.sh: moonhttp, ECDSA P-256 certificate,
 * Python's ssl client = OpenSSL's defaults, X25519 key share), each option
 * on and off with bench/tls/options.sh; bench/TLS.md has the table, the timed
 * runs against nginx and the profile. Options measured and left at Mbed
 * TLS's default are there too, with why. */
#ifndef MH_MBEDTLS_USER_CONFIG_H
#define MH_MBEDTLS_USER_CONFIG_H

/* The worker's thread pool (src/base/workpool.c) runs PBKDF2 beside the event
 * loop, and Debian's build has the locks too. Their cost per handshake is
 * the no-threading row of bench/TLS.md (bench/tls/options.sh no-threading). */
#define MBEDTLS_THREADING_C
#define MBEDTLS_THREADING_PTHREAD

/* X25519 from Project Everest (HACL*). TLS 1.3's key agreement goes through
 * PSA, whose ECDH (library/psa_crypto_ecp.c, mbedtls_psa_key_agreement_ecdh)
 * sets up an mbedtls_ecdh_context that ecdh.c hands to Everest for
 * Curve25519; TLS 1.2's ECDHE uses it for both halves. PSA's key generation
 * (the server's public share) stays on ecp.c's Montgomery ladder. OpenSSL,
 * curl and browsers offer X25519 first, and TLS 1.3 resumption (psk_dhe_ke)
 * does an ECDHE too. Server instructions per handshake, off -> on: full TLS
 * 1.3 20,475,922 -> 13,583,668; resumed TLS 1.3 16,832,130 -> 9,822,755;
 * full TLS 1.2 20,314,156 -> 6,754,621; code +10 KB. */
#define MBEDTLS_ECDH_VARIANT_EVEREST_ENABLED

/* Left off, measured: MBEDTLS_PSA_P256M_DRIVER_ENABLED (p256-m). Alone it
 * changes nothing here (13,595,395 per full TLS 1.3 handshake: the key
 * exchange is X25519, and the certificate's signature is deterministic
 * ECDSA, which p256-m does not do). With MBEDTLS_USE_PSA_CRYPTO and
 * randomized ECDSA, so that it signs, a full handshake costs 37,989,863:
 * p256-m's 32-bit field code takes 27.7 M instructions per signature against
 * 3.8 M for ecp.c's fixed-point comb on x86-64. */

#endif
