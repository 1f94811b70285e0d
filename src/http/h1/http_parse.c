#include "http_parse.h"

#include "h1_impl.h"

#include <string.h>

/*
 * MH_PAUSE_BODILESS: a request without a body ran on to its message end in
 * the same llhttp step as its head; mh_http_parse reports the head, and the
 * next call reports the message done without running the parser again.
 */
enum { MH_PAUSE_NONE, MH_PAUSE_HEAD, MH_PAUSE_MESSAGE, MH_PAUSE_BODILESS, MH_PAUSE_TRAILERS };

/* Bytes of chunk extensions allowed on one chunk-size line (400 beyond). */
#define MH_CHUNK_EXT_MAX 1024

static inline struct mh_h1 *conn_of(llhttp_t *p)
{
    return p->data;
}

static inline uint32_t offset_in_head(struct mh_h1 *c, const char *at)
{
    return (uint32_t)(at - (c->in.data + c->req_start));
}

static int on_url(llhttp_t *p, const char *at, size_t len)
{
    struct mh_h1 *c = conn_of(p);
    if (c->req.head.target.len == 0)
        c->req.head.target.off = offset_in_head(c, at);
    c->req.head.target.len += (uint32_t)len;
    return 0;
}

static int on_url_complete(llhttp_t *p)
{
    conn_of(p)->url_done = true;
    return 0;
}

/*
 * Field names are tokens (RFC 9110 §5.1): llhttp lets a space or a tab
 * inside a name through ("X A: 1"), and "Host : a" is a smuggling vector
 * (RFC 9112 §5.1). A span callback's return value is llhttp's error code,
 * so these surface as HPE_INVALID_HEADER_TOKEN, a 400. Trailer fields come
 * through here too.
 */
static int check_name(const char *at, size_t len)
{
    return mh_is_token(at, len) ? 0 : HPE_INVALID_HEADER_TOKEN;
}

static int on_header_field(llhttp_t *p, const char *at, size_t len)
{
    struct mh_h1 *c = conn_of(p);
    struct mh_request *r = &c->req.head;
    if (check_name(at, len))
        return HPE_INVALID_HEADER_TOKEN;
    if (c->head_len != 0)
        return 0; /* a trailer field (the head is done): checked, not kept */
    if (r->nheaders == 0 || c->last_was_value) {
        if (mh_request_add_header(r, offset_in_head(c, at), (uint32_t)len) < 0)
            return -1;
    } else {
        r->headers[r->nheaders - 1].name.len += (uint32_t)len;
    }
    c->last_was_value = false;
    return 0;
}

static int on_header_value(llhttp_t *p, const char *at, size_t len)
{
    struct mh_h1 *c = conn_of(p);
    if (c->head_len != 0)
        return 0; /* a trailer value (llhttp checked its characters) */
    struct mh_header *h = &c->req.head.headers[c->req.head.nheaders - 1];
    if (!c->last_was_value) {
        h->value.off = offset_in_head(c, at);
        h->value.len = (uint32_t)len;
    } else {
        h->value.len += (uint32_t)len;
    }
    c->last_was_value = true;
    return 0;
}

/*
 * Checks llhttp leaves to us (it is lenient on these, or they are policy):
 * the exact request-line shape, header names and values that could be read
 * differently by another parser on the path, framing we do not implement.
 * Returns the status the head deserves, or 0 when it may be handled.
 */
static int check_head(struct mh_h1 *c)
{
    struct mh_request *r = &c->req.head;
    const char *base = mh_h1_head(c);
    size_t t_end = (size_t)r->target.off + r->target.len;
    /* llhttp takes a bare LF as the empty line ending the head ("Host: a\r\n\n"): RFC 9112 §2.2 */
    if (c->head_len < 4 || memcmp(base + c->head_len - 4, "\r\n\r\n", 4) != 0)
        return 400;
    /* method SP target SP version: exactly one space each side of the target */
    if (r->target.off < 2 || base[r->target.off - 1] != ' ' || base[r->target.off - 2] == ' ')
        return 400;
    if (base[t_end] != ' ')
        return 400; /* no version: an HTTP/0.9 request line */
    if (r->http_major != 1 || r->http_minor > 1)
        return 505;
    if (t_end > (size_t)c->conn->h->limits->max_header_bytes)
        return 414;
    /* One pass over the headers: trim, validate, and note the ones we act on. */
    int host = -1, te = -1, expect = -1;
    for (uint32_t i = 0; i < r->nheaders; i++) {
        struct mh_header *h = &r->headers[i];
        const char *name = base + h->name.off;
        if (h->name.len == 0)
            return 400;
        /* llhttp keeps trailing whitespace of values; RFC 9110 says it is not part of them. */
        while (h->value.len && (base[h->value.off + h->value.len - 1] == ' ' ||
                                base[h->value.off + h->value.len - 1] == '\t'))
            h->value.len--;
        /* obs-fold (a value continued on the next line) and stray CR/LF: RFC 9112 §5.2 */
        const char *v = base + h->value.off;
        if (mh_value_has_stop(v, h->value.len))
            return 400;
        switch (h->name.len) {
        case 4:
            if (mh_strieq(name, 4, "Host", 4)) {
                if (host >= 0)
                    return 400; /* RFC 9112 §3.2: more than one Host is a bad request */
                host = (int)i;
            }
            break;
        case 6:
            if (mh_strieq(name, 6, "Expect", 6))
                expect = (int)i;
            break;
        case 17:
            if (mh_strieq(name, 17, "Transfer-Encoding", 17)) {
                if (te >= 0)
                    return 501;
                te = (int)i;
            }
            break;
        }
    }
    mh_request_split_target(r, base);
    bool absolute = r->path.off != r->target.off; /* scheme://authority before the path */
    if (host >= 0 &&
        !mh_authority_valid(base + r->headers[host].value.off, r->headers[host].value.len))
        return 400;
    if (r->host.len == 0) {
        if (host >= 0)
            r->host = r->headers[host].value;
        else if (r->http_minor >= 1)
            return 400;
    } else if (!mh_authority_valid(base + r->host.off, r->host.len)) {
        return 400;
    }
    /*
     * "GET http://a HTTP/1.1" has an empty path: kept empty, as Go's
     * r.URL.Path is, so the mux cleans it to "/" and redirects there (Go's
     * ServeMux: cleanPath("") is "/", which differs from the path). Only
     * the absolute form can have one (RFC 9112 §3.2.2).
     */
    if ((r->path.len == 0 && !absolute) ||
        (r->path.len > 0 && base[r->path.off] != '/' && r->method != HTTP_OPTIONS &&
         r->method != HTTP_CONNECT)) {
        if (!(r->method == HTTP_OPTIONS && r->path.len == 1 && base[r->path.off] == '*'))
            return 400;
    }
    /* Only "chunked", alone: other codings (gzip, ...) are not implemented. */
    if (te >= 0) {
        struct mh_slice tv = r->headers[te].value;
        if (!mh_strieq(base + tv.off, tv.len, "chunked", 7))
            return 501;
        /*
         * RFC 9112 §6.1: Transfer-Encoding in an HTTP/1.0 message means its
         * framing is to be taken as faulty and the connection closed "after
         * processing the message". Answered, then closed, rather than a 400:
         * the chunked body is read with the same strict framing as in 1.1
         * (no lenient path), so the message the handler sees is what its
         * bytes say; the danger is in what follows it (bytes an HTTP/1.0 hop
         * may have framed otherwise), and nothing after it is read.
         */
        if (r->http_minor == 0)
            r->keep_alive = false;
    }
    if (expect >= 0) {
        struct mh_slice ev = r->headers[expect].value;
        if (!mh_strieq(base + ev.off, ev.len, "100-continue", 12))
            return 417;
        r->expect_continue = r->http_minor >= 1;
    }
    /* A declared length over the body limit is refused when the handler asks for the body
     * (mh_policy_first_ask): the route may set its own limit first. */
    return 0;
}

static int on_headers_complete(llhttp_t *p)
{
    struct mh_h1 *c = conn_of(p);
    struct mh_request *r = &c->req.head;
    r->method = (uint8_t)p->method;
    if (c->other_method_len) {
        /* llhttp parsed it as "GET" (other_method): the name is the client's. */
        r->method = MH_METHOD_OTHER;
        memcpy(r->method_name, c->in.data + c->req_start + c->other_method_off,
               c->other_method_len);
        r->method_name[c->other_method_len] = '\0';
        c->other_method_len = 0;
    }
    r->http_major = p->http_major;
    r->http_minor = p->http_minor;
    r->keep_alive = llhttp_should_keep_alive(p);
    r->content_length = (p->flags & F_CONTENT_LENGTH) ? p->content_length : 0;
    r->has_body = (p->flags & F_CHUNKED) || r->content_length > 0;
    c->chunk_ext_bytes = 0;
    c->trailer_prev = -1;
    c->pause = MH_PAUSE_HEAD;
    /*
     * No body, no other Transfer-Encoding (a 501 from check_head) and no
     * upgrade: llhttp goes straight on to on_message_complete, at the same
     * byte, so the head is checked there, one parser step fewer per request.
     */
    if (!r->has_body && !p->upgrade && !(p->flags & F_TRANSFER_ENCODING))
        return 0;
    return HPE_PAUSED;
}

/* Chunk extensions are checked by llhttp and ignored by us; their size is bounded here. */
static int on_chunk_extension(llhttp_t *p, const char *at, size_t len)
{
    struct mh_h1 *c = conn_of(p);
    (void)at;
    c->chunk_ext_bytes += (uint32_t)len;
    return c->chunk_ext_bytes > MH_CHUNK_EXT_MAX ? HPE_INVALID_CHUNK_SIZE : 0;
}

static int on_chunk_header(llhttp_t *p)
{
    struct mh_h1 *c = conn_of(p);
    c->chunk_ext_bytes = 0; /* the limit is per chunk-size line */
    if (p->content_length != 0)
        return 0;
    /* The last chunk: the trailer section starts at the next byte (see trailer_bytes_ok). */
    c->pause = MH_PAUSE_TRAILERS;
    return HPE_PAUSED;
}

/*
 * The trailer section (RFC 9112 §7.1.2) is read by llhttp as header lines,
 * and even in its strict mode it takes a bare LF as a line end there (also
 * the one ending the section: "0\r\n\n") and folds a line that starts with
 * SP or HTAB into the one before (obs-fold). check_head refuses both in the
 * head; trailer fields are not kept, so their bytes are checked as they
 * pass, a byte of state between reads: every LF after a CR, no line
 * starting with whitespace. A CR before another byte is llhttp's error.
 */
static bool trailer_bytes_ok(struct mh_h1 *c, const char *p, const char *end)
{
    int prev = c->trailer_prev;
    for (; p < end; p++) {
        unsigned char b = (unsigned char)*p;
        if ((b == '\n' && prev != '\r') || (prev == '\n' && (b == ' ' || b == '\t')))
            return false;
        prev = b;
    }
    c->trailer_prev = prev;
    return true;
}

static int on_body(llhttp_t *p, const char *at, size_t len)
{
    struct mh_h1 *c = conn_of(p);
    c->req.body_received += len;
    if (c->draining)
        return 0;
    if (c->req.body_received > c->req.max_body) {
        c->req.body_state = MH_BODY_TOO_LARGE;
        return -1;
    }
    return mh_buf_append(&c->req.body, at, len);
}

/*
 * The end of a message. llhttp reads the trailer section's fields as it
 * reads the head's, so a `Connection: close` there would end the
 * connection after this message: the next pipelined request would be
 * llhttp's error, a 400, after an answer that never said it would close.
 * Connection is not a field a trailer may carry (RFC 9110 §6.5.1, RFC 9112
 * §7.1.2): it is ignored, and the head alone says whether the connection
 * stays. (A Transfer-Encoding there is llhttp's framing error: a 400 for
 * this request, status_for_error.)
 */
static int on_message_complete(llhttp_t *p)
{
    struct mh_h1 *c = conn_of(p);
    if (c->trailer_prev >= 0 && c->req.head.keep_alive)
        p->flags &= ~F_CONNECTION_CLOSE;
    c->pause = c->pause == MH_PAUSE_HEAD ? MH_PAUSE_BODILESS : MH_PAUSE_MESSAGE;
    return HPE_PAUSED;
}

static const llhttp_settings_t *settings(void)
{
    static llhttp_settings_t s;
    static int ready;
    if (!ready) {
        llhttp_settings_init(&s);
        s.on_url = on_url;
        s.on_url_complete = on_url_complete;
        s.on_header_field = on_header_field;
        s.on_header_value = on_header_value;
        s.on_headers_complete = on_headers_complete;
        s.on_body = on_body;
        s.on_message_complete = on_message_complete;
        s.on_chunk_extension_name = on_chunk_extension;
        s.on_chunk_extension_value = on_chunk_extension;
        s.on_chunk_header = on_chunk_header;
        ready = 1;
    }
    return &s;
}

/*
 * llhttp is built in its strict mode (CMakeLists.txt) and no
 * llhttp_set_lenient_* flag is set: none is needed, so every framing byte
 * goes through the strict path. Where strict llhttp is still lenient (a
 * bare LF ending the head or the trailer section, obs-fold in trailers, a
 * space inside a field name) or too strict (methods outside its table),
 * the checks of our own are above: check_head, trailer_bytes_ok,
 * check_name, other_method.
 */
void mh_http_parser_init(struct mh_h1 *c)
{
    llhttp_init(&c->parser, HTTP_REQUEST, settings());
    c->parser.data = c;
    c->trailer_prev = -1;
}

/* The request line's first byte: llhttp skips empty lines before it. */
static const char *request_line(const struct mh_h1 *c)
{
    const char *p = c->in.data + c->req_start, *end = c->in.data + c->in.len;
    while (p < end && (*p == '\r' || *p == '\n'))
        p++;
    return p;
}

/*
 * llhttp says HPE_INVALID_VERSION both for "HTTP/2.0" and for a request
 * line with bytes after the version ("GET / HTTP/1.1 x"). Only a
 * well-formed line (method SP target SP HTTP/d.d CRLF) with a version we do
 * not speak is a 505; anything else is a malformed line, a 400.
 */
static int version_status(struct mh_h1 *c)
{
    const char *p = request_line(c), *end = c->in.data + c->in.len;
    const char *last_sp = NULL;
    int spaces = 0;
    while (p < end && *p != '\r' && *p != '\n') {
        if (*p == ' ') {
            spaces++;
            last_sp = p;
        }
        p++;
    }
    if (spaces != 2 || p == end || *p != '\r')
        return 400;
    const char *v = last_sp + 1;
    bool shaped = p - v == 8 && memcmp(v, "HTTP/", 5) == 0 && v[5] >= '0' && v[5] <= '9' &&
                  v[6] == '.' && v[7] >= '0' && v[7] <= '9';
    return shaped ? 505 : 400;
}

static int status_for_error(struct mh_h1 *c, llhttp_errno_t e)
{
    switch (e) {
    case HPE_CB_HEADERS_COMPLETE:
        return 0; /* set by check_head */
    case HPE_USER:
        return c->req.body_state == MH_BODY_TOO_LARGE ? 413 : 500;
    case HPE_INVALID_VERSION:
        return version_status(c);
    case HPE_INVALID_TRANSFER_ENCODING:
        /* in the trailer section: a field a trailer may not carry, not an unknown coding */
        return c->trailer_prev >= 0 ? 400 : 501;
    default:
        return 400;
    }
}

/*
 * llhttp knows a fixed table of methods and stops at any other, but any
 * token is a method (RFC 9110 §9.1) and Go routes them all. When llhttp
 * stops at the method, the request line is checked here: a token followed
 * by a space is fed to llhttp as "GET" (the same parse: a body only with
 * Content-Length or chunked) and its own name is kept for routing. Returns
 * 1 when the parser is past the method (parse_pos at the space), 0 when
 * the token is not complete yet (the parser is reset to the message start),
 * or an error status.
 */
static int other_method(struct mh_h1 *c)
{
    const char *line = c->in.data + c->req_start, *end = c->in.data + c->in.len;
    const char *tok = request_line(c), *p = tok;
    while (p < end && mh_is_tchar((unsigned char)*p))
        p++;
    size_t len = (size_t)(p - tok);
    if (p == end) {
        if (len > MH_METHOD_NAME_MAX)
            return 501;
        llhttp_reset(&c->parser);
        c->parse_pos = c->req_start;
        return 0;
    }
    if (len == 0 || *p != ' ')
        return 400;
    if (len > MH_METHOD_NAME_MAX)
        return 501;
    llhttp_reset(&c->parser);
    if (llhttp_execute(&c->parser, "GET", 3) != HPE_OK)
        return 400;
    c->other_method_off = (uint32_t)(tok - line);
    c->other_method_len = (uint32_t)len;
    c->parse_pos = (size_t)(p - c->in.data);
    return 1;
}

/* mh_http_parse past the shortcut below: runs llhttp over what has arrived. */
static __attribute__((noinline)) enum mh_parse_result parse(struct mh_h1 *c, int *status)
{
    const char *start, *stop;
    size_t avail;
    llhttp_errno_t e;
again:
    start = c->in.data + c->parse_pos;
    avail = c->in.len - c->parse_pos;
    c->pause = MH_PAUSE_NONE;
    e = llhttp_execute(&c->parser, start, avail);
    if (e == HPE_INVALID_METHOD) {
        int rc = other_method(c);
        if (rc == 0)
            return MH_PARSE_NEED_MORE;
        if (rc > 1) {
            *status = rc;
            return MH_PARSE_ERROR;
        }
        start = c->in.data + c->parse_pos;
        avail = c->in.len - c->parse_pos;
        e = llhttp_execute(&c->parser, start, avail);
    }
    stop = e == HPE_OK ? start + avail : llhttp_get_error_pos(&c->parser);
    if (c->trailer_prev >= 0 && !trailer_bytes_ok(c, start, stop)) {
        *status = 400;
        return MH_PARSE_ERROR;
    }
    if (e == HPE_OK) {
        c->parse_pos = c->in.len;
        return MH_PARSE_NEED_MORE;
    }
    c->parse_pos += (size_t)(stop - start);
    if (e == HPE_PAUSED_UPGRADE) {
        /* Switching is the handler's choice (mh_req_ops.upgrade): until then, HTTP/1.1 goes on. */
        llhttp_resume_after_upgrade(&c->parser);
        return MH_PARSE_MESSAGE_DONE;
    }
    if (e == HPE_PAUSED) {
        llhttp_resume(&c->parser);
        if (c->pause == MH_PAUSE_TRAILERS) {
            c->trailer_prev = '\n'; /* the last-chunk line ended with CRLF (llhttp checks) */
            goto again;
        }
        if (c->pause == MH_PAUSE_HEAD || c->pause == MH_PAUSE_BODILESS) {
            c->head_len = c->parse_pos - c->req_start;
            if ((*status = check_head(c)) != 0) {
                c->pause = MH_PAUSE_NONE;
                return MH_PARSE_ERROR;
            }
            return MH_PARSE_HEAD_DONE;
        }
        c->trailer_prev = -1;
        return MH_PARSE_MESSAGE_DONE;
    }
    *status = status_for_error(c, e);
    return MH_PARSE_ERROR;
}

enum mh_parse_result mh_http_parse(struct mh_h1 *c, int *status)
{
    /* Every bodiless request comes here twice: the second time needs no frame for llhttp. */
    if (c->pause == MH_PAUSE_BODILESS) {
        c->pause = MH_PAUSE_NONE; /* the head was reported; its message ended with it */
        return MH_PARSE_MESSAGE_DONE;
    }
    return parse(c, status);
}
