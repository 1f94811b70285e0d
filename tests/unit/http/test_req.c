/*
 * The request model without sockets: a test protocol implements the request
 * ops (as HTTP/1 and, later, HTTP/2 streams do) and serializes with the
 * HTTP/1 serializer into a wire queue, so responses are checked byte for
 * byte: Content-Length vs chunked, header pairs in order, referenced strings
 * moved without copying, file ranges, head-only responses (304, HEAD), output
 * filters, writes after the stream is gone, and dispatch to typed handlers.
 */
#include "dispatch.h"
#include "h1_response.h"
#include "req.h"
#include "router.h"
#include "unit.h"

#include <llhttp.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char DATE[] = "Date: Thu, 01 Jan 2026 00:00:00 GMT\r\n";

/* ---- a test protocol ------------------------------------------------------ */

struct tproto {
    struct mh_req req; /* first: the ops cast back */
    const char *head_bytes;
    struct mh_outq wire;
    int finished, aborted;
};

static const char *t_head(const struct mh_req *r)
{
    return ((const struct tproto *)r)->head_bytes;
}

static void t_send(struct mh_req *r, bool complete)
{
    struct tproto *t = (struct tproto *)r;
    if (r->closed) {
        t->finished += complete;
        return;
    }
    CHECK(mh_req_run_filters(r, complete) == 0);
    struct mh_h1_head_ctx ctx = {DATE, sizeof DATE - 1, 1, r->head.method == HTTP_HEAD, true,
                                 false};
    CHECK(mh_h1_response_emit(&r->res, &t->wire, &ctx, complete) == 0);
    t->finished += complete;
}

static int t_want_body(struct mh_req *r, bool all)
{
    return 1;
}

static uint64_t t_pending(const struct mh_req *r)
{
    return ((const struct tproto *)r)->wire.bytes;
}

static void t_timeout(struct mh_req *r, double s)
{
}

static void t_abort(struct mh_req *r)
{
    struct tproto *t = (struct tproto *)r;
    t->aborted++;
    r->closed = true;
    mh_outq_clear(&t->wire);
}

static const char *t_addr(const struct mh_req *r, char *buf, size_t len)
{
    snprintf(buf, len, "test");
    return buf;
}

static const struct mh_req_ops tops = {
    .proto = "test",
    .head = t_head,
    .send = t_send,
    .want_body = t_want_body,
    .pending = t_pending,
    .set_read_timeout = t_timeout,
    .set_write_timeout = t_timeout,
    .abort = t_abort,
    .remote_addr = t_addr,
};

/* A request "GET /path" (the head bytes are the path itself). */
static void tproto_init(struct tproto *t, uint8_t method, const char *path)
{
    memset(t, 0, sizeof *t);
    mh_req_reset(&t->req);
    t->req.ops = &tops;
    t->head_bytes = path;
    t->req.head.method = method;
    t->req.head.http_major = 1;
    t->req.head.http_minor = 1;
    t->req.head.target = t->req.head.path = (struct mh_slice){0, (uint32_t)strlen(path)};
}

static void tproto_free(struct tproto *t)
{
    mh_req_free(&t->req);
    mh_outq_free(&t->wire);
}

/* The wire bytes as a string; file chunks are read (the queue is consumed). */
static char *wire(struct tproto *t)
{
    static char buf[1 << 16];
    ssize_t n = mh_outq_read_front(&t->wire, buf, sizeof buf - 1);
    CHECK(n >= 0);
    buf[n < 0 ? 0 : n] = 0;
    return buf;
}

static int released[8];
static void on_release(void *ud, uintptr_t token)
{
    (void)ud;
    released[token]++;
}

#define HEAD200 "HTTP/1.1 200 OK\r\nServer: moonhttp\r\nDate: Thu, 01 Jan 2026 00:00:00 GMT\r\n"

/* ---- responses ------------------------------------------------------------ */

static void test_length_and_pairs(void)
{
    struct tproto t;
    tproto_init(&t, HTTP_GET, "/");
    struct mh_req *r = &t.req;
    CHECK(mh_req_set_header(r, "X-One", 5, "1", 1, false) == NULL);
    CHECK(mh_req_set_header(r, "Content-Type", 12, "text/html", 9, true) == NULL);
    CHECK(mh_req_set_header(r, "X-One", 5, "2", 1, false) == NULL);
    CHECK(mh_req_set_header(r, "Bad Name", 8, "v", 1, true) != NULL);
    CHECK(mh_req_write(r, "hello", 5) == NULL);
    CHECK(mh_req_write(r, " world", 6) == NULL);
    mh_req_finish(r);
    CHECK(t.finished == 1);
    CHECK_STR(wire(&t), HEAD200 "X-One: 1\r\nContent-Type: text/html\r\nX-One: 2\r\n"
                                "Content-Length: 11\r\n\r\nhello world");
    /* the head is fixed once sent */
    CHECK(mh_req_set_header(r, "X-Late", 6, "1", 1, true) == mh_req_err_head_sent);
    tproto_free(&t);
}

static void test_stream_with_references(void)
{
    memset(released, 0, sizeof released);
    struct tproto t;
    tproto_init(&t, HTTP_GET, "/");
    struct mh_req *r = &t.req;
    static const char big[] = "referenced bytes";
    mh_req_write(r, "a", 1);
    mh_req_flush(r); /* the response streams from here: chunked */
    CHECK(mh_req_write_ref(r, big, sizeof big - 1, on_release, NULL, 1) == NULL);
    mh_req_flush(r);
    /* moved to the wire without copying: the chunk still points at `big` */
    bool found = false;
    for (uint32_t i = 0; i < mh_outq_count(&t.wire); i++) {
        const struct mh_chunk *c = mh_outq_chunk(&t.wire, i);
        found = found || (c->kind == MH_CHUNK_REF && mh_outq_chunk_mem(&t.wire, c) == big);
    }
    CHECK(found);
    CHECK(released[1] == 0);
    mh_req_finish(r);
    CHECK_STR(wire(&t), HEAD200 "Content-Type: text/plain; charset=utf-8\r\n"
                                "Transfer-Encoding: chunked\r\n\r\n"
                                "1\r\na\r\n10\r\nreferenced bytes\r\n0\r\n\r\n");
    CHECK(released[1] == 1); /* once written */
    tproto_free(&t);
}

static int temp_file(const char *text)
{
    char path[] = "/tmp/mh-req-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    unlink(path);
    CHECK(write(fd, text, strlen(text)) == (ssize_t)strlen(text));
    return fd;
}

/* What a static-file handler does: a declared length and a file range, or head-only answers. */
static void test_file_range_and_head_only(void)
{
    memset(released, 0, sizeof released);
    int fd = temp_file("0123456789");
    struct tproto t;
    tproto_init(&t, HTTP_GET, "/f");
    struct mh_req *r = &t.req;
    mh_req_set_header(r, "Content-Type", 12, "text/plain", 10, true);
    mh_req_set_length(r, 4);
    CHECK(mh_req_write_file(r, fd, 3, 4, on_release, NULL, 2) == NULL);
    mh_req_finish(r);
    int ffd;
    off_t off;
    uint64_t len;
    /* the wire holds the head, then the range itself: sendfile can take it from there */
    const struct mh_chunk *last = mh_outq_chunk(&t.wire, mh_outq_count(&t.wire) - 1);
    CHECK(last && last->kind == MH_CHUNK_FILE && last->u.file.off == 3 && last->len == 4);
    CHECK_STR(wire(&t), HEAD200 "Content-Type: text/plain\r\nContent-Length: 4\r\n\r\n3456");
    CHECK(!mh_outq_front_file(&t.wire, &ffd, &off, &len));
    CHECK(released[2] == 1);
    tproto_free(&t);

    /* HEAD: the head GET would get (default type included), no bytes; the range is released */
    tproto_init(&t, HTTP_HEAD, "/f");
    r = &t.req;
    mh_req_set_length(r, 4);
    mh_req_write_file(r, fd, 3, 4, on_release, NULL, 3);
    mh_req_finish(r);
    CHECK_STR(wire(&t), HEAD200 "Content-Type: text/plain; charset=utf-8\r\n"
                                "Content-Length: 4\r\n\r\n");
    CHECK(released[3] == 1);
    tproto_free(&t);

    /* 304: status and headers only */
    tproto_init(&t, HTTP_GET, "/f");
    r = &t.req;
    mh_req_set_status(r, 304);
    mh_req_set_header(r, "ETag", 4, "\"x\"", 3, true);
    mh_req_finish(r);
    CHECK_STR(wire(&t), "HTTP/1.1 304 Not Modified\r\nServer: moonhttp\r\n"
                        "Date: Thu, 01 Jan 2026 00:00:00 GMT\r\nETag: \"x\"\r\n\r\n");
    tproto_free(&t);

    /* 416 with an empty body keeps its Content-Length: 0 */
    tproto_init(&t, HTTP_GET, "/f");
    r = &t.req;
    mh_req_set_status(r, 416);
    mh_req_set_header(r, "Content-Range", 13, "bytes */10", 10, true);
    mh_req_finish(r);
    CHECK(strstr(wire(&t), "Content-Range: bytes */10\r\nContent-Length: 0\r\n\r\n") != NULL);
    tproto_free(&t);
    close(fd);
}

static void test_closed(void)
{
    memset(released, 0, sizeof released);
    struct tproto t;
    tproto_init(&t, HTTP_GET, "/");
    struct mh_req *r = &t.req;
    mh_req_write(r, "x", 1);
    mh_req_abort(r);
    CHECK(t.aborted == 1 && r->closed);
    CHECK(mh_req_write(r, "y", 1) == mh_req_err_closed);
    CHECK(mh_req_write_ref(r, "z", 1, on_release, NULL, 4) == mh_req_err_closed);
    CHECK(released[4] == 1); /* dropped output is released at once */
    mh_req_abort(r);         /* a second abort is a no-op */
    CHECK(t.aborted == 1);
    mh_req_finish(r);
    CHECK(t.finished == 1);
    tproto_free(&t);
}

/* ---- output filters ------------------------------------------------------- */

struct upper {
    struct mh_ofilter base;
    int heads, datas, dones, lasts;
};

static bool up_head(struct mh_ofilter *f, struct mh_req *r)
{
    ((struct upper *)f)->heads++;
    mh_response_unset(&r->res, "Content-Length", 14);
    mh_response_header(&r->res, "X-Upper", 7, "1", 1, true);
    return true;
}

static int up_data(struct mh_ofilter *f, struct mh_req *r, struct mh_outq *in, struct mh_outq *out,
                   bool last)
{
    struct upper *u = (struct upper *)f;
    u->datas++;
    u->lasts += last;
    char buf[256];
    ssize_t n;
    while ((n = mh_outq_read_front(in, buf, sizeof buf)) > 0) {
        for (ssize_t i = 0; i < n; i++)
            buf[i] = (char)(buf[i] >= 'a' && buf[i] <= 'z' ? buf[i] - 32 : buf[i]);
        mh_outq_append(out, buf, (size_t)n);
    }
    return n < 0 ? -1 : 0;
}

static void up_done(struct mh_ofilter *f, struct mh_req *r)
{
    ((struct upper *)f)->dones++;
}

static const struct mh_ofilter_ops upper_ops = {"upper", up_head, up_data, up_done};

static void test_filters(void)
{
    int fd = temp_file("file");
    struct tproto t;
    tproto_init(&t, HTTP_GET, "/");
    struct mh_req *r = &t.req;
    struct upper u = {{&upper_ops, NULL}, 0, 0, 0, 0};
    mh_req_add_filter(r, &u.base);
    mh_req_write(r, "abc", 3);
    mh_req_flush(r);
    mh_req_write(r, "def", 3);
    mh_req_write_file(r, fd, 0, 4, NULL, NULL, 0); /* file ranges pass through filters too */
    mh_req_finish(r);
    CHECK(u.heads == 1 && u.datas == 2 && u.lasts == 1 && u.dones == 1);
    CHECK_STR(wire(&t), HEAD200 "Content-Type: text/plain; charset=utf-8\r\nX-Upper: 1\r\n"
                                "Transfer-Encoding: chunked\r\n\r\n"
                                "3\r\nABC\r\n7\r\nDEFFILE\r\n0\r\n\r\n");
    tproto_free(&t);

    /* a complete response through a filter that drops Content-Length: still framed */
    tproto_init(&t, HTTP_GET, "/");
    r = &t.req;
    u = (struct upper){{&upper_ops, NULL}, 0, 0, 0, 0};
    mh_req_add_filter(r, &u.base);
    mh_req_set_length(r, 2);
    mh_req_write(r, "ok", 2);
    mh_req_finish(r);
    CHECK(strstr(wire(&t), "X-Upper: 1\r\nContent-Length: 2\r\n\r\nOK") != NULL);
    tproto_free(&t);

    /* bodyless responses never reach a filter, which is still told it is done */
    tproto_init(&t, HTTP_HEAD, "/");
    r = &t.req;
    u = (struct upper){{&upper_ops, NULL}, 0, 0, 0, 0};
    mh_req_add_filter(r, &u.base);
    mh_req_write(r, "abc", 3);
    mh_req_finish(r);
    CHECK(u.heads == 0 && u.datas == 0 && u.dones == 1);
    CHECK(strstr(wire(&t), "X-Upper") == NULL);
    tproto_free(&t);
    close(fd);
}

/* ---- dispatch to typed handlers ------------------------------------------ */

static int c_started;

static void c_start(const struct mh_handler *h, struct mh_req *r)
{
    c_started++;
    mh_req_write(r, "from C", 6);
    mh_req_finish(r);
}

static const struct mh_handler_ops c_ops = {.name = "c", .start = c_start};

static void test_dispatch(void)
{
    struct mh_handler c = {&c_ops};
    struct mh_handler_table table = {0};
    int id = mh_handler_table_add(&table, &c);
    CHECK(id == 0);
    char err[256];
    struct mh_router_builder *b = mh_router_builder_new();
    CHECK(mh_router_add(b, "GET /c", 6, id, "test", err, sizeof err) == 0);
    struct mh_router *router = mh_router_build(b, err, sizeof err);
    mh_router_builder_free(b);
    CHECK(router != NULL);
    struct mh_site site = {router, &table, NULL, NULL, MH_CLEAN_REDIRECT, 307, NULL, NULL};

    struct tproto t;
    tproto_init(&t, HTTP_GET, "/c");
    mh_dispatch(&t.req, &site);
    CHECK(c_started == 1 && t.finished == 1);
    CHECK(strstr(wire(&t), "Content-Length: 6\r\n\r\nfrom C") != NULL);
    tproto_free(&t);

    tproto_init(&t, HTTP_GET, "/nope");
    mh_dispatch(&t.req, &site);
    CHECK(strstr(wire(&t), "HTTP/1.1 404 Not Found\r\n") != NULL);
    tproto_free(&t);

    tproto_init(&t, HTTP_POST, "/c");
    mh_dispatch(&t.req, &site);
    const char *w = wire(&t);
    CHECK(strstr(w, "HTTP/1.1 405 Method Not Allowed\r\n") != NULL);
    CHECK(strstr(w, "Allow: GET, HEAD\r\n") != NULL);
    tproto_free(&t);

    tproto_init(&t, HTTP_GET, "/a/../c");
    mh_dispatch(&t.req, &site);
    w = wire(&t);
    CHECK(strstr(w, "HTTP/1.1 307 Temporary Redirect\r\n") != NULL);
    CHECK(strstr(w, "Location: /c\r\n") != NULL);
    tproto_free(&t);
    mh_router_free(router);
    mh_handler_table_free(&table);
}

/* Method names by number and the client's own token, with their lengths. */
static void test_method_names(void)
{
    static const struct {
        uint8_t method;
        const char *name;
    } rows[] = {{HTTP_GET, "GET"},           {HTTP_DELETE, "DELETE"}, {HTTP_OPTIONS, "OPTIONS"},
                {HTTP_PROPFIND, "PROPFIND"}, {HTTP_PURGE, "PURGE"},   {HTTP_MSEARCH, "M-SEARCH"}};
    struct tproto t;
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        tproto_init(&t, rows[i].method, "/");
        size_t len = 0;
        CHECK_STR(mh_req_method_len(&t.req, &len), rows[i].name);
        CHECK(len == strlen(rows[i].name));
        CHECK_STR(mh_req_method(&t.req), rows[i].name);
        tproto_free(&t);
    }
    tproto_init(&t, MH_METHOD_OTHER, "/");
    strcpy(t.req.head.method_name, "BREW");
    size_t len = 0;
    CHECK_STR(mh_req_method_len(&t.req, &len), "BREW");
    CHECK(len == 4);
    tproto_free(&t);
}

int main(void)
{
    test_method_names();
    test_length_and_pairs();
    test_stream_with_references();
    test_file_range_and_head_only();
    test_closed();
    test_filters();
    test_dispatch();
    return unit_report();
}
