/* Settings from the command line, and listen addresses. */
#include "config.h"
#include "listener.h"
#include "unit.h"

#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

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

int main(void)
{
    test_config();
    return unit_report();
}
