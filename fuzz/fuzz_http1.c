/*
 * libFuzzer target over the whole request path: bytes arrive on a real
 * (socketpair) connection and go through the llhttp glue, the limits, the
 * router and Lua handlers; responses are read back and discarded. The first
 * input byte picks how the rest is split into reads, so partial heads and
 * bodies across reads are covered.
 */
#include "config.h"
#include "conn.h"
#include "log.h"
#include "lua_load.h"
#include "lua_vm.h"
#include "worker.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* Bytes every input starts with (fuzz_h2.c: the HTTP/2 connection preface). */
#ifndef MH_FUZZ_PREFIX
#define MH_FUZZ_PREFIX ""
#endif

static struct mh_config config;
static struct mh_worker worker;

static void setup(void)
{
    char err[1024];
    mh_config_init(&config);
    const char *app = getenv("MH_FUZZ_APP");
    config.script = app ? app : MH_FUZZ_APP_DEFAULT;
    config.max_header_bytes = 4096;
    config.max_body_bytes = 4096;
    mh_log_threshold = MH_LOG_NONE; /* quiet: handler errors are expected */
    struct mh_gen *g = mh_gen_new(&config, false, err, sizeof err);
    if (!g || mh_config_validate(&config, err, sizeof err) < 0) {
        fprintf(stderr, "fuzz setup: %s\n", err);
        abort();
    }
    for (size_t i = 0; i < config.nlisten; i++)
        free(config.listen[i]);
    config.nlisten = 0; /* no listening sockets: connections come from socketpairs */
    if (mh_worker_init(&worker, EV_DEFAULT, &config, g, err, sizeof err) < 0) {
        fprintf(stderr, "fuzz setup: %s\n", err);
        abort();
    }
    mh_gen_unref(g);
}

static void drain(int fd)
{
    char buf[65536];
    while (read(fd, buf, sizeof buf) > 0) {
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int ready;
    if (!ready) {
        setup();
        ready = 1;
    }
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) < 0)
        abort();
    struct sockaddr_storage peer;
    memset(&peer, 0, sizeof peer);
    struct sockaddr_in *a = (struct sockaddr_in *)&peer;
    a->sin_family = AF_INET;
    a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a->sin_port = htons(1234);
    struct mh_conn *c =
        mh_http_accept(&worker.http, &worker.app.base, NULL, sv[0], &peer, sizeof *a);
    if (!c)
        abort();
    if (sizeof MH_FUZZ_PREFIX > 1 &&
        write(sv[1], MH_FUZZ_PREFIX, sizeof MH_FUZZ_PREFIX - 1) != sizeof MH_FUZZ_PREFIX - 1)
        abort();
    size_t step = size ? (size_t)data[0] % 64 + 1 : 1;
    const uint8_t *p = size ? data + 1 : data;
    size_t left = size ? size - 1 : 0;
    for (int round = 0; round < 4096 && (left > 0 || round < 8); round++) {
        if (left > 0) {
            size_t n = left < step ? left : step;
            ssize_t w = write(sv[1], p, n);
            if (w > 0) {
                p += w;
                left -= (size_t)w;
            }
            if (left == 0)
                shutdown(sv[1], SHUT_WR);
        }
        ev_run(worker.loop, EVRUN_NOWAIT);
        drain(sv[1]);
        if (mh_conn_closed(c))
            break;
    }
    if (!mh_conn_closed(c))
        mh_conn_close(c);
    ev_run(worker.loop, EVRUN_NOWAIT); /* frees the connection */
    close(sv[1]);
    return 0;
}
