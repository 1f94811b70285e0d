#ifndef MH_RESPONSE_H
#define MH_RESPONSE_H
/*
 * A response being built: status, the handler's headers (kept serialized,
 * "Name: value\r\n", so the head is one copy), and body bytes staged until
 * the head is written. A response whose handler ends before the staged body
 * passes MH_RESPONSE_STREAM_AT is sent with Content-Length; otherwise, or
 * when the handler waits for something after writing, the head goes out
 * first and the body follows chunked (HTTP/1.1) or close-delimited (1.0).
 */
#include <stdbool.h>
#include <stdint.h>

#include "buf.h"

#define MH_RESPONSE_STREAM_AT (64 * 1024)

struct mh_response {
    int status;
    struct mh_buf headers; /* serialized handler headers */
    struct mh_buf body;    /* staged body bytes not yet in the output */
    uint64_t declared_length;
    uint64_t body_sent; /* body bytes moved to the output */
    bool has_length;    /* handler set Content-Length */
    bool has_type;      /* handler set Content-Type */
    bool has_server;    /* handler set Server */
    bool written;       /* res:write was called: head is fixed */
    bool head_sent;     /* head is in the output */
    bool chunked;
    bool close; /* handler asked for Connection: close */
};

/* What the head depends on besides the response itself. */
struct mh_head_ctx {
    const char *date_line; /* "Date: ...\r\n" */
    size_t date_len;
    uint8_t http_minor;
    bool head_method; /* no body bytes on the wire */
    bool keep_alive;  /* the connection stays open after this response */
};

void mh_response_reset(struct mh_response *r);
void mh_response_free(struct mh_response *r);

/*
 * Sets (replace = true) or adds a header. Returns NULL, or a static error
 * string when the name is not a token or the value has CR, LF or NUL, or a
 * framing header has a bad value. Connection and Content-Length are
 * interpreted, not copied.
 */
const char *mh_response_header(struct mh_response *r, const char *name, size_t nlen,
                               const char *value, size_t vlen, bool replace);

/* Whether a status forbids a body (1xx, 204, 304). */
bool mh_status_bodyless(int status);
/* "OK", "Not Found", ...; "Unknown" for codes without a reason phrase here. */
const char *mh_status_text(int status);

/*
 * Moves the head (if not sent) and the staged body into out. With
 * `complete`, the handler is done: a head not yet sent carries the exact
 * Content-Length and a chunked body gets its terminator. -1 on OOM.
 */
int mh_response_emit(struct mh_response *r, struct mh_buf *out, const struct mh_head_ctx *ctx,
                     bool complete);

/*
 * Writes a complete short response (errors, redirects) with the given body
 * and optional extra header lines ("Allow: GET\r\n"). -1 on OOM.
 */
int mh_response_simple(struct mh_buf *out, int status, const char *extra, const char *body,
                       const struct mh_head_ctx *ctx);

#endif
