/*
 * The neutral connection (conn.c) and its protocol table, without a real
 * protocol and without network I/O: a scripted transport hands out input
 * chunks (and an ALPN answer), takes output up to a budget (EAGAIN past it),
 * and records shutdown and close; two fake protocols record the ops conn.c
 * calls. Socket events and timer expiries are delivered with ev_invoke.
 *
 * Checked: protocol detection once from the first bytes (the h2c preface
 * over split reads, a diverging prefix, ALPN through the transport op
 * deciding alone), input going to the chosen protocol afterwards, output
 * through writable/flush/flushed with a full socket, the protocol's
 * deadline and the neutral send timeout, lingering close (shutdown, input
 * dropped, EOF closes), graceful stop, counts, and the protocol state kept
 * across pooled reuse (or destroyed when another protocol takes the object).
 */
#include "conn_impl.h"
#include "unit.h"

#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* ---- the scripted transport ---------------------------------------------- */

struct script {
    const char *in[8]; /* input chunks, in order; NULL: EAGAIN (or EOF once eof is set) */
    size_t nin, next;
    bool eof;          /* after the chunks: EOF instead of EAGAIN */
    const char *alpn;  /* NULL: plain transport (no alpn op result) */
    size_t write_room; /* bytes the socket takes before EAGAIN */
    char out[4096];
    size_t nout;
    int shutdowns, closes;
};

static ssize_t fake_read(struct mh_transport *t, void *buf, size_t len)
{
    struct script *s = t->_impl;
    if (s->next < s->nin) {
        const char *chunk = s->in[s->next++];
        size_t n = strlen(chunk);
        CHECK(n <= len);
        memcpy(buf, chunk, n);
        return (ssize_t)n;
    }
    if (s->eof)
        return 0;
    errno = EAGAIN;
    return -1;
}

static ssize_t fake_write(struct mh_transport *t, const void *buf, size_t len)
{
    struct script *s = t->_impl;
    size_t n = len < s->write_room ? len : s->write_room;
    if (n == 0) {
        errno = EAGAIN;
        return -1;
    }
    memcpy(s->out + s->nout, buf, n);
    s->nout += n;
    s->write_room -= n;
    return (ssize_t)n;
}

static void fake_shutdown(struct mh_transport *t)
{
    ((struct script *)t->_impl)->shutdowns++;
}

static void fake_close(struct mh_transport *t)
{
    ((struct script *)t->_impl)->closes++;
}

static bool fake_pending(const struct mh_transport *t)
{
    (void)t;
    return false;
}

static const char *fake_alpn(const struct mh_transport *t)
{
    return ((const struct script *)t->_impl)->alpn;
}

static const struct mh_transport_ops fake_ops = {
    .name = "script",
    .read = fake_read,
    .write = fake_write,
    .shutdown = fake_shutdown,
    .close = fake_close,
    .pending = fake_pending,
    .alpn = fake_alpn,
};

/* ---- two recording protocols --------------------------------------------- */

enum {
    OP_START,
    OP_READ,
    OP_WRITABLE,
    OP_FLUSHED,
    OP_TIMEOUT,
    OP_STOP,
    OP_CLOSE,
    OP_RECYCLE,
    OP_DESTROY,
    OP_EACH,
    NOPS
};

struct fake_proto {
    struct mh_conn_proto table;
    int calls[NOPS];
    char started_with[256]; /* the bytes start was given */
    int states_made;
};

struct fake_state {
    struct fake_proto *owner;
    int uses; /* connections it served (kept across pooled reuse) */
};

static struct fake_proto one, two; /* "http1", "http2" */

static struct fake_proto *owner_of(const struct mh_conn *c)
{
    return c->proto == &one.table ? &one : &two;
}

static int f_start(struct mh_conn *c, const char *bytes, size_t n)
{
    struct fake_proto *p = owner_of(c);
    p->calls[OP_START]++;
    memcpy(p->started_with, bytes, n);
    p->started_with[n] = 0;
    struct fake_state *st = c->proto_state;
    if (!st) {
        st = calloc(1, sizeof *st);
        st->owner = p;
        p->states_made++;
        c->proto_state = st;
    }
    CHECK(st->owner == p);
    st->uses++;
    return 0;
}

static void f_read(struct mh_conn *c)
{
    owner_of(c)->calls[OP_READ]++;
    char buf[256];
    ssize_t n = mh_transport_read(&c->tp, buf, sizeof buf);
    if (n == 0)
        mh_conn_close(c);
}

static void f_writable(struct mh_conn *c)
{
    owner_of(c)->calls[OP_WRITABLE]++;
    mh_conn_flush(c);
}

static void f_flushed(struct mh_conn *c)
{
    owner_of(c)->calls[OP_FLUSHED]++;
}

static void f_timeout(struct mh_conn *c)
{
    owner_of(c)->calls[OP_TIMEOUT]++;
}

static void f_stop(struct mh_conn *c)
{
    owner_of(c)->calls[OP_STOP]++;
}

static void f_close(struct mh_conn *c)
{
    owner_of(c)->calls[OP_CLOSE]++;
}

static void f_recycle(struct mh_conn *c)
{
    owner_of(c)->calls[OP_RECYCLE]++; /* the state stays for the next connection */
}

static void f_destroy(void *state)
{
    struct fake_state *st = state;
    st->owner->calls[OP_DESTROY]++;
    free(st);
}

static void f_each(struct mh_conn *c, void (*fn)(struct mh_req *r, void *ud), void *ud)
{
    (void)fn;
    (void)ud;
    owner_of(c)->calls[OP_EACH]++;
}

static void proto_init(struct fake_proto *p, const char *name)
{
    memset(p, 0, sizeof *p);
    p->table = (struct mh_conn_proto){
        .name = name,
        .start = f_start,
        .read = f_read,
        .writable = f_writable,
        .flushed = f_flushed,
        .timeout = f_timeout,
        .stop = f_stop,
        .close = f_close,
        .recycle = f_recycle,
        .destroy = f_destroy,
        .each_request = f_each,
    };
}

/* ---- fixture ------------------------------------------------------------- */

static struct ev_loop *loop;
static struct mh_buf_pool bufs;
static struct mh_http_limits limits;
static const struct mh_conn_protos protos = {&one.table, &two.table};
static struct mh_http_ctx ctx;
static int sv[2];

static void setup(bool h2c, bool http2)
{
    proto_init(&one, "one");
    proto_init(&two, "two");
    memset(&limits, 0, sizeof limits);
    limits.read_header_timeout = 10;
    limits.send_timeout = 10;
    limits.discard_body_bytes = 256 * 1024;
    limits.h2c = h2c;
    limits.http2 = http2;
    mh_http_ctx_init(&ctx, loop, &limits, &bufs, &protos);
}

static struct mh_conn *accept_script(struct script *s)
{
    struct mh_transport tp = {.ops = &fake_ops, .fd = sv[0], ._impl = s};
    struct sockaddr_storage peer = {0};
    ((struct sockaddr_in *)&peer)->sin_family = AF_INET;
    struct mh_conn *c =
        mh_http_accept_transport(&ctx, NULL, &tp, &peer, sizeof(struct sockaddr_in));
    CHECK(c != NULL);
    return c;
}

static void readable(struct mh_conn *c)
{
    ev_invoke(loop, &c->io, EV_READ);
}

/* ---- tests --------------------------------------------------------------- */

static void test_detect_http1(void)
{
    setup(true, true);
    struct script s = {.in = {"GET / HTTP/1.1\r\n", "Host: a\r\n\r\n"}, .nin = 2};
    struct mh_conn *c = accept_script(&s);
    CHECK(mh_http_counts(&ctx).open == 1 && mh_http_counts(&ctx).idle == 1);
    readable(c);
    CHECK(c->proto == &one.table);
    CHECK(one.calls[OP_START] == 1 && one.calls[OP_READ] == 0);
    CHECK_STR(one.started_with, "GET / HTTP/1.1\r\n");
    readable(c); /* from now on the protocol reads */
    CHECK(one.calls[OP_READ] == 1 && one.calls[OP_START] == 1);
    CHECK(two.calls[OP_START] == 0);
    mh_http_ctx_destroy(&ctx);
    CHECK(one.calls[OP_CLOSE] == 1 && one.calls[OP_DESTROY] == 1);
}

/* The preface over two reads: nothing starts on the prefix; HTTP/2 gets every byte. */
static void test_detect_preface_split(void)
{
    setup(true, true);
    struct script s = {.in = {"PRI * HTTP/2.0\r\n", "\r\nSM\r\n\r\nFRAMES"}, .nin = 2};
    struct mh_conn *c = accept_script(&s);
    readable(c);
    CHECK(c->proto == NULL && one.calls[OP_START] == 0 && two.calls[OP_START] == 0);
    readable(c);
    CHECK(c->proto == &two.table && two.calls[OP_START] == 1);
    CHECK_STR(two.started_with, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\nFRAMES");
    mh_http_ctx_destroy(&ctx);
}

/*
 * A prefix of the preface that then diverges is HTTP/1 (with all its bytes),
 * unless it has the reserved PRI method: an invalid preface, HTTP/2's to
 * refuse. h2c off: HTTP/1.
 */
static void test_detect_diverging_and_off(void)
{
    setup(true, true);
    struct script s = {.in = {"PR", "OPFIND / HTTP/1.1\r\n"}, .nin = 2};
    struct mh_conn *c = accept_script(&s);
    readable(c);
    CHECK(c->proto == NULL);
    readable(c);
    CHECK(c->proto == &one.table);
    CHECK_STR(one.started_with, "PROPFIND / HTTP/1.1\r\n");
    struct script s1 = {.in = {"PRI * HTTP/2", ".1\r\n\r\n"}, .nin = 2};
    c = accept_script(&s1);
    readable(c);
    CHECK(c->proto == NULL);
    readable(c);
    CHECK(c->proto == &two.table);
    CHECK_STR(two.started_with, "PRI * HTTP/2.1\r\n\r\n");
    mh_http_ctx_destroy(&ctx);

    setup(false, true);
    struct script s2 = {.in = {"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"}, .nin = 1};
    c = accept_script(&s2);
    readable(c);
    CHECK(c->proto == &one.table); /* h2c off: a preface is just a bad HTTP/1 request */
    mh_http_ctx_destroy(&ctx);
}

/* A negotiating transport: ALPN alone decides, whatever the bytes. */
static void test_detect_alpn(void)
{
    setup(true, true);
    struct script s = {.in = {"x"}, .nin = 1, .alpn = "h2"};
    struct mh_conn *c = accept_script(&s);
    readable(c);
    CHECK(c->proto == &two.table);
    struct script s2 = {.in = {"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"}, .nin = 1, .alpn = ""};
    c = accept_script(&s2);
    readable(c);
    CHECK(c->proto == &one.table); /* TLS without ALPN h2 is HTTP/1.1 (RFC 9113 §3.2) */
    mh_http_ctx_destroy(&ctx);

    setup(true, false); /* the listener does not offer h2 */
    struct script s3 = {.in = {"x"}, .nin = 1, .alpn = "h2"};
    c = accept_script(&s3);
    readable(c);
    CHECK(c->proto == &one.table);
    mh_http_ctx_destroy(&ctx);
}

/* Output: writable from the pending list, a full socket waits for EV_WRITE, flushed at the end. */
static void test_output(void)
{
    setup(false, false);
    struct script s = {.in = {"GET"}, .nin = 1, .write_room = 4};
    struct mh_conn *c = accept_script(&s);
    readable(c);
    CHECK(mh_outq_acquire(&c->out, &bufs) == 0 && mh_outq_append(&c->out, "hello world", 11) == 0);
    mh_conn_schedule_write(c);
    mh_conn_schedule_write(c); /* once on the list */
    mh_http_prepare(&ctx);
    CHECK(one.calls[OP_WRITABLE] == 1 && one.calls[OP_FLUSHED] == 0);
    CHECK(s.nout == 4 && c->want_write && c->send_deadline > 0);
    CHECK(c->io_events & EV_WRITE);
    s.write_room = 100;
    ev_invoke(loop, &c->io, EV_WRITE);
    CHECK(one.calls[OP_WRITABLE] == 2 && one.calls[OP_FLUSHED] == 1);
    CHECK(s.nout == 11 && memcmp(s.out, "hello world", 11) == 0);
    CHECK(!c->want_write && c->send_deadline == 0 && !(c->io_events & EV_WRITE));
    mh_http_ctx_destroy(&ctx);
}

/* The protocol's deadline calls timeout; one not due yet re-arms; the send timeout closes. */
static void test_timers(void)
{
    setup(false, false);
    struct script s = {.in = {"GET"}, .nin = 1, .write_room = 0};
    struct mh_conn *c = accept_script(&s);
    readable(c);
    mh_conn_set_deadline(c, ev_now(loop) + 100);
    ev_invoke(loop, &c->timer, EV_TIMER);
    CHECK(one.calls[OP_TIMEOUT] == 0 && ev_is_active(&c->timer));
    mh_conn_set_deadline(c, ev_now(loop) - 1);
    ev_invoke(loop, &c->timer, EV_TIMER);
    CHECK(one.calls[OP_TIMEOUT] == 1 && !c->closed);

    mh_conn_set_deadline(c, 0);
    CHECK(mh_outq_acquire(&c->out, &bufs) == 0 && mh_outq_append(&c->out, "x", 1) == 0);
    mh_conn_flush(c); /* blocked: the send clock starts */
    CHECK(c->send_deadline > 0);
    c->send_deadline = ev_now(loop) - 1;
    ev_invoke(loop, &c->timer, EV_TIMER);
    CHECK(c->closed && one.calls[OP_TIMEOUT] == 1 && one.calls[OP_CLOSE] == 1 && s.closes == 1);

    /* before any byte: the header timeout closes without a protocol */
    struct script s2 = {0};
    c = accept_script(&s2);
    c->deadline = ev_now(loop) - 1;
    ev_invoke(loop, &c->timer, EV_TIMER);
    CHECK(c->closed && s2.closes == 1);
    mh_http_ctx_destroy(&ctx);
}

/* Lingering: output first, then the write side shut; input is conn.c's and EOF closes. */
static void test_linger(void)
{
    setup(false, false);
    struct script s = {.in = {"GET", "more", "ignored"}, .nin = 3, .write_room = 2};
    struct mh_conn *c = accept_script(&s);
    readable(c);
    CHECK(mh_outq_acquire(&c->out, &bufs) == 0 && mh_outq_append(&c->out, "bye", 3) == 0);
    mh_conn_linger(c);
    mh_http_prepare(&ctx); /* the pending write: conn.c's own, not the protocol's */
    CHECK(one.calls[OP_WRITABLE] == 0 && s.nout == 2 && s.shutdowns == 0);
    s.write_room = 10;
    ev_invoke(loop, &c->io, EV_WRITE);
    CHECK(s.nout == 3 && s.shutdowns == 1 && one.calls[OP_FLUSHED] == 0);
    readable(c);
    readable(c);
    CHECK(one.calls[OP_READ] == 0 && !c->closed);
    s.eof = true;
    readable(c);
    CHECK(c->closed && one.calls[OP_CLOSE] == 1);
    mh_http_ctx_destroy(&ctx);

    /* a client that goes on sending: closed once discard_body_bytes were dropped */
    setup(false, false);
    limits.discard_body_bytes = 5;
    struct script s2 = {.in = {"GET", "more", "ignored"}, .nin = 3, .write_room = 10};
    c = accept_script(&s2);
    readable(c);
    mh_conn_linger(c);
    readable(c); /* "more": 4 of 5 */
    CHECK(!c->closed);
    readable(c); /* "ignored": past the 5 */
    CHECK(c->closed);
    mh_http_ctx_destroy(&ctx);
}

/* Graceful stop, each_request, and the state kept or destroyed across pooled reuse. */
static void test_stop_and_reuse(void)
{
    setup(true, true);
    struct script s = {.in = {"GET"}, .nin = 1};
    struct script s2 = {0};
    struct mh_conn *a = accept_script(&s);
    struct mh_conn *b = accept_script(&s2);
    readable(a);
    mh_conn_set_idle(a, false);
    mh_http_each_request(&ctx, NULL, NULL);
    CHECK(one.calls[OP_EACH] == 1);
    mh_conn_set_idle(a, true);
    mh_http_close_idle(&ctx);
    CHECK(one.calls[OP_STOP] == 1 && !a->closed);
    CHECK(b->closed && mh_http_counts(&ctx).open == 1); /* undetected and idle: closed */

    mh_conn_close(a);
    CHECK(mh_http_counts(&ctx).open == 0 && !mh_http_drained(&ctx));
    mh_http_prepare(&ctx);
    CHECK(mh_http_drained(&ctx) && one.calls[OP_RECYCLE] == 1);

    /* the next HTTP/1 connection on a pooled object finds the state */
    struct script s3 = {.in = {"GET"}, .nin = 1};
    struct script s4 = {.in = {"GET"}, .nin = 1};
    struct mh_conn *c = accept_script(&s3);
    struct mh_conn *d = accept_script(&s4);
    readable(c);
    readable(d);
    CHECK(one.calls[OP_START] == 3 && one.states_made == 2); /* one of them reused */
    mh_conn_close(c);
    mh_conn_close(d);
    mh_http_prepare(&ctx);

    /* an HTTP/2 connection on them: the kept HTTP/1 state is destroyed */
    struct script s5 = {.in = {"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"}, .nin = 1};
    struct mh_conn *e = accept_script(&s5);
    readable(e);
    CHECK(e->proto == &two.table && one.calls[OP_DESTROY] == 1 && two.states_made == 1);
    mh_http_ctx_destroy(&ctx);
    CHECK(one.calls[OP_DESTROY] == 2 && two.calls[OP_DESTROY] == 1);
}

int main(void)
{
    loop = ev_loop_new(0);
    mh_buf_pool_init(&bufs, 4);
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) < 0)
        return 2;
    test_detect_http1();
    test_detect_preface_split();
    test_detect_diverging_and_off();
    test_detect_alpn();
    test_output();
    test_timers();
    test_linger();
    test_stop_and_reuse();
    mh_buf_pool_destroy(&bufs);
    ev_loop_destroy(loop);
    close(sv[0]);
    close(sv[1]);
    return unit_report();
}
