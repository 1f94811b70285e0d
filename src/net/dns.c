#include "dns.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define CACHE_SIZE 64

const char mh_dns_err_no_host[] = "dns: no such host";
const char mh_dns_err_nomem[] = "dns: out of memory";
const char mh_dns_err_thread[] = "dns: cannot start a lookup thread";

struct cache_entry {
    char host[256];
    double expires;
    struct mh_dns_addrs addrs; /* port 0 */
};

/*
 * What the lookup threads share with the loop. It outlives struct mh_dns
 * when a thread is still inside getaddrinfo at shutdown: the last of the
 * loop and the threads to let go frees it, and `alive` tells a finishing
 * thread whether anyone still listens.
 */
struct shared {
    pthread_mutex_t mu;
    int refs;
    bool alive;
    struct ev_loop *loop;
    ev_async *async;
    struct mh_dns_job *done; /* finished lookups, for the loop */
};

struct mh_dns_job {
    struct mh_dns_job *next;
    struct shared *sh;
    struct mh_dns_query *q; /* NULL once cancelled (loop side only) */
    char host[256];
    uint16_t port;
    int rc;
    struct mh_dns_addrs addrs;
};

struct mh_dns {
    struct ev_loop *loop;
    ev_async async;
    struct shared *sh;
    struct cache_entry cache[CACHE_SIZE];
    unsigned next_slot;
    unsigned pending;
};

static void shared_unref(struct shared *sh)
{
    pthread_mutex_lock(&sh->mu);
    int left = --sh->refs;
    pthread_mutex_unlock(&sh->mu);
    if (left == 0) {
        while (sh->done) {
            struct mh_dns_job *j = sh->done;
            sh->done = j->next;
            free(j);
        }
        pthread_mutex_destroy(&sh->mu);
        free(sh);
    }
}

static void set_port(struct mh_dns_addrs *a, uint16_t port)
{
    for (int i = 0; i < a->n; i++) {
        if (a->a[i].ss_family == AF_INET)
            ((struct sockaddr_in *)&a->a[i])->sin_port = htons(port);
        else
            ((struct sockaddr_in6 *)&a->a[i])->sin6_port = htons(port);
    }
}

static void *lookup_thread(void *arg)
{
    struct mh_dns_job *j = arg;
    struct addrinfo hints = {0}, *res = NULL;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_ADDRCONFIG;
    j->rc = getaddrinfo(j->host, NULL, &hints, &res);
    j->addrs.n = 0;
    for (struct addrinfo *ai = res; ai && j->addrs.n < MH_DNS_MAX_ADDRS; ai = ai->ai_next) {
        if (ai->ai_addrlen > sizeof j->addrs.a[0])
            continue;
        memcpy(&j->addrs.a[j->addrs.n], ai->ai_addr, ai->ai_addrlen);
        j->addrs.len[j->addrs.n++] = ai->ai_addrlen;
    }
    if (res)
        freeaddrinfo(res);
    struct shared *sh = j->sh;
    pthread_mutex_lock(&sh->mu);
    j->next = sh->done;
    sh->done = j;
    if (sh->alive)
        ev_async_send(sh->loop, sh->async);
    pthread_mutex_unlock(&sh->mu);
    shared_unref(sh);
    return NULL;
}

static void cache_put(struct mh_dns *d, const char *host, const struct mh_dns_addrs *a)
{
    struct cache_entry *e = &d->cache[d->next_slot++ % CACHE_SIZE];
    strcpy(e->host, host);
    e->addrs = *a;
    set_port(&e->addrs, 0);
    e->expires = ev_now(d->loop) + MH_DNS_TTL;
}

static void on_async(struct ev_loop *loop, ev_async *w, int revents)
{
    struct mh_dns *d = w->data;
    (void)loop;
    (void)revents;
    pthread_mutex_lock(&d->sh->mu);
    struct mh_dns_job *done = d->sh->done;
    d->sh->done = NULL;
    pthread_mutex_unlock(&d->sh->mu);
    while (done) {
        struct mh_dns_job *j = done;
        done = j->next;
        d->pending--;
        if (j->rc == 0 && j->addrs.n > 0)
            cache_put(d, j->host, &j->addrs);
        struct mh_dns_query *q = j->q;
        if (q) {
            q->_job = NULL;
            if (j->rc == 0 && j->addrs.n > 0) {
                set_port(&j->addrs, j->port);
                q->cb(q, NULL, &j->addrs);
            } else {
                q->cb(q, mh_dns_err_no_host, NULL);
            }
        }
        free(j);
    }
    if (d->pending == 0)
        ev_async_stop(d->loop, &d->async);
}

struct mh_dns *mh_dns_new(struct ev_loop *loop)
{
    struct mh_dns *d = calloc(1, sizeof *d);
    struct shared *sh = calloc(1, sizeof *sh);
    if (!d || !sh) {
        free(d);
        free(sh);
        return NULL;
    }
    pthread_mutex_init(&sh->mu, NULL);
    sh->refs = 1;
    sh->alive = true;
    sh->loop = loop;
    sh->async = &d->async;
    d->sh = sh;
    d->loop = loop;
    ev_async_init(&d->async, on_async);
    d->async.data = d;
    return d;
}

void mh_dns_free(struct mh_dns *d)
{
    if (!d)
        return;
    pthread_mutex_lock(&d->sh->mu);
    d->sh->alive = false;
    pthread_mutex_unlock(&d->sh->mu);
    ev_async_stop(d->loop, &d->async);
    shared_unref(d->sh);
    free(d);
}

static int parse_numeric(const char *host, uint16_t port, struct mh_dns_addrs *out)
{
    struct sockaddr_in *in4 = (struct sockaddr_in *)&out->a[0];
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&out->a[0];
    memset(&out->a[0], 0, sizeof out->a[0]);
    if (inet_pton(AF_INET, host, &in4->sin_addr) == 1) {
        in4->sin_family = AF_INET;
        in4->sin_port = htons(port);
        out->len[0] = sizeof *in4;
    } else if (inet_pton(AF_INET6, host, &in6->sin6_addr) == 1) {
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons(port);
        out->len[0] = sizeof *in6;
    } else {
        return 0;
    }
    out->n = 1;
    return 1;
}

int mh_dns_resolve(struct mh_dns *d, const char *host, uint16_t port, struct mh_dns_query *q,
                   struct mh_dns_addrs *out, const char **err)
{
    if (parse_numeric(host, port, out))
        return 1;
    double now = ev_now(d->loop);
    for (int i = 0; i < CACHE_SIZE; i++) {
        struct cache_entry *e = &d->cache[i];
        if (e->expires > now && strcmp(e->host, host) == 0) {
            *out = e->addrs;
            set_port(out, port);
            return 1;
        }
    }
    size_t hl = strlen(host);
    struct mh_dns_job *j = hl < sizeof j->host ? calloc(1, sizeof *j) : NULL;
    if (!j) {
        *err = mh_dns_err_nomem;
        return -1;
    }
    memcpy(j->host, host, hl + 1);
    j->port = port;
    j->sh = d->sh;
    j->q = q;
    q->_job = j;
    pthread_mutex_lock(&d->sh->mu);
    d->sh->refs++;
    pthread_mutex_unlock(&d->sh->mu);
    /* Started before the thread exists: ev_async_start clears a send that came first. */
    if (d->pending++ == 0)
        ev_async_start(d->loop, &d->async);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, 256 * 1024);
    pthread_t tid;
    int rc = pthread_create(&tid, &attr, lookup_thread, j);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        q->_job = NULL;
        free(j);
        shared_unref(d->sh);
        if (--d->pending == 0)
            ev_async_stop(d->loop, &d->async);
        *err = mh_dns_err_thread;
        return -1;
    }
    return 0;
}

void mh_dns_cancel(struct mh_dns_query *q)
{
    if (q->_job) {
        q->_job->q = NULL;
        q->_job = NULL;
    }
}
