/*
 * A deterministic keep-alive client for counting work per request: sends N
 * GET requests one after another over ONE connection to 127.0.0.1:PORT,
 * cycling through the seed's 12 routes in a fixed order, and reads each
 * response completely (Content-Length or chunked: nginx + lua answers
 * chunked) before sending the next. Same N, same bytes, every run — so two
 * runs with different N differ only by the extra requests.
 *
 * Usage: kaclient PORT N [DEPTH]
 * With DEPTH > 1 the requests are pipelined: DEPTH of them in one write, then
 * their DEPTH responses are read (N is rounded up to a multiple of DEPTH).
 * Exits 1, naming the request, on any non-200 answer, a closed connection or
 * a response it cannot frame.
 */
#define _GNU_SOURCE /* memmem */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

static const char *const routes[] = {
    "/api/users",   "/api/users/42", "/api/orders",  "/api/orders/42",
    "/api/items/0", "/api/items/1",  "/api/items/2", "/api/items/3",
    "/api/items/4", "/api/items/5",  "/api/items/6", "/api/items/7",
};
#define NROUTES (sizeof routes / sizeof routes[0])

static int fd;
static char buf[65536];
static size_t pos, len; /* unread bytes are buf[pos..len) */
static unsigned long req_no;

static void die(const char *what) {
    fprintf(stderr, "kaclient: request %lu: %s\n", req_no, what);
    exit(1);
}

/* Makes at least n unread bytes available (n < sizeof buf). */
static void need(size_t n) {
    if (len - pos >= n)
        return;
    memmove(buf, buf + pos, len - pos);
    len -= pos;
    pos = 0;
    while (len < n) {
        ssize_t r = read(fd, buf + len, sizeof buf - len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            die(r == 0 ? "connection closed by server" : strerror(errno));
        len += (size_t)r;
    }
}

/* Returns the length of the unread data up to and including `delim`. */
static size_t until(const char *delim) {
    size_t dl = strlen(delim);
    for (size_t have = 0;;) {
        need(have + 1);
        char *p = memmem(buf + pos, len - pos, delim, dl);
        if (p)
            return (size_t)(p - (buf + pos)) + dl;
        have = len - pos;
        if (have >= sizeof buf - 1)
            die("response head too large");
    }
}

static void read_response(void) {
    size_t head = until("\r\n\r\n");
    char *h = buf + pos;
    if (head < 12 || memcmp(h, "HTTP/1.1 200", 12) != 0)
        die("status is not HTTP/1.1 200");
    h[head - 1] = '\0'; /* the final '\n': headers become one C string */
    long clen = -1;
    int chunked = 0;
    for (char *line = strstr(h, "\r\n"); line && line[2] != '\r'; line = strstr(line + 2, "\r\n")) {
        char *l = line + 2;
        if (strncasecmp(l, "Content-Length:", 15) == 0)
            clen = strtol(l + 15, NULL, 10);
        else if (strncasecmp(l, "Transfer-Encoding:", 18) == 0 && strstr(l, "chunked"))
            chunked = 1;
        else if (strncasecmp(l, "Connection:", 11) == 0 && strncasecmp(l + 11, " close", 6) == 0)
            die("server closes the connection");
    }
    pos += head;
    if (!chunked) {
        if (clen < 0 || (size_t)clen > sizeof buf)
            die("response has neither Content-Length nor chunked body (or it is huge)");
        need((size_t)clen);
        pos += (size_t)clen;
        return;
    }
    for (;;) {
        size_t l = until("\r\n");
        unsigned long size = strtoul(buf + pos, NULL, 16);
        pos += l;
        if (size > sizeof buf - 2)
            die("chunk too large");
        need(size + 2); /* chunk data and its CRLF; the last chunk has no trailers */
        pos += size + 2;
        if (size == 0)
            return;
    }
}

int main(int argc, char **argv) {
    if (argc != 3 && argc != 4) {
        fprintf(stderr, "usage: %s PORT N [DEPTH]\n", argv[0]);
        return 2;
    }
    unsigned long n = strtoul(argv[2], NULL, 10);
    unsigned long depth = argc == 4 ? strtoul(argv[3], NULL, 10) : 1;
    if (depth < 1 || depth > 64) {
        fprintf(stderr, "kaclient: DEPTH must be 1..64\n");
        return 2;
    }
    struct sockaddr_in addr = {.sin_family = AF_INET,
                               .sin_port = htons((unsigned short)atoi(argv[1])),
                               .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    fd = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(fd, (struct sockaddr *)&addr, sizeof addr) < 0) {
        perror("kaclient: connect");
        return 1;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    char req[64 * 64];
    unsigned long sent = 0;
    for (req_no = 1; sent < n;) {
        size_t rl = 0;
        for (unsigned long i = 0; i < depth; i++)
            rl += (size_t)snprintf(req + rl, sizeof req - rl,
                                   "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
                                   routes[(sent + i) % NROUTES]);
        if (write(fd, req, rl) != (ssize_t)rl)
            die("short write");
        sent += depth;
        for (unsigned long i = 0; i < depth; i++, req_no++)
            read_response();
    }
    n = sent;
    close(fd);
    printf("kaclient: %lu requests, all 200\n", n);
    return 0;
}
