/*
 * libFuzzer target for the WebSocket session (http/ws.c) over a stand-in
 * protocol: client bytes in, in reads of a size the first byte picks;
 * messages taken as the Lua binding takes them (every other one answered
 * with a send); everything the session writes is parsed back as server
 * frames. Aborts when the session writes a frame a client would refuse
 * (masked, malformed, a data frame after its close frame), hands over a
 * message after it closed, or a text message that is not UTF-8.
 */
#include "req.h"
#include "utf8.h"
#include "ws.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char HEAD[] = "GET / HTTP/1.1\r\n\r\n";

struct fake {
    struct mh_req r;
    bool want;               /* the session waits for input (on_body due) */
    struct mh_ws_parser out; /* what the session wrote, parsed as a client would */
    int out_op;
    bool closed_out;       /* our close frame went out */
    char pending[1 << 17]; /* written and not yet parsed */
    size_t have;
};

static struct fake F;

static const char *fake_head(const struct mh_req *r)
{
    (void)r;
    return HEAD;
}

/* The wire: every byte the session sends is parsed as server frames. */
static void fake_send(struct mh_req *r, bool complete)
{
    (void)complete;
    r->res.head_sent = true;
    char buf[4096];
    ssize_t n;
    char *pending = F.pending;
    size_t have = F.have;
    while ((n = mh_outq_read_front(&r->res.body, buf, sizeof buf)) > 0) {
        if (have + (size_t)n > sizeof F.pending)
            abort(); /* server frames here are small: one message at most */
        memcpy(pending + have, buf, (size_t)n);
        have += (size_t)n;
        size_t off = 0;
        for (;;) {
            struct mh_ws_ev ev;
            off += mh_ws_parse(&F.out, pending + off, have - off, &ev);
            if (ev.type == MH_WS_NEED_MORE)
                break;
            if (ev.type == mh_ws_error) {
                fprintf(stderr, "bad server frame: %s\n", F.out.err);
                abort(); /* a frame no client would take */
            }
            if (ev.type == MH_WS_FRAME) {
                if (F.closed_out || F.out._masked) {
                    fprintf(stderr, "frame after close (%d) or masked (%d)\n", F.closed_out,
                            F.out._masked);
                    abort();
                } /* nothing follows a close frame (5.5.1); servers never mask */
                F.out_op = ev.opcode;
            }
            if (ev.type == MH_WS_FRAME_END && F.out_op == MH_WS_CLOSE)
                F.closed_out = true;
        }
        memmove(pending, pending + off, have - off);
        have -= off;
    }
    F.have = have;
}

static int fake_want_body(struct mh_req *r, bool all)
{
    (void)r;
    (void)all;
    F.want = true;
    return 0;
}

static uint64_t fake_pending(const struct mh_req *r)
{
    (void)r;
    return 0;
}

static void fake_timeout(struct mh_req *r, double s)
{
    (void)r;
    (void)s;
}

static void fake_abort(struct mh_req *r)
{
    r->closed = true;
}

static const char *fake_addr(const struct mh_req *r, char *buf, size_t len)
{
    (void)r;
    snprintf(buf, len, "-");
    return buf;
}

static int fake_upgrade(struct mh_req *r)
{
    (void)r;
    return 0;
}

static const struct mh_req_ops fake_ops = {
    .proto = "fake",
    .head = fake_head,
    .send = fake_send,
    .want_body = fake_want_body,
    .pending = fake_pending,
    .set_read_timeout = fake_timeout,
    .set_write_timeout = fake_timeout,
    .abort = fake_abort,
    .remote_addr = fake_addr,
    .upgrade = fake_upgrade,
};

static void on_event(void *ud)
{
    (void)ud;
}

static const struct mh_ws_events events = {.on_message = on_event, .on_writable = on_event};
static const struct mh_handler_ops inner_ops = {.name = "inner"};
static const struct mh_handler inner = {.ops = &inner_ops};

/* Takes every message ready; answers every other one; checks what it gets. */
static void drain(struct mh_ws *ws, unsigned *n)
{
    const char *data;
    size_t len;
    bool binary;
    int rc;
    while ((rc = mh_ws_receive(ws, &data, &len, &binary)) == 1) {
        unsigned st = 0;
        if (!binary && (!mh_utf8_feed(&st, (const unsigned char *)data, len) || st != 0))
            abort();
        if (len > 4096)
            abort(); /* over max_message */
        if ((*n)++ % 2 == 0)
            mh_ws_send(ws, binary ? MH_WS_BINARY : MH_WS_TEXT, data, len);
        mh_ws_taken(ws);
    }
    if (rc < 0 && ws->msg_ready)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    size_t step = (size_t)data[0] % 61 + 1;
    data++;
    size--;
    memset(&F, 0, sizeof F);
    F.r.ops = &fake_ops;
    F.r.body_state = MH_BODY_MORE;
    F.r.handler = &inner;
    mh_ws_parser_init(&F.out, false, 1 << 20);
    struct mh_ws_config cfg = {.max_message = 4096, .max_frame = 1024, .close_timeout = 5};
    struct mh_ws_handshake hs = {.accept = "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="};
    struct mh_ws *ws = mh_ws_start(&F.r, EV_DEFAULT, &cfg, &hs, "chat", 4, &events, NULL);
    if (!ws)
        return 0;
    unsigned n = 0;
    for (size_t off = 0; off < size && ws->state != MH_WS_CLOSED;) {
        size_t k = size - off < step ? size - off : step;
        mh_buf_append(&F.r.body, data + off, k);
        off += k;
        if (F.want) {
            F.want = false;
            F.r.handler->ops->on_body(&F.r);
        }
        drain(ws, &n);
    }
    mh_ws_end(ws, 1000);
    mh_outq_free(&F.r.res.body);
    mh_response_free(&F.r.res);
    mh_buf_free(&F.r.body);
    return 0;
}
