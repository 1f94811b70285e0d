/*
 * delayproxy: a TCP proxy on loopback that holds every byte `delay` ms in
 * each direction, so a local client pays a real round trip (2 × delay) for
 * every exchange, connect (the first client bytes wait one more round trip)
 * and TLS handshake. With --cert/--key it also
 * terminates TLS (mbedTLS) on the client side, *behind* the delay, so TLS
 * handshakes pay their round trips too; the upstream side is plain TCP.
 * One upstream connection per client connection, so connections counted at
 * the upstream are connections the client opened.
 *
 *   delayproxy -u 127.0.0.1:8081 [-l port] [-d ms] [--cert c.pem --key k.pem]
 *
 * Prints "port N" once listening. A bench and test tool, not part of moonhttp.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <ev.h>
#include <fcntl.h>
#include <mbedtls/ctr_drbg.h>
#include <mbedtls/entropy.h>
#include <mbedtls/pk.h>
#include <mbedtls/ssl.h>
#include <mbedtls/ssl_cache.h>
#include <mbedtls/ssl_ticket.h>
#include <mbedtls/x509_crt.h>
#include <psa/crypto.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

struct chunk {
    struct chunk *next;
    double due;
    size_t len; /* 0 = end of stream */
    char data[];
};

struct queue {
    struct chunk *head, *tail;
    ev_timer timer;
    struct pair *p;
    int dir; /* 0: client → proxy, 1: proxy → client */
    double born; /* when the connection was accepted */
};

struct buf {
    char *d;
    size_t len, cap;
};

struct pair {
    int cfd, ufd;
    ev_io cio, uio;
    int cev, uev;
    struct queue in, out; /* in: from the client (delayed); out: to the client (delayed) */
    struct buf cin;       /* delivered client bytes not consumed yet (TLS input) */
    struct buf cout;      /* due bytes to write to the client */
    struct buf uout;      /* bytes to write upstream */
    bool cout_eof, closing, cin_eof, ufd_eof;
    bool tls_ok;
    mbedtls_ssl_context ssl;
};

static struct ev_loop *loop;
static double delay;
static struct sockaddr_in upstream;
static bool use_tls;
static mbedtls_ssl_config conf;
static mbedtls_x509_crt cert;
static mbedtls_pk_context key;
static mbedtls_entropy_context entropy;
static mbedtls_ctr_drbg_context drbg;
static mbedtls_ssl_cache_context cache;
static mbedtls_ssl_ticket_context ticket;

static void buf_add(struct buf *b, const void *p, size_t n)
{
    if (b->len + n > b->cap) {
        b->cap = (b->len + n) * 2 + 4096;
        b->d = realloc(b->d, b->cap);
    }
    memcpy(b->d + b->len, p, n);
    b->len += n;
}

static void buf_drop(struct buf *b, size_t n)
{
    memmove(b->d, b->d + n, b->len - n);
    b->len -= n;
}

static void pair_close(struct pair *p);
static void update(struct pair *p);

static void q_push(struct queue *q, const void *data, size_t len)
{
    struct chunk *c = malloc(sizeof *c + len);
    c->next = NULL;
    /*
     * The kernel accepted the connection at once, but a real client's first
     * byte could only leave after the connect round trip: hold it one more RTT.
     */
    double start = ev_now(loop);
    if (q->dir == 0 && start < q->born + 2 * delay)
        start = q->born + 2 * delay;
    c->due = start + delay;
    c->len = len;
    memcpy(c->data, data, len);
    if (q->tail)
        q->tail->next = c;
    else
        q->head = c;
    q->tail = c;
    if (!ev_is_active(&q->timer)) {
        ev_timer_set(&q->timer, c->due - ev_now(loop), 0.);
        ev_timer_start(loop, &q->timer);
    }
}

static void q_free(struct queue *q)
{
    while (q->head) {
        struct chunk *c = q->head;
        q->head = c->next;
        free(c);
    }
    q->tail = NULL;
    ev_timer_stop(loop, &q->timer);
}

static int bio_send(void *ctx, const unsigned char *b, size_t n)
{
    struct pair *p = ctx;
    q_push(&p->out, b, n);
    return (int)n;
}

static int bio_recv(void *ctx, unsigned char *b, size_t n)
{
    struct pair *p = ctx;
    if (p->cin.len == 0)
        return MBEDTLS_ERR_SSL_WANT_READ;
    if (n > p->cin.len)
        n = p->cin.len;
    memcpy(b, p->cin.d, n);
    buf_drop(&p->cin, n);
    return (int)n;
}

/* Client bytes became due: through TLS (or not) to the upstream. */
static void client_input(struct pair *p)
{
    if (!use_tls) {
        buf_add(&p->uout, p->cin.d, p->cin.len);
        p->cin.len = 0;
        return;
    }
    if (!p->tls_ok) {
        int rc = mbedtls_ssl_handshake(&p->ssl);
        if (rc == MBEDTLS_ERR_SSL_WANT_READ || rc == MBEDTLS_ERR_SSL_WANT_WRITE)
            return;
        if (rc != 0) {
            p->closing = true;
            return;
        }
        p->tls_ok = true;
    }
    unsigned char b[16384];
    for (;;) {
        int n = mbedtls_ssl_read(&p->ssl, b, sizeof b);
        if (n > 0) {
            buf_add(&p->uout, b, (size_t)n);
            continue;
        }
        if (n == MBEDTLS_ERR_SSL_WANT_READ || n == MBEDTLS_ERR_SSL_WANT_WRITE)
            return;
        p->closing = true; /* close_notify or error */
        return;
    }
}

static void on_queue(struct ev_loop *l, ev_timer *t, int revents)
{
    struct queue *q = t->data;
    struct pair *p = q->p;
    (void)l;
    (void)revents;
    double now = ev_now(loop);
    while (q->head && q->head->due <= now + 0.0001) {
        struct chunk *c = q->head;
        q->head = c->next;
        if (!q->head)
            q->tail = NULL;
        if (q->dir == 0) {
            if (c->len == 0)
                p->closing = true;
            else
                buf_add(&p->cin, c->data, c->len);
        } else {
            if (c->len == 0)
                p->cout_eof = true;
            else
                buf_add(&p->cout, c->data, c->len);
        }
        free(c);
    }
    if (q->dir == 0 && p->cin.len)
        client_input(p);
    if (q->head) {
        ev_timer_set(&q->timer, q->head->due - now, 0.);
        ev_timer_start(loop, &q->timer);
    }
    update(p);
}

/* Writes what can be written, sets watcher interest, closes when finished. */
static void update(struct pair *p)
{
    while (p->cout.len) {
        ssize_t n = send(p->cfd, p->cout.d, p->cout.len, MSG_NOSIGNAL);
        if (n > 0) {
            buf_drop(&p->cout, (size_t)n);
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            break;
        pair_close(p);
        return;
    }
    while (p->uout.len) {
        ssize_t n = send(p->ufd, p->uout.d, p->uout.len, MSG_NOSIGNAL);
        if (n > 0) {
            buf_drop(&p->uout, (size_t)n);
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            break;
        p->closing = true;
        break;
    }
    if ((p->cout_eof && !p->cout.len && !p->out.head) || (p->closing && !p->uout.len)) {
        pair_close(p);
        return;
    }
    int cev = (p->cin_eof ? 0 : EV_READ) | (p->cout.len ? EV_WRITE : 0);
    int uev = (p->ufd_eof ? 0 : EV_READ) | (p->uout.len ? EV_WRITE : 0);
    if (cev != p->cev) {
        ev_io_stop(loop, &p->cio);
        ev_io_set(&p->cio, p->cfd, cev);
        if (cev)
            ev_io_start(loop, &p->cio);
        p->cev = cev;
    }
    if (uev != p->uev) {
        ev_io_stop(loop, &p->uio);
        ev_io_set(&p->uio, p->ufd, uev);
        if (uev)
            ev_io_start(loop, &p->uio);
        p->uev = uev;
    }
}

static void on_client(struct ev_loop *l, ev_io *w, int revents)
{
    struct pair *p = w->data;
    (void)l;
    if (revents & EV_READ) {
        char b[65536];
        ssize_t n = recv(p->cfd, b, sizeof b, 0);
        if (n > 0)
            q_push(&p->in, b, (size_t)n);
        else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
            q_push(&p->in, "", 0);
            p->cin_eof = true;
        }
    }
    update(p);
}

static void on_upstream(struct ev_loop *l, ev_io *w, int revents)
{
    struct pair *p = w->data;
    (void)l;
    if (revents & EV_READ) {
        char b[65536];
        ssize_t n = recv(p->ufd, b, sizeof b, 0);
        if (n > 0) {
            if (use_tls && p->tls_ok)
                for (ssize_t off = 0; off < n;) {
                    int rc = mbedtls_ssl_write(&p->ssl, (unsigned char *)b + off, (size_t)(n - off));
                    if (rc <= 0)
                        break;
                    off += rc;
                }
            else if (!use_tls)
                q_push(&p->out, b, (size_t)n);
        } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
            if (use_tls && p->tls_ok)
                mbedtls_ssl_close_notify(&p->ssl);
            q_push(&p->out, "", 0);
            p->ufd_eof = true;
        }
    }
    update(p);
}

static void pair_close(struct pair *p)
{
    ev_io_stop(loop, &p->cio);
    ev_io_stop(loop, &p->uio);
    q_free(&p->in);
    q_free(&p->out);
    close(p->cfd);
    close(p->ufd);
    if (use_tls)
        mbedtls_ssl_free(&p->ssl);
    free(p->cin.d);
    free(p->cout.d);
    free(p->uout.d);
    free(p);
}

static void on_accept(struct ev_loop *l, ev_io *w, int revents)
{
    (void)l;
    (void)revents;
    for (;;) {
        int cfd = accept4(w->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (cfd < 0)
            return;
        int ufd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (connect(ufd, (struct sockaddr *)&upstream, sizeof upstream) < 0) {
            close(cfd);
            close(ufd);
            continue;
        }
        fcntl(ufd, F_SETFL, O_NONBLOCK);
        int one = 1;
        setsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        setsockopt(ufd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        struct pair *p = calloc(1, sizeof *p);
        p->cfd = cfd;
        p->ufd = ufd;
        ev_io_init(&p->cio, on_client, cfd, EV_READ);
        ev_io_init(&p->uio, on_upstream, ufd, EV_READ);
        p->cio.data = p->uio.data = p;
        p->cev = p->uev = EV_READ;
        ev_io_start(loop, &p->cio);
        ev_io_start(loop, &p->uio);
        p->in.p = p->out.p = p;
        p->in.dir = 0;
        p->in.born = ev_now(loop);
        p->out.dir = 1;
        ev_init(&p->in.timer, on_queue);
        ev_init(&p->out.timer, on_queue);
        p->in.timer.data = &p->in;
        p->out.timer.data = &p->out;
        if (use_tls) {
            mbedtls_ssl_init(&p->ssl);
            mbedtls_ssl_setup(&p->ssl, &conf);
            mbedtls_ssl_set_bio(&p->ssl, p, bio_send, bio_recv, NULL);
        }
    }
}

int main(int argc, char **argv)
{
    int port = 0;
    double delay_ms = 10;
    const char *up = NULL, *certf = NULL, *keyf = NULL;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "-l"))
            port = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-d"))
            delay_ms = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "-u"))
            up = argv[i + 1];
        else if (!strcmp(argv[i], "--cert"))
            certf = argv[i + 1];
        else if (!strcmp(argv[i], "--key"))
            keyf = argv[i + 1];
    }
    if (!up || !strchr(up, ':')) {
        fprintf(stderr, "usage: delayproxy -u host:port [-l port] [-d ms] [--cert f --key f]\n");
        return 2;
    }
    delay = delay_ms / 1000.0;
    upstream.sin_family = AF_INET;
    upstream.sin_port = htons((uint16_t)atoi(strchr(up, ':') + 1));
    char host[64];
    snprintf(host, sizeof host, "%.*s", (int)(strchr(up, ':') - up), up);
    inet_pton(AF_INET, host, &upstream.sin_addr);
    signal(SIGPIPE, SIG_IGN);
    if (certf && keyf) {
        use_tls = true;
        mbedtls_ssl_config_init(&conf);
        mbedtls_x509_crt_init(&cert);
        mbedtls_pk_init(&key);
        mbedtls_entropy_init(&entropy);
        mbedtls_ctr_drbg_init(&drbg);
        mbedtls_ssl_cache_init(&cache);
        /* Mbed TLS 3.6: TLS 1.3 runs on PSA Crypto, set up once before any handshake. */
        if (psa_crypto_init() != PSA_SUCCESS ||
            mbedtls_ctr_drbg_seed(&drbg, mbedtls_entropy_func, &entropy, NULL, 0) ||
            mbedtls_x509_crt_parse_file(&cert, certf) ||
            mbedtls_pk_parse_keyfile(&key, keyf, NULL, mbedtls_ctr_drbg_random, &drbg) ||
            mbedtls_ssl_config_defaults(&conf, MBEDTLS_SSL_IS_SERVER, MBEDTLS_SSL_TRANSPORT_STREAM,
                                        MBEDTLS_SSL_PRESET_DEFAULT) ||
            mbedtls_ssl_conf_own_cert(&conf, &cert, &key)) {
            fprintf(stderr, "delayproxy: TLS setup failed\n");
            return 1;
        }
        mbedtls_ssl_conf_rng(&conf, mbedtls_ctr_drbg_random, &drbg);
        /* Both resumption kinds: session IDs (cache) and tickets (what Go's client uses). */
        mbedtls_ssl_conf_session_cache(&conf, &cache, mbedtls_ssl_cache_get, mbedtls_ssl_cache_set);
        mbedtls_ssl_ticket_init(&ticket);
        if (mbedtls_ssl_ticket_setup(&ticket, mbedtls_ctr_drbg_random, &drbg, MBEDTLS_CIPHER_AES_256_GCM,
                                     86400) == 0)
            mbedtls_ssl_conf_session_tickets_cb(&conf, mbedtls_ssl_ticket_write,
                                                mbedtls_ssl_ticket_parse, &ticket);
    }
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t al = sizeof a;
    if (bind(lfd, (struct sockaddr *)&a, sizeof a) < 0 || listen(lfd, 128) < 0) {
        perror("delayproxy: listen");
        return 1;
    }
    getsockname(lfd, (struct sockaddr *)&a, &al);
    printf("port %d\n", ntohs(a.sin_port));
    fflush(stdout);
    loop = EV_DEFAULT;
    ev_io lio;
    ev_io_init(&lio, on_accept, lfd, EV_READ);
    ev_io_start(loop, &lio);
    ev_run(loop, 0);
    return 0;
}
