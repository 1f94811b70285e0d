#ifndef MH_REQ_H
#define MH_REQ_H
/*
 * The protocol-neutral request: what every handler (Lua task, C handler)
 * sees, whatever protocol carried it. Two protocols implement its ops: the
 * HTTP/1 connection (h1/h1_conn.c, one request at a time) and the HTTP/2
 * stream (h2/h2_stream.c, many per connection), so nothing here assumes one
 * request per connection.
 *
 *   protocol (h1/, h2/)  --parses-->  struct mh_req  --start-->  handler
 *                        <--ops-----                 <--mh_req_*--
 *
 * The request holds
 * - the head (struct mh_request: method, target, path, query, host, headers
 *   as name/value slices, version), resolved against mh_req_head(r);
 * - the request body as the protocol decodes it (body, body_state), read
 *   with mh_req_want_body;
 * - the response being built (struct mh_response: status, headers as
 *   name/value pairs, the staged body queue). Nothing is serialized here: the
 *   protocol turns status + pairs into an HTTP/1 head or HPACK headers when
 *   the handler sends;
 * - the routing result (route, captures, allow), filled by mh_dispatch;
 * - the handler serving it, its per-request state, and the owner hook (the
 *   layer that started the request: it pins what the handler needs, e.g. a
 *   Lua generation, and unpins it in on_end).
 *
 * Lifetime and references. The protocol owns the struct. It stays valid from
 * the handler's start until mh_req_finish() returns, and until on_end() is
 * called, even if the client is gone meanwhile (then r->closed is true and
 * output is dropped). A handler must not keep the pointer past finish.
 *
 * Flushing policy is the handler's (above the protocol): mh_req_write only
 * stages bytes; mh_req_flush commits the response head and moves the staged
 * body to the protocol (the body is then framed as a stream: chunked on
 * HTTP/1.1, close-delimited on 1.0); mh_req_finish completes it (a head not
 * sent yet gets the exact Content-Length).
 *
 * Output filters (struct mh_ofilter) sit between the staged body and the
 * protocol: each gets the head once before it is serialized and every
 * piece of body on its way out, so a gzip filter works the same for a Lua
 * response and a C handler's file.
 */
#include <ev.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "handler.h"
#include "transport.h"
#include "outq.h"
#include "request_head.h"
#include "response.h"
#include "router.h"

struct mh_req;
struct mh_ofilter;

/* Longest request id taken from a client's header; longer ones are replaced. */
#define MH_REQ_ID_MAX 128
/* Output queued beyond this (wire + staged) means a writer should wait (mh_req_output_high). */
#define MH_REQ_HIGH_WATER (256 * 1024)
/* ...until it falls below this; then the handler's on_writable is called. */
#define MH_REQ_LOW_WATER (64 * 1024)

enum mh_body_state {
    MH_BODY_NONE,      /* no body, or all of it parsed */
    MH_BODY_MORE,      /* more body bytes to come */
    MH_BODY_TOO_LARGE, /* past max_body_bytes: the response becomes 413 */
    MH_BODY_BAD,       /* malformed framing: the server answers 400 itself */
    MH_BODY_TIMEOUT,   /* read_timeout passed while the body was still coming */
    MH_BODY_STALLED,   /* body_timeout: no bytes while the server waited (408, or cut) */
    MH_BODY_CLOSED,    /* the peer went away before the end of the body */
};

/*
 * What a protocol implements. Handlers call the mh_req_* wrappers below, not
 * these. None of them yields or calls the handler back synchronously, except
 * where noted (on_abort from send).
 */
struct mh_req_ops {
    const char *proto; /* "HTTP/1.1", "HTTP/1.0"; for req.proto, logs */
    /* The bytes the head's slices index. Stable while the handler runs code
     * (it may move between callbacks: keep slices, not pointers). */
    const char *(*head)(const struct mh_req *r);
    /*
     * Serializes the head (first call) and moves r->res.body (after the
     * filters ran) to the wire. complete: the response ends here, and the
     * request is done (the protocol calls on_end and moves on).
     */
    void (*send)(struct mh_req *r, bool complete);
    /*
     * Makes body bytes available in r->body: some (all = false) or the whole
     * body (all = true). Answers "100 Continue" first when the client waits
     * for it. Returns 1 when satisfied now (or the body ended / failed: see
     * body_state), 0 when the handler's on_body will be called.
     */
    int (*want_body)(struct mh_req *r, bool all);
    /* Bytes handed to the protocol and not yet written to the socket. */
    uint64_t (*pending)(const struct mh_req *r);
    /* Moves the read (body) or write (response) deadline to seconds from now; 0 = none. */
    void (*set_read_timeout)(struct mh_req *r, double seconds);
    void (*set_write_timeout)(struct mh_req *r, double seconds);
    /* Ends the stream now (a response cut off: HTTP/1 closes the connection). */
    void (*abort)(struct mh_req *r);
    /* "ip:port" of the client into buf. */
    const char *(*remote_addr)(const struct mh_req *r, char *buf, size_t len);
    /* The connection's byte stream (req:tls() asks it about TLS). */
    const struct mh_transport *(*transport)(const struct mh_req *r);
    /*
     * Switches protocols (RFC 9110 15.2.2), before the 101 head is sent: the
     * next flush sends the head as set, and from then on the stream carries
     * raw bytes both ways. Staged body bytes go out as they are (no framing);
     * every input byte after the head becomes body (r->body, body_state MORE
     * until the peer closes, then CLOSED; want_body is satisfied by bytes that
     * arrived since the call); the read and write deadlines are off
     * (send_timeout still cuts a peer that stopped reading); finishing closes
     * the stream. The head stays readable. Returns 0, or -1 when this stream
     * cannot switch (HTTP/1.0, a request with a body, head already sent).
     * HTTP/2 (RFC 8441): only a stream opened by an extended CONNECT
     * (head.connect_websocket) switches; its head is a 2xx, and the stream's
     * DATA carries the bytes both ways (the client's END_STREAM is the
     * peer's close). NULL in a protocol without upgrades.
     */
    int (*upgrade)(struct mh_req *r);
};

/*
 * Where routing sent a request: mh_dispatch writes it before the handler
 * starts, and handlers, logs and metrics read it. Not part of the parsed head,
 * which knows nothing of routes.
 */
struct mh_req_route {
    const struct mh_route *route; /* NULL: not routed (yet), or a 404/405 */
    int handler_id;               /* the route's, or -1 */
    const char *path;             /* what captures index: the head's path or `cleaned` */
    uint32_t path_len;
    uint32_t ncaptures;
    const char *allow; /* 405: "GET, HEAD" (for the app's method_not_allowed handler) */
    size_t allow_len;
    struct mh_buf cleaned; /* the cleaned path when rerouted (rare); memory kept across requests */
    /* captures[] (ncaptures counts them) and _allow are written before read */
    struct mh_route_capture captures[MH_ROUTE_MAX_WILDCARDS];
    char _allow[MH_ROUTE_ALLOW_MAX];
};

struct mh_req {
    const struct mh_req_ops *ops;
    struct mh_request head;     /* parsed head: slices into ops->head(r) */
    struct mh_req_route routed; /* set by mh_dispatch */
    struct mh_response res;     /* the response being built */
    ev_tstamp started;          /* loop time the head was complete */

    /* request body, decoded by the protocol */
    enum mh_body_state body_state;
    struct mh_buf body;     /* decoded body bytes not yet read by the handler */
    uint64_t body_received; /* body bytes seen so far */
    /*
     * This request's body limit (over it: MH_BODY_TOO_LARGE, and 413 when the
     * response has not started): max_body_bytes, set by the protocol when the
     * request starts, or mh_req_set_max_body. The protocol checks a declared
     * Content-Length against it when the body is first asked for (and sets
     * body_asked then), so a route may raise it before its first read.
     */
    uint64_t max_body;
    bool body_asked;

    /* set by the protocol */
    bool closed;      /* the stream is gone: output is dropped, on_abort was called */
    bool peer_closed; /* the client ended its side (HTTP/1 EOF) */

    /* the handler serving the request (set by mh_req_start) */
    const struct mh_handler *handler;
    void *handler_data; /* the handler's per-request state */

    /*
     * The layer that started the request (the app: lua/lua_handler.c, the
     * metrics listener) may pin what the handler needs and release it here.
     * Called once, after the response is complete or the stream aborted and
     * after the observers (access log, metrics) saw the request.
     */
    void (*on_end)(struct mh_req *r);
    void *owner;

    /* The request id (mh_req_id), made on first use: _id_len 0 until then. */
    char _id[MH_REQ_ID_MAX + 1];
    uint8_t _id_len;
    struct mh_ofilter *_filters; /* output filters, first applied first */
    bool _filters_headed;        /* on_head ran */
    struct mh_outq _filtered;    /* scratch: a filter's output */
};

/* Resolves a slice of the head. */
static inline const char *mh_req_head(const struct mh_req *r)
{
    return r->ops->head(r);
}

static inline const char *mh_req_slice(const struct mh_req *r, struct mh_slice s, size_t *len)
{
    *len = s.len;
    return mh_req_head(r) + s.off;
}

/* First value of header `name` (case-insensitive), or NULL. */
const char *mh_req_header(const struct mh_req *r, const char *name, size_t nlen, size_t *vlen);

/* Method name ("GET"). */
const char *mh_req_method(const struct mh_req *r);
/* The same, with its length. */
const char *mh_req_method_len(const struct mh_req *r, size_t *len);

/*
 * The request's id, the same on every call for one request: the value of
 * header `trusted` (a name, or NULL to trust none) when it is 1..128 of
 * [A-Za-z0-9._:/+=@-], else 32 random hex digits. Made on the first call
 * only, so a request nobody asks about costs nothing; the result is cached
 * in r (hence the cast inside: observers get a const request). NUL-ended.
 */
const char *mh_req_id(const struct mh_req *r, const char *trusted, size_t *len);

/* For the protocol: clears per-request state, keeping memory (pooled). */
void mh_req_reset(struct mh_req *r);
void mh_req_free(struct mh_req *r);

/* Hands r to handler h (the protocol or a dispatcher calls this). */
static inline void mh_req_start(struct mh_req *r, const struct mh_handler *h)
{
    r->handler = h;
    h->ops->start(h, r);
}

/* ---- response -------------------------------------------------------------- */

/* Status of the response; before the head is sent (else ignored: returns false). */
bool mh_req_set_status(struct mh_req *r, int status);

/*
 * Sets (replace) or adds a response header. NULL, or a static error string
 * (bad name, CR/LF/NUL in value, bad Content-Length, Transfer-Encoding,
 * head already sent: mh_req_err_head_sent).
 */
const char *mh_req_set_header(struct mh_req *r, const char *name, size_t nlen, const char *value,
                              size_t vlen, bool replace);
extern const char mh_req_err_head_sent[];

/*
 * Body output. All stage into r->res.body (copying, referencing, or as a
 * file range: see outq.h for the release contract); nothing is written until
 * mh_req_flush or mh_req_finish. On a closed request, bytes are dropped (a
 * reference/file is released at once) and mh_req_err_closed returned.
 * Otherwise NULL, or mh_req_err_nomem.
 */
static inline const char *mh_req_write(struct mh_req *r, const void *p, size_t n);
const char *mh_req_write_ref(struct mh_req *r, const char *p, size_t n, mh_chunk_release_fn release,
                             void *ud, uintptr_t token);
const char *mh_req_write_file(struct mh_req *r, int fd, off_t off, uint64_t len,
                              mh_chunk_release_fn release, void *ud, uintptr_t token);
extern const char mh_req_err_closed[];
extern const char mh_req_err_nomem[];

static inline const char *mh_req_write(struct mh_req *r, const void *p, size_t n)
{
    if (r->closed)
        return mh_req_err_closed;
    r->res.written = true;
    return mh_outq_append(&r->res.body, p, n) < 0 ? mh_req_err_nomem : NULL;
}

/*
 * A C handler answering with a body of known length that it will send in
 * pieces (a file range): declares Content-Length. A head-only response (304,
 * 416 without a body, HEAD) needs nothing special: set status and headers
 * and finish; a HEAD request never carries body bytes (the protocol drops
 * them but keeps Content-Length when declared).
 */
void mh_req_set_length(struct mh_req *r, uint64_t len);

/* Sends the head (if not sent) and what is staged now: the response streams from here. */
void mh_req_flush(struct mh_req *r);

/*
 * The handler is done: the response is completed and the request ends (the
 * handler must not touch r afterwards). On a closed request it just ends.
 */
void mh_req_finish(struct mh_req *r);

/* Replaces whatever was built with a short complete response and finishes. */
void mh_req_respond(struct mh_req *r, int status, const char *body);

/* Cuts the response off: the stream ends now; the handler still calls finish. */
void mh_req_abort(struct mh_req *r);

/* Output waiting (staged + in the protocol) is past MH_REQ_HIGH_WATER: stop writing
 * until on_writable. */
static inline bool mh_req_output_high(const struct mh_req *r)
{
    return !r->closed && r->res.body.bytes + r->ops->pending(r) > MH_REQ_HIGH_WATER;
}

/*
 * See mh_req_ops.upgrade: -1 when the protocol has no upgrade. After the
 * switch the bytes are another protocol's: the output filters (gzip) are
 * dropped, whatever the head's status.
 */
int mh_req_upgrade(struct mh_req *r);

/* ---- request body ---------------------------------------------------------- */

/* See max_body: 0, or -1 once the body has been asked for (the limit is fixed). */
static inline int mh_req_set_max_body(struct mh_req *r, uint64_t bytes)
{
    if (r->body_asked)
        return -1;
    r->max_body = bytes;
    return 0;
}

/* See mh_req_ops.want_body. */
static inline int mh_req_want_body(struct mh_req *r, bool all)
{
    return r->ops->want_body(r, all);
}

/* A short fixed string for a body that ended in error ("body too large", "timeout", "malformed
 * body", "connection closed"), NULL when body_state is NONE or MORE. A body that timed out
 * says "timeout" even after the stream was closed for it. */
const char *mh_req_body_error(const struct mh_req *r);

/* ---- output filters -------------------------------------------------------- */

/*
 * An output filter: a stage between the handler's body and the protocol
 * (gzip). Installed with mh_req_add_filter before the head is sent
 * (typically by the dispatcher, after routing, before the handler starts).
 *
 * on_head     once, just before the head is serialized (the first send):
 *             may edit r->res (status, headers: add Content-Encoding and
 *             Vary, mh_response_unset Content-Length) or return false to
 *             step out of this response (then done is called at once).
 *             Bodyless responses (HEAD, 1xx/204/304) never reach filters:
 *             mh_req_* skips them; a filter deciding by status (206) does so
 *             here.
 * on_data     every piece of body on its way out: `in` holds the chunks
 *             the handler staged since the last call (memory, references,
 *             file ranges: mh_outq_read_front reads any kind and consumes),
 *             `out` receives the transformed bytes. The filter takes all of
 *             `in` (keeping what it must in its own state, as zlib does):
 *             whatever it leaves there is dropped. last: the handler
 *             finished, flush everything. Returns 0, or -1 to cut the
 *             response off.
 * done        once per installed filter, always (after last, on abort, or
 *             after on_head declined): free the filter's state.
 *
 * A filter that changes the length must drop Content-Length in on_head;
 * finish then sends a head that frames the body as a stream (chunked).
 */
struct mh_ofilter_ops {
    const char *name;
    bool (*on_head)(struct mh_ofilter *f, struct mh_req *r);
    int (*on_data)(struct mh_ofilter *f, struct mh_req *r, struct mh_outq *in, struct mh_outq *out,
                   bool last);
    void (*done)(struct mh_ofilter *f, struct mh_req *r);
};

struct mh_ofilter {
    const struct mh_ofilter_ops *ops;
    struct mh_ofilter *_next;
};

/* Appends f to r's chain (applied in order of installation). Misuse after the head was sent. */
void mh_req_add_filter(struct mh_req *r, struct mh_ofilter *f);

int mh_req_filter_body(struct mh_req *r, bool complete);

/*
 * For the protocol's send: runs the filters over r->res.body (complete: the
 * last call) and, the first time, their on_head. Leaves the result in
 * r->res.body. Returns 0, or -1 when a filter failed (abort the stream).
 */
static inline int mh_req_run_filters(struct mh_req *r, bool complete)
{
    return r->_filters ? mh_req_filter_body(r, complete) : 0;
}

#endif
