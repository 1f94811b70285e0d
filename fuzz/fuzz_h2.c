/*
 * libFuzzer target over the HTTP/2 connection path: the input is what a
 * client sends after the connection preface (frames, HPACK blocks), on a
 * real socketpair connection, through h2c detection, nghttp2, the streams'
 * request ops, the router and the Lua handlers of fuzz/app.lua. The harness
 * is fuzz_http1.c's with the preface written first; the first input byte
 * still picks the read size. Seeds: fuzz/corpus_h2 (made by
 * fuzz/h2_seeds.py).
 */
#define MH_FUZZ_PREFIX "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
#include "fuzz_http1.c"
