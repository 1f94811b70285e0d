#ifndef MH_H1_IMPL_H
#define MH_H1_IMPL_H
/*
 * The HTTP/1 connection's fields: private to h1_conn.c and http_parse.c
 * (the llhttp callbacks fill the request head in place). It hangs off the
 * neutral connection (conn->proto_state) and reaches it through `conn`.
 */
#include <llhttp.h>

#include "conn_impl.h"
#include "req.h"
#include "req_policy.h"

enum mh_h1_state {
    MH_H1_IDLE,    /* between requests (or new), nothing of a head yet */
    MH_H1_HEAD,    /* reading a request head */
    MH_H1_HANDLER, /* the request is being answered */
    MH_H1_DRAIN,   /* response done; discarding the rest of the request body */
};

struct mh_h1 {
    struct mh_req req; /* the request being answered: the ops find the state from it */
    struct mh_conn *conn;
    enum mh_h1_state state;
    /* the request's deadlines (req_policy.h); the read deadline runs from the head's first
     * byte, the body deadline only while the handler waits for body bytes */
    struct mh_req_clock clock;

    /* input */
    struct mh_buf in;
    size_t req_start; /* offset in `in` of the current request */
    size_t head_len;  /* bytes of the head, once parsed */
    size_t parse_pos; /* bytes of `in` given to the parser */
    llhttp_t parser;
    int pause; /* why the parser paused: MH_PAUSE_* */
    bool last_was_value;
    bool url_done;
    unsigned long requests;

    /* request body */
    bool body_wanted;   /* a handler waits for body bytes */
    bool body_want_all; /* ...for all of them (req:body) rather than some */
    bool continue_sent; /* "100 Continue" went out */
    bool draining;      /* on_body discards */
    bool tunnel;        /* switched protocols (mh_req_ops.upgrade): raw bytes both ways */
    char *tunnel_head;  /* the head, copied out of `in` (idle tunnels hold no 16 KiB buffer) */
    size_t tunnel_mark; /* body bytes when the handler last asked: it waits for more */
    uint32_t chunk_ext_bytes; /* http_parse.c: extension bytes on this chunk-size line */
    int trailer_prev;         /* http_parse.c: the last trailer-section byte read, -1 outside it */
    /* http_parse.c: this request's method is not in llhttp's table (MH_METHOD_OTHER) */
    uint32_t other_method_off, other_method_len;

    bool in_handler;  /* a handler holds req (start .. finish) */
    bool close_after; /* close once the current response is written */
    bool processing;  /* inside the input loop (guards re-entry) */
};

static inline const char *mh_h1_head(const struct mh_h1 *c)
{
    return c->in.data + c->req_start;
}

#endif
