#include "ws.h"

#include "codec.h"
#include "log.h"
#include "req.h"
#include "utf8.h"

#include <llhttp.h>
#include <mbedtls/sha1.h>
#include <stdlib.h>
#include <string.h>

/* ---- the opening handshake ------------------------------------------------ */

static const char WS_GUID[] = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/* Whether any `name` header holds `tok` in its comma-separated list. */
static bool header_has_token(const struct mh_req *r, const char *name, size_t nlen, const char *tok,
                             size_t tlen, bool icase)
{
    const char *base = mh_req_head(r);
    for (uint32_t i = 0; i < r->head.nheaders; i++) {
        const struct mh_header *h = &r->head.headers[i];
        if (!mh_strieq(base + h->name.off, h->name.len, name, nlen))
            continue;
        const char *p = base + h->value.off, *end = p + h->value.len;
        while (p < end) {
            while (p < end && (*p == ' ' || *p == '\t' || *p == ','))
                p++;
            const char *s = p;
            while (p < end && *p != ',')
                p++;
            const char *e = p;
            while (e > s && (e[-1] == ' ' || e[-1] == '\t'))
                e--;
            size_t len = (size_t)(e - s);
            if (len == tlen && (icase ? mh_strieq(s, len, tok, tlen) : memcmp(s, tok, tlen) == 0))
                return true;
        }
    }
    return false;
}

bool mh_ws_offered(const struct mh_req *r, const char *name, size_t len)
{
    return header_has_token(r, "Sec-WebSocket-Protocol", 22, name, len, false);
}

/* What RFC 6455 §4.2.1 asks of the request around the version and key (HTTP/1.1). */
static const char *check_upgrade_request(const struct mh_req *r)
{
    if (r->head.http_major == 2)
        return "over HTTP/2 a WebSocket opens with an extended CONNECT (RFC 8441)";
    if (r->head.http_major != 1 || r->head.http_minor < 1)
        return "a WebSocket handshake needs HTTP/1.1";
    if (r->head.has_body)
        return "a WebSocket handshake has no body";
    if (!header_has_token(r, "Upgrade", 7, "websocket", 9, true))
        return "not a WebSocket handshake (no Upgrade: websocket)";
    if (!header_has_token(r, "Connection", 10, "upgrade", 7, true))
        return "not a WebSocket handshake (no Connection: upgrade)";
    return NULL;
}

const char *mh_ws_check(const struct mh_req *r, struct mh_ws_handshake *hs, int *status)
{
    *status = 400;
    if (r->head.method != HTTP_GET)
        return "a WebSocket handshake is a GET";
    /*
     * RFC 8441 §5: an extended CONNECT is the handshake, on a stream that
     * stays open; no Upgrade, Connection or key (the stream is already the
     * client's), only the version.
     */
    const char *bad = NULL;
    if (!r->head.connect_websocket)
        bad = check_upgrade_request(r);
    else if (!r->head.has_body)
        bad = "an extended CONNECT leaves its stream open (no END_STREAM)";
    if (bad)
        return bad;
    size_t vlen, klen;
    const char *v = mh_req_header(r, "Sec-WebSocket-Version", 21, &vlen);
    if (!v || vlen != 2 || memcmp(v, "13", 2) != 0) {
        *status = 426;
        return "unsupported WebSocket version (13 only)";
    }
    if (r->head.connect_websocket) {
        hs->accept[0] = '\0'; /* RFC 8441 has no Sec-WebSocket-Accept */
        return NULL;
    }
    const char *key = mh_req_header(r, "Sec-WebSocket-Key", 17, &klen);
    unsigned char raw[24];
    if (!key || klen != 24 || mh_base64_decode(key, klen, raw, false) != 16)
        return "bad Sec-WebSocket-Key";
    unsigned char in[24 + sizeof WS_GUID - 1], digest[20];
    memcpy(in, key, 24);
    memcpy(in + 24, WS_GUID, sizeof WS_GUID - 1);
    if (mbedtls_sha1(in, sizeof in, digest) != 0)
        return "sha1 failed";
    mh_base64_encode(digest, sizeof digest, hs->accept, false);
    hs->accept[28] = '\0';
    return NULL;
}

/* ---- the session: output -------------------------------------------------- */

static const struct mh_handler_ops ws_handler_ops;

struct mh_ws *mh_ws_of(const struct mh_req *r)
{
    if (!r->handler || r->handler->ops != &ws_handler_ops)
        return NULL;
    return (struct mh_ws *)r->handler; /* the handler is the first field */
}

static bool stream_open(const struct mh_ws *ws)
{
    return ws->r && !ws->r->closed;
}

static const char *frame_out(struct mh_ws *ws, int opcode, const void *p, size_t len)
{
    if (!stream_open(ws))
        return mh_req_err_closed;
    unsigned char hdr[MH_WS_MAX_HEADER];
    size_t hn = mh_ws_frame_header(hdr, true, opcode, len, NULL);
    const char *err = mh_req_write(ws->r, hdr, hn);
    if (!err && len)
        err = mh_req_write(ws->r, p, len);
    if (!err)
        mh_req_flush(ws->r);
    return err;
}

static void send_close(struct mh_ws *ws, uint16_t code, const char *reason, size_t len)
{
    unsigned char p[125];
    size_t n = 0;
    if (code != 1005) { /* 1005: "no status" is never sent (7.4.1) */
        p[0] = (unsigned char)(code >> 8);
        p[1] = (unsigned char)code;
        if (len > sizeof p - 2)
            len = sizeof p - 2;
        if (len)
            memcpy(p + 2, reason, len);
        n = 2 + len;
    }
    frame_out(ws, MH_WS_CLOSE, p, n);
}

static void arm_timer(struct mh_ws *ws);

/* The connection ends within close_timeout from now, whatever the user does. */
static void start_close_clock(struct mh_ws *ws)
{
    if (ws->close_deadline == 0)
        ws->close_deadline = ev_now(ws->loop) + ws->cfg.close_timeout;
    arm_timer(ws);
}

static void set_closed(struct mh_ws *ws, uint16_t code, const char *reason, size_t len)
{
    ws->state = MH_WS_CLOSED;
    ws->close_code = code;
    ws->close_reason = reason; /* nothing is parsed after a close: ctl keeps the peer's */
    ws->close_reason_len = len;
    ws->msg_ready = false;
    if (stream_open(ws))
        start_close_clock(ws);
}

/*
 * _Fail the WebSocket Connection_ (7.1.7): our close frame with the code
 * says why, then nothing more is read. The connection closes when the user
 * ends, or after close_timeout (the timer) if it does not.
 */
static void fail(struct mh_ws *ws, uint16_t code, const char *why)
{
    mh_log(MH_LOG_INFO, "websocket: closing with %u: %s", (unsigned)code, why);
    if (ws->state == MH_WS_OPEN)
        send_close(ws, code, why, strlen(why));
    set_closed(ws, code, why, strlen(why));
}

const char *mh_ws_send(struct mh_ws *ws, int opcode, const void *p, size_t len)
{
    if (ws->state != MH_WS_OPEN || !stream_open(ws))
        return mh_req_err_closed;
    return frame_out(ws, opcode, p, len);
}

bool mh_ws_output_high(const struct mh_ws *ws)
{
    return stream_open(ws) && mh_req_output_high(ws->r);
}

/* ---- the idle and close timer ----------------------------------------------- */

/* When the timer must look again: a ping or idle check while open, else the close deadline. */
static ev_tstamp next_check(const struct mh_ws *ws)
{
    if (ws->state != MH_WS_OPEN)
        return ws->close_deadline;
    ev_tstamp at = 0;
    if (ws->cfg.ping_interval > 0 && !ws->ping_sent)
        at = ws->last_seen + ws->cfg.ping_interval;
    if (ws->cfg.idle_timeout > 0) {
        ev_tstamp idle = ws->last_seen + ws->cfg.idle_timeout;
        if (at == 0 || idle < at)
            at = idle;
    }
    return at;
}

static void arm_timer(struct mh_ws *ws)
{
    ev_timer_stop(ws->loop, &ws->timer);
    ev_tstamp at = next_check(ws);
    if (at == 0)
        return;
    ev_tstamp in = at - ev_now(ws->loop);
    ev_timer_set(&ws->timer, in > 0 ? in : 0., 0.);
    ev_timer_start(ws->loop, &ws->timer);
}

/*
 * Each frame from the peer only stores last_seen; the timer, when it fires
 * early, re-arms for the rest (as conn.c's), so a busy socket costs no timer
 * work per frame.
 */
static void on_timer(struct ev_loop *loop, ev_timer *t, int revents)
{
    struct mh_ws *ws = t->data;
    (void)revents;
    ev_tstamp now = ev_now(loop);
    ev_tstamp due = next_check(ws);
    if (due > now) {
        arm_timer(ws);
        return;
    }
    if (ws->state != MH_WS_OPEN) {
        /* The peer never answered our close, or the user did not end after the close. */
        if (ws->state == MH_WS_CLOSING)
            set_closed(ws, 1006, "close timeout", 13);
        if (stream_open(ws))
            mh_req_abort(ws->r);
        return;
    }
    double silent = now - ws->last_seen;
    if (ws->cfg.idle_timeout > 0 && silent >= ws->cfg.idle_timeout) {
        mh_ws_close(ws, 1001, "idle timeout", 12);
        return;
    }
    if (ws->cfg.ping_interval > 0 && !ws->ping_sent) {
        frame_out(ws, MH_WS_PING, NULL, 0);
        ws->ping_sent = true;
    }
    arm_timer(ws);
}

void mh_ws_close(struct mh_ws *ws, uint16_t code, const char *reason, size_t len)
{
    if (ws->state != MH_WS_OPEN)
        return;
    send_close(ws, code, reason, len);
    ws->state = MH_WS_CLOSING;
    ws->msg_ready = false; /* data after our close is discarded (5.5.1) */
    start_close_clock(ws);
}

void mh_ws_request_stopping(struct mh_req *r)
{
    struct mh_ws *ws = mh_ws_of(r);
    if (ws)
        mh_ws_close(ws, 1001, "server stopping", 15);
}

/* ---- the session: input ------------------------------------------------------ */

/* Close codes a peer may send (7.4.1, 7.4.2 and IANA's registry: 1012-1014). */
static bool valid_close_code(unsigned code)
{
    return (code >= 1000 && code <= 1003) || (code >= 1007 && code <= 1014) ||
           (code >= 3000 && code <= 4999);
}

static void on_close_frame(struct mh_ws *ws)
{
    unsigned code = 1005;
    const char *reason = "";
    size_t rlen = 0;
    if (ws->ctl_len == 1)
        return fail(ws, 1002, "close frame with a one-byte payload");
    if (ws->ctl_len >= 2) {
        code = (unsigned)ws->ctl[0] << 8 | ws->ctl[1];
        if (!valid_close_code(code))
            return fail(ws, 1002, "invalid close code");
        reason = (const char *)ws->ctl + 2;
        rlen = ws->ctl_len - 2;
        unsigned st = 0;
        if (!mh_utf8_feed(&st, (const unsigned char *)reason, rlen) || !mh_utf8_complete(st))
            return fail(ws, 1007, "close reason is not UTF-8");
    }
    if (ws->state == MH_WS_OPEN)
        send_close(ws, (uint16_t)code, NULL, 0); /* echo the code (5.5.1) */
    set_closed(ws, (uint16_t)code, reason, rlen);
}

static void on_frame_end(struct mh_ws *ws)
{
    int op = ws->frame_opcode;
    switch (op) {
    case MH_WS_PING:
        if (ws->state == MH_WS_OPEN)
            frame_out(ws, MH_WS_PONG, ws->ctl, ws->ctl_len);
        return;
    case MH_WS_PONG:
        return;
    case MH_WS_CLOSE:
        on_close_frame(ws);
        return;
    default:
        break;
    }
    if (!ws->frame_fin || ws->state != MH_WS_OPEN)
        return;
    if (ws->msg_opcode == MH_WS_TEXT && !mh_utf8_complete(ws->utf8))
        return fail(ws, 1007, "text message is not UTF-8");
    ws->msg_ready = true;
    ws->ready_opcode = ws->msg_opcode;
}

/* A frame header: the message rules of 5.4 that no single frame shows. */
static void on_frame(struct mh_ws *ws, const struct mh_ws_ev *ev)
{
    ws->frame_opcode = ev->opcode;
    ws->frame_fin = ev->fin;
    ws->last_seen = ev_now(ws->loop);
    ws->ping_sent = false;
    if (ev->opcode >= MH_WS_CLOSE) {
        ws->ctl_len = 0;
        return;
    }
    if (ev->opcode == MH_WS_CONT) {
        if (!ws->msg_opcode)
            return fail(ws, 1002, "continuation frame without a message");
        ws->frame_opcode = ws->msg_opcode;
    } else {
        if (ws->msg_opcode)
            return fail(ws, 1002, "new message inside a fragmented one");
        ws->msg_opcode = ev->opcode;
        ws->utf8 = 0;
    }
    if (ev->length > ws->cfg.max_message - ws->msg.len)
        return fail(ws, 1009, "message too large");
    if (ws->state == MH_WS_OPEN && mh_buf_reserve(&ws->msg, (size_t)ev->length) < 0)
        return fail(ws, 1011, "out of memory");
}

static void on_payload(struct mh_ws *ws, const char *p, size_t n)
{
    if (ws->frame_opcode >= MH_WS_CLOSE) {
        if (!ws->ctl && !(ws->ctl = malloc(125)))
            return fail(ws, 1011, "out of memory");
        memcpy(ws->ctl + ws->ctl_len, p, n); /* the parser bounds control payloads at 125 */
        ws->ctl_len += n;
        return;
    }
    if (ws->state != MH_WS_OPEN)
        return;
    if (ws->msg_opcode == MH_WS_TEXT && !mh_utf8_feed(&ws->utf8, (const unsigned char *)p, n))
        return fail(ws, 1007, "text message is not UTF-8");
    mh_buf_append(&ws->msg, p, n); /* room reserved in on_frame */
}

/* Parses input until a message is complete, the input ends or the session closed. */
static size_t parse_input(struct mh_ws *ws, char *in, size_t len)
{
    size_t off = 0;
    for (;;) {
        struct mh_ws_ev ev;
        off += mh_ws_parse(&ws->parser, in + off, len - off, &ev);
        switch (ev.type) {
        case MH_WS_NEED_MORE:
            return off;
        case MH_WS_FRAME:
            on_frame(ws, &ev);
            break;
        case MH_WS_PAYLOAD:
            on_payload(ws, ev.data, ev.len);
            break;
        case MH_WS_FRAME_END:
            on_frame_end(ws);
            if (ws->frame_fin && ws->frame_opcode < MH_WS_CLOSE)
                ws->msg_opcode = 0;
            break;
        case mh_ws_error:
            fail(ws, ws->parser.err == mh_ws_err_too_large ? 1009 : 1002, ws->parser.err);
            return off;
        }
        if (ws->state == MH_WS_CLOSED || ws->msg_ready)
            return off;
    }
}

/* Keeps a few KiB of buffer for a busy socket; an idle one holds none. */
#define KEEP_BUF 4096
/* Input read ahead while a message waits for the user (more than one stack read: 4 KiB). */
#define READ_AHEAD 16384

/*
 * Reads what the stream has until a message is ready (it then waits for the
 * user: input back-pressure), the session closed, or the input runs dry
 * (then the stream calls on_body when bytes come).
 */
static void pump(struct mh_ws *ws, bool notify)
{
    struct mh_req *r = ws->r;
    if (ws->in_parse || !stream_open(ws))
        return;
    ws->in_parse = true;
    bool was_ready = ws->msg_ready;
    while (!ws->msg_ready && ws->state != MH_WS_CLOSED) {
        if (r->body.len) {
            /* A header cut short stays in r->body and is offered again with more bytes. */
            size_t used = parse_input(ws, r->body.data, r->body.len);
            mh_buf_consume(&r->body, used);
            if (ws->msg_ready || ws->state == MH_WS_CLOSED)
                break;
        }
        if (r->body_state != MH_BODY_MORE) {
            set_closed(ws, 1006, "connection closed", 17); /* no close frame: 7.1.5 */
            break;
        }
        if (!mh_req_want_body(r, false))
            break; /* on_body comes with more */
    }
    /*
     * A message waits for the user: reading goes on into r->body, unparsed,
     * up to READ_AHEAD bytes, so the socket's read interest (and its epoll
     * registration) stays as it is from one message to the next. Past that
     * the connection stops reading and TCP holds the client back.
     */
    if (ws->msg_ready && ws->state != MH_WS_CLOSED && r->body_state == MH_BODY_MORE &&
        r->body.len < READ_AHEAD)
        mh_req_want_body(r, false);
    if (r->body.len == 0 && r->body.cap > KEEP_BUF)
        mh_buf_free(&r->body);
    ws->in_parse = false;
    if (notify && ((ws->msg_ready && !was_ready) || ws->state == MH_WS_CLOSED))
        ws->events->on_message(ws->ud);
}

int mh_ws_receive(struct mh_ws *ws, const char **data, size_t *len, bool *binary)
{
    if (!ws->msg_ready)
        pump(ws, false);
    if (ws->msg_ready) {
        ws->msg_ready = false;
        ws->msg_taken = true;
        *data = ws->msg.data ? ws->msg.data : "";
        *len = ws->msg.len;
        *binary = ws->ready_opcode == MH_WS_BINARY;
        return 1;
    }
    return ws->state == MH_WS_CLOSED || !stream_open(ws) ? -1 : 0;
}

void mh_ws_taken(struct mh_ws *ws)
{
    if (!ws->msg_taken)
        return;
    ws->msg_taken = false;
    ws->msg.len = 0;
    if (ws->msg.cap > KEEP_BUF)
        mh_buf_free(&ws->msg);
    pump(ws, false); /* the next receive finds what came meanwhile */
}

/* ---- the session as the request's handler -------------------------------------- */

static void ws_on_body(struct mh_req *r)
{
    struct mh_ws *ws = mh_ws_of(r);
    if (!ws->msg_taken)
        pump(ws, true);
}

static void ws_on_writable(struct mh_req *r)
{
    struct mh_ws *ws = mh_ws_of(r);
    ws->events->on_writable(ws->ud);
}

static void ws_on_abort(struct mh_req *r)
{
    struct mh_ws *ws = mh_ws_of(r);
    if (ws->state != MH_WS_CLOSED)
        set_closed(ws, 1006, "connection closed", 17);
    ev_timer_stop(ws->loop, &ws->timer);
    ws->events->on_message(ws->ud);
    ws->events->on_writable(ws->ud);
    if (ws->inner->ops->on_abort)
        ws->inner->ops->on_abort(r);
}

static const struct mh_handler_ops ws_handler_ops = {
    .name = "websocket",
    .on_body = ws_on_body,
    .on_writable = ws_on_writable,
    .on_abort = ws_on_abort,
};

struct mh_ws *mh_ws_start(struct mh_req *r, struct ev_loop *loop, const struct mh_ws_config *cfg,
                          const struct mh_ws_handshake *hs, const char *protocol, size_t plen,
                          const struct mh_ws_events *events, void *ud)
{
    struct mh_ws *ws = calloc(1, sizeof *ws);
    if (!ws)
        return NULL;
    if (mh_req_upgrade(r) < 0) {
        free(ws);
        return NULL;
    }
    if (r->head.connect_websocket) {
        r->res.status = 200; /* RFC 8441 §5 */
    } else {
        r->res.status = 101;
        mh_req_set_header(r, "Upgrade", 7, "websocket", 9, true);
        mh_req_set_header(r, "Sec-WebSocket-Accept", 20, hs->accept, 28, true);
    }
    if (protocol)
        mh_req_set_header(r, "Sec-WebSocket-Protocol", 22, protocol, plen, true);
    mh_req_flush(r);
    ws->handler.ops = &ws_handler_ops;
    ws->inner = r->handler;
    ws->r = r;
    ws->loop = loop;
    ws->cfg = *cfg;
    ws->events = events;
    ws->ud = ud;
    ws->state = MH_WS_OPEN;
    mh_ws_parser_init(&ws->parser, true, cfg->max_frame);
    ev_init(&ws->timer, on_timer);
    ws->timer.data = ws;
    ws->last_seen = ev_now(loop);
    r->handler = &ws->handler;
    arm_timer(ws);
    pump(ws, false); /* frames the client sent right after its handshake */
    return ws;
}

void mh_ws_end(struct mh_ws *ws, uint16_t code)
{
    struct mh_req *r = ws->r;
    if (ws->state == MH_WS_OPEN)
        send_close(ws, code, NULL, 0);
    ev_timer_stop(ws->loop, &ws->timer);
    if (r && r->handler == &ws->handler)
        r->handler = ws->inner;
    mh_buf_free(&ws->msg);
    free(ws->ctl);
    free(ws);
}
