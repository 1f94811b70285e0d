#ifndef MH_UTF8_H
#define MH_UTF8_H
/*
 * Incremental UTF-8 validation (RFC 3629: no overlongs, no surrogates,
 * nothing above U+10FFFF), for WebSocket text messages that arrive in
 * fragments split anywhere, even inside a character. Start with state 0.
 */
#include <stdbool.h>
#include <stddef.h>

/*
 * Checks len more bytes. Returns false as soon as the bytes so far cannot
 * begin valid UTF-8. *state carries a partial character to the next call.
 */
bool mh_utf8_feed(unsigned *state, const unsigned char *p, size_t len);

/* True when the bytes fed so far end on a character boundary. */
static inline bool mh_utf8_complete(unsigned state)
{
    return state == 0;
}

#endif
