/* Response heads, header validation, request targets, config and listen parsing. */
#include "config.h"
#include "listener.h"
#include "request.h"
#include "response.h"
#include "unit.h"

#include <netinet/in.h>
#include <stdlib.h>

static const char DATE[] = "Date: Thu, 01 Jan 2026 00:00:00 GMT\r\n";

static char *emit(struct mh_response *r, uint8_t minor, bool head, bool keep, bool complete)
{
    static struct mh_buf out;
    out.len = 0;
    struct mh_head_ctx ctx = {DATE, sizeof DATE - 1, minor, head, keep};
    CHECK(mh_response_emit(r, &out, &ctx, complete) == 0);
    mh_buf_append(&out, "", 1);
    return out.data;
}

static void test_heads(void)
{
    struct mh_response r;
    memset(&r, 0, sizeof r);
    mh_response_reset(&r);
    mh_buf_append_str(&r.body, "hello");
    CHECK_STR(emit(&r, 1, false, true, true),
              "HTTP/1.1 200 OK\r\nServer: moonhttp\r\nDate: Thu, 01 Jan 2026 00:00:00 GMT\r\n"
              "Content-Type: text/plain; charset=utf-8\r\nContent-Length: 5\r\n\r\nhello");

    mh_response_reset(&r);
    r.status = 404;
    CHECK(mh_response_header(&r, "Content-Type", 12, "application/json", 16, true) == NULL);
    mh_buf_append_str(&r.body, "{}");
    CHECK_STR(emit(&r, 0, false, false, true),
              "HTTP/1.1 404 Not Found\r\nServer: moonhttp\r\nDate: Thu, 01 Jan 2026 00:00:00 "
              "GMT\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: "
              "close\r\n\r\n{}");

    /* HEAD: the length of the body it would have, no body */
    mh_response_reset(&r);
    mh_buf_append_str(&r.body, "hello");
    const char *head = emit(&r, 1, true, true, true);
    CHECK(strstr(head, "Content-Length: 5\r\n") != NULL);
    CHECK(strstr(head, "hello") == NULL);

    /* streaming: chunked on 1.1, terminated on completion */
    mh_response_reset(&r);
    mh_buf_append_str(&r.body, "abc");
    const char *part = emit(&r, 1, false, true, false);
    CHECK(strstr(part, "Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n") != NULL);
    CHECK_STR(emit(&r, 1, false, true, true), "0\r\n\r\n");

    /* streaming on 1.0: no chunking, body ends at close */
    mh_response_reset(&r);
    mh_buf_append_str(&r.body, "abc");
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

    /* header rules */
    mh_response_reset(&r);
    CHECK(mh_response_header(&r, "X-A", 3, "a\r\nInjected: 1", 15, true) != NULL);
    CHECK(mh_response_header(&r, "X-A", 3, "a\nb", 3, true) != NULL);
    CHECK(mh_response_header(&r, "X-A", 3, "a\0b", 3, true) != NULL);
    CHECK(mh_response_header(&r, "X A", 3, "v", 1, true) != NULL);
    CHECK(mh_response_header(&r, "", 0, "v", 1, true) != NULL);
    CHECK(mh_response_header(&r, "Transfer-Encoding", 17, "gzip", 4, true) != NULL);
    CHECK(mh_response_header(&r, "Content-Length", 14, "12x", 3, true) != NULL);
    CHECK(mh_response_header(&r, "X-Multi", 7, "1", 1, false) == NULL);
    CHECK(mh_response_header(&r, "X-Multi", 7, "2", 1, false) == NULL);
    CHECK(mh_response_header(&r, "x-multi", 7, "3", 1, true) == NULL); /* replaces both */
    mh_buf_append(&r.headers, "", 1);
    CHECK_STR(r.headers.data, "x-multi: 3\r\n");
    r.headers.len--;
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

    char out[64];
    size_t n = mh_form_unescape("a+b%20c%2", 9, out);
    out[n] = 0;
    CHECK_STR(out, "a b c%2");
    CHECK(mh_strieq("Content-Length", 14, "content-length", 14));
    CHECK(!mh_strieq("Content-Lengtx", 14, "content-length", 14));
}

static void test_config(void)
{
    struct mh_config c;
    char err[256];
    mh_config_init(&c);
    char *argv[] = {"moonhttp",      "--idle-timeout",
                    "500ms",         "--max-body-bytes=64k",
                    "--tcp-nodelay", "off",
                    "--listen",      "127.0.0.1:9000",
                    "app.lua",       NULL};
    CHECK(mh_config_parse_args(&c, 9, argv, err, sizeof err) == 0);
    CHECK(c.idle_timeout == 0.5);
    CHECK(c.max_body_bytes == 65536);
    CHECK(!c.tcp_nodelay);
    CHECK(c.nlisten == 1 && strcmp(c.listen[0], "127.0.0.1:9000") == 0);
    CHECK_STR(c.script, "app.lua");
    mh_config_free(&c);

    mh_config_init(&c);
    char *bad[] = {"moonhttp", "--read-header-timeout", "-1", "app.lua", NULL};
    CHECK(mh_config_parse_args(&c, 4, bad, err, sizeof err) < 0);
    CHECK(strstr(err, "out of range") != NULL);
    char *unknown[] = {"moonhttp", "--nope", "1", "app.lua", NULL};
    CHECK(mh_config_parse_args(&c, 4, unknown, err, sizeof err) < 0);
    CHECK(strstr(err, "unknown flag --nope") != NULL);
    char *size[] = {"moonhttp", "--max-header-bytes", "12q", "app.lua", NULL};
    CHECK(mh_config_parse_args(&c, 4, size, err, sizeof err) < 0);
    mh_config_free(&c);

    struct sockaddr_storage ss;
    socklen_t len;
    CHECK(mh_listen_addr_parse(":8080", &ss, &len) == NULL && ss.ss_family == AF_INET6);
    CHECK(mh_listen_addr_parse("127.0.0.1:80", &ss, &len) == NULL && ss.ss_family == AF_INET);
    CHECK(mh_listen_addr_parse("[::1]:80", &ss, &len) == NULL && ss.ss_family == AF_INET6);
    CHECK(mh_listen_addr_parse("localhost:80", &ss, &len) == NULL && ss.ss_family == AF_INET);
    CHECK(mh_listen_addr_parse("host:99999", &ss, &len) != NULL);
    CHECK(mh_listen_addr_parse("example.com:80", &ss, &len) != NULL);
    CHECK(mh_listen_addr_parse("[::1:80", &ss, &len) != NULL);
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

int main(void)
{
    test_heads();
    test_status_texts();
    test_targets();
    test_config();
    return unit_report();
}
