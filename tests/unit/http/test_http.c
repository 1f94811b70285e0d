/* Response heads byte for byte, header pairs and validation, request targets. */
#include "outq.h"
#include "request_head.h"
#include "h1_response.h"
#include "unit.h"

#include <stdio.h>
#include <stdlib.h>

static const char DATE[] = "Date: Thu, 01 Jan 2026 00:00:00 GMT\r\n";

/* The queue's bytes as one string (memory and referenced chunks only). */
static char *flatten(struct mh_outq *q)
{
    static struct mh_buf out;
    out.len = 0;
    for (uint32_t i = 0; i < mh_outq_count(q); i++) {
        const struct mh_chunk *c = mh_outq_chunk(q, i);
        CHECK(c->kind != MH_CHUNK_FILE);
        mh_buf_append(&out, mh_outq_chunk_mem(q, c), (size_t)c->len);
    }
    mh_buf_append(&out, "", 1);
    return out.data;
}

static char *emit(struct mh_response *r, uint8_t minor, bool head, bool keep, bool complete)
{
    static struct mh_outq out;
    mh_outq_clear(&out);
    struct mh_h1_head_ctx ctx = {DATE, sizeof DATE - 1, minor, head, keep, false};
    CHECK(mh_h1_response_emit(r, &out, &ctx, complete) == 0);
    return flatten(&out);
}

static void body(struct mh_response *r, const char *s)
{
    mh_outq_append(&r->body, s, strlen(s));
}

static void test_heads(void)
{
    struct mh_response r;
    memset(&r, 0, sizeof r);
    mh_response_reset(&r);
    body(&r, "hello");
    CHECK_STR(emit(&r, 1, false, true, true),
              "HTTP/1.1 200 OK\r\nServer: moonhttp\r\nDate: Thu, 01 Jan 2026 00:00:00 GMT\r\n"
              "Content-Type: text/plain; charset=utf-8\r\nContent-Length: 5\r\n\r\nhello");

    mh_response_reset(&r);
    r.status = 404;
    CHECK(mh_response_header(&r, "Content-Type", 12, "application/json", 16, true) == NULL);
    body(&r, "{}");
    CHECK_STR(emit(&r, 0, false, false, true),
              "HTTP/1.1 404 Not Found\r\nServer: moonhttp\r\nDate: Thu, 01 Jan 2026 00:00:00 "
              "GMT\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: "
              "close\r\n\r\n{}");

    /* HEAD: the length of the body it would have, no body */
    mh_response_reset(&r);
    body(&r, "hello");
    const char *head = emit(&r, 1, true, true, true);
    CHECK(strstr(head, "Content-Length: 5\r\n") != NULL);
    CHECK(strstr(head, "hello") == NULL);

    /* streaming: chunked on 1.1, terminated on completion */
    mh_response_reset(&r);
    body(&r, "abc");
    const char *part = emit(&r, 1, false, true, false);
    CHECK(strstr(part, "Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n") != NULL);
    CHECK_STR(emit(&r, 1, false, true, true), "0\r\n\r\n");

    /* streaming on 1.0: no chunking, body ends at close */
    mh_response_reset(&r);
    body(&r, "abc");
    part = emit(&r, 0, false, false, false);
    CHECK(strstr(part, "chunked") == NULL);
    CHECK(strstr(part, "Connection: close\r\n\r\nabc") != NULL);

    /* bodyless statuses carry no length and no body */
    mh_response_reset(&r);
    r.status = 204;
    const char *nc = emit(&r, 1, false, true, true);
    CHECK(strstr(nc, "HTTP/1.1 204 No Content\r\n") == nc);
    CHECK(strstr(nc, "Content-Length") == NULL);

    /* uncommon status lines are formatted */
    mh_response_reset(&r);
    r.status = 431;
    CHECK(
        strstr(emit(&r, 1, false, true, true), "HTTP/1.1 431 Request Header Fields Too Large\r\n"));

    /* Content-Length digits, one to nineteen of them (a HEAD answer: no body follows) */
    static const char *const lengths[] = {
        "0", "7", "10", "99", "100", "101", "1000", "65536", "4294967296", "9999999999999999999"};
    for (size_t i = 0; i < sizeof lengths / sizeof lengths[0]; i++) {
        mh_response_reset(&r);
        CHECK(mh_response_header(&r, "Content-Length", 14, lengths[i], strlen(lengths[i]), true) ==
              NULL);
        char want[64];
        snprintf(want, sizeof want, "\r\nContent-Length: %s\r\n\r\n", lengths[i]);
        CHECKF(strstr(emit(&r, 1, true, true, true), want) != NULL, "length %s", lengths[i]);
    }

    /* header rules */
    mh_response_reset(&r);
    CHECK(mh_response_header(&r, "X-A", 3, "a\r\nInjected: 1", 15, true) != NULL);
    CHECK(mh_response_header(&r, "X-A", 3, "a\nb", 3, true) != NULL);
    CHECK(mh_response_header(&r, "X-A", 3, "a\0b", 3, true) != NULL);
    CHECK(mh_response_header(&r, "X A", 3, "v", 1, true) != NULL);
    CHECK(mh_response_header(&r, "", 0, "v", 1, true) != NULL);
    /* a known name is recognised in any case; the same length with a non-token byte is not it */
    CHECK(mh_response_header(&r, "Content Type", 12, "text/html", 9, true) != NULL);
    CHECK(mh_response_header(&r, "Content-Type", 12, "a\nb", 3, true) != NULL);
    CHECK(!r.has_type && r.npairs == 0);
    CHECK(mh_response_header(&r, "content-type", 12, "text/html", 9, true) == NULL);
    CHECK(r.has_type && r.npairs == 1);
    mh_response_unset(&r, "CONTENT-TYPE", 12);
    CHECK(!r.has_type && r.npairs == 0);
    CHECK(mh_response_header(&r, "Transfer-Encoding", 17, "gzip", 4, true) != NULL);
    CHECK(mh_response_header(&r, "Content-Length", 14, "12x", 3, true) != NULL);
    CHECK(mh_response_header(&r, "X-Multi", 7, "1", 1, false) == NULL);
    CHECK(mh_response_header(&r, "X-Multi", 7, "2", 1, false) == NULL);
    CHECK(mh_response_header(&r, "x-multi", 7, "3", 1, true) == NULL); /* replaces both */
    CHECK(r.npairs == 1);
    size_t vlen;
    const char *v = mh_response_get(&r, "X-MULTI", 7, &vlen);
    CHECK(v && vlen == 1 && *v == '3');
    CHECK(strstr(emit(&r, 1, false, true, true), "\r\nx-multi: 3\r\nContent-Length: 0\r\n"));
    CHECK(mh_response_header(&r, "Connection", 10, "close", 5, true) == NULL);
    CHECK(r.close);
    mh_response_free(&r);
}

static void test_targets(void)
{
    struct mh_request r;
    memset(&r, 0, sizeof r);
    const char *t = "/a/b?x=1&y=2";
    r.target.off = 0;
    r.target.len = (uint32_t)strlen(t);
    mh_request_split_target(&r, t);
    CHECK(r.path.len == 4 && memcmp(t + r.path.off, "/a/b", 4) == 0);
    CHECK(r.query.len == 7 && memcmp(t + r.query.off, "x=1&y=2", 7) == 0);

    const char *abs = "http://example.com:8080/p?q";
    memset(&r, 0, sizeof r);
    r.target.len = (uint32_t)strlen(abs);
    mh_request_split_target(&r, abs);
    CHECK(r.host.len == 16 && memcmp(abs + r.host.off, "example.com:8080", 16) == 0);
    CHECK(r.path.len == 2 && memcmp(abs + r.path.off, "/p", 2) == 0);
    CHECK(r.query.len == 1);

    const char *odd = "/x://y/z"; /* a path: a scheme starts with a letter */
    memset(&r, 0, sizeof r);
    r.target.len = (uint32_t)strlen(odd);
    mh_request_split_target(&r, odd);
    CHECK(r.host.len == 0);
    CHECK(r.path.len == 8 && r.path.off == 0);

    char out[64];
    size_t n = mh_form_unescape("a+b%20c%2", 9, out);
    out[n] = 0;
    CHECK_STR(out, "a b c%2");
    CHECK(mh_strieq("Content-Length", 14, "content-length", 14));
    CHECK(!mh_strieq("Content-Lengtx", 14, "content-length", 14));
}

/* The full list is checked through the binary in spec/status_text_spec.lua; here the edges. */
static void test_status_texts(void)
{
    int known = 0;
    for (int code = -1; code < 1000; code++)
        known += strcmp(mh_status_text(code), "Unknown") != 0;
    CHECKF(known == 62, "%d codes have a phrase, Go's StatusText knows 62", known);
    CHECK_STR(mh_status_text(416), "Range Not Satisfiable");
    CHECK_STR(mh_status_text(103), "Early Hints");
    CHECK_STR(mh_status_text(511), "Network Authentication Required");
    CHECK_STR(mh_status_text(418), "I'm a teapot");
    CHECK_STR(mh_status_text(599), "Unknown");
    CHECK_STR(mh_status_text(600), "Unknown");
}

/* The 8-bytes-a-step check against the byte table: every stop byte at every position. */
static void test_value_stop(void)
{
    char v[40];
    for (size_t len = 0; len <= sizeof v; len++) {
        memset(v, 'a', sizeof v);
        CHECKF(!mh_value_has_stop(v, len), "clean value of %zu bytes", len);
        for (size_t at = 0; at < len; at++) {
            static const char stops[] = {'\r', '\n', '\0'};
            for (size_t k = 0; k < sizeof stops; k++) {
                v[at] = stops[k];
                CHECKF(mh_value_has_stop(v, len), "byte %d at %zu of %zu", stops[k], at, len);
                CHECKF(!mh_value_has_stop(v, at), "stop byte just past %zu bytes", at);
                v[at] = (char)0x8d; /* high bytes and near misses are allowed */
                CHECK(!mh_value_has_stop(v, len));
                v[at] = 0x0b;
                CHECK(!mh_value_has_stop(v, len));
                v[at] = 'a';
            }
            /* every byte, among letters and among TABs (a TAB is below CR: the slow test) */
            for (int fill = 0; fill < 2; fill++) {
                memset(v, fill ? '\t' : 'a', len);
                for (int b = 0; b < 256; b++) {
                    v[at] = (char)b;
                    CHECKF(mh_value_has_stop(v, len) == (mh_value_stop[b] != 0),
                           "byte %d at %zu of %zu", b, at, len);
                }
            }
            memset(v, 'a', sizeof v);
        }
    }
}

/* Trailers: a chunked tail; declared before the head they make a finished response chunked. */
static void test_trailers(void)
{
    struct mh_response r;
    memset(&r, 0, sizeof r);
    mh_response_reset(&r);
    body(&r, "hello");
    CHECK(mh_response_trailer(&r, "X-Sum", 5, "42", 2) == NULL);
    CHECK(mh_response_trailer(&r, "Content-Length", 14, "1", 1) != NULL);
    CHECK(mh_response_trailer(&r, "Bad Name", 8, "1", 1) != NULL);
    CHECK(mh_response_trailer(&r, "X-A", 3, "a\r\nb", 4) != NULL);
    CHECK_STR(emit(&r, 1, false, true, true),
              "HTTP/1.1 200 OK\r\nServer: moonhttp\r\nDate: Thu, 01 Jan 2026 00:00:00 GMT\r\n"
              "Content-Type: text/plain; charset=utf-8\r\nTransfer-Encoding: chunked\r\n\r\n"
              "5\r\nhello\r\n0\r\nX-Sum: 42\r\n\r\n");

    /* set while streaming: after the last chunk */
    mh_response_reset(&r);
    body(&r, "abc");
    emit(&r, 1, false, true, false);
    CHECK(mh_response_trailer(&r, "X-A", 3, "1", 1) == NULL);
    CHECK(mh_response_trailer(&r, "X-B", 3, "2", 1) == NULL);
    CHECK_STR(emit(&r, 1, false, true, true), "0\r\nX-A: 1\r\nX-B: 2\r\n\r\n");
    size_t pos = 0, nlen, vlen;
    const char *name, *value;
    CHECK(mh_response_trailer_next(&r, &pos, &name, &nlen, &value, &vlen));
    CHECK(nlen == 3 && memcmp(name, "X-A", 3) == 0 && vlen == 1 && value[0] == '1');
    CHECK(mh_response_trailer_next(&r, &pos, &name, &nlen, &value, &vlen));
    CHECK(!mh_response_trailer_next(&r, &pos, &name, &nlen, &value, &vlen));

    /* HTTP/1.0: no chunked body, so no trailers; the length stays */
    mh_response_reset(&r);
    body(&r, "hi");
    CHECK(mh_response_trailer(&r, "X-A", 3, "1", 1) == NULL);
    CHECK(strstr(emit(&r, 0, false, false, true), "Content-Length: 2\r\n") != NULL);
    mh_response_free(&r);
}

int main(void)
{
    test_heads();
    test_trailers();
    test_value_stop();
    test_status_texts();
    test_targets();
    return unit_report();
}
