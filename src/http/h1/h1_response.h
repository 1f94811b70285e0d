#ifndef MH_H1_RESPONSE_H
#define MH_H1_RESPONSE_H
/*
 * The HTTP/1 serializer: a response model (response.h) as an HTTP/1 head
 * (status line, the fields mh_response_fields chose, Date, the pairs,
 * framing) and its staged body moved to the wire queue. Chunked encoding is
 * applied here, as an output step, never stored in the model. A response
 * whose handler finishes before its head was sent gets Content-Length; one
 * that was flushed earlier is chunked (HTTP/1.1) or close-delimited (1.0).
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "outq.h"
#include "response.h"

/* What an HTTP/1 head depends on besides the response itself. */
struct mh_h1_head_ctx {
    const char *date_line; /* "Date: ...\r\n" */
    size_t date_len;
    uint8_t http_minor;
    bool head_method; /* no body bytes on the wire */
    bool keep_alive;  /* the connection stays open after this response */
    bool upgrade;     /* a 101: "Connection: Upgrade" (the stream switches protocols) */
};

/*
 * Appends the head (if not sent) and the staged body to out, chunk-framed
 * when the response streams. With `complete`, the handler is done: a head
 * not yet sent carries the exact Content-Length, a chunked body gets its
 * terminator. Body bytes of a HEAD or bodyless response are dropped
 * (released). -1 on OOM.
 */
int mh_h1_response_emit(struct mh_response *r, struct mh_outq *out,
                        const struct mh_h1_head_ctx *ctx, bool complete);

/*
 * A complete short response (errors, before any handler) with the given
 * body and optional extra header lines ("Allow: GET\r\n"). -1 on OOM.
 */
int mh_h1_response_simple(struct mh_outq *out, int status, const char *extra, const char *body,
                          const struct mh_h1_head_ctx *ctx);

#endif
