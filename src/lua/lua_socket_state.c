/*
 * What the sockets of one generation share: the TLS configuration per set
 * of options (CA file, verify, client certificate, min_version), the last
 * session per key (offered again on the next handshake), and the per-key
 * connection limits with the sockets queued behind them. Plain C:
 * lua_socket.c keeps the state in a userdata of the generation's registry
 * and calls in.
 */
#include "lua_socket_impl.h"

#include <stdlib.h>
#include <string.h>

void mh_sock_state_free(struct sock_state *st)
{
    mh_socket_pool_free(st->pool); /* before the TLS configurations its sockets use */
    st->pool = NULL;
    mh_dns_free(st->dns);
    st->dns = NULL;
    while (st->sessions) {
        struct tls_session *x = st->sessions;
        st->sessions = x->next;
        mh_client_tls_session_free(x->session);
        free(x);
    }
    while (st->limits) {
        struct key_limit *l = st->limits;
        st->limits = l->next;
        free(l);
    }
    while (st->cfgs) {
        struct tls_cfg *c = st->cfgs;
        st->cfgs = c->next;
        mh_client_tls_cfg_free(c->cfg);
        free(c);
    }
}

struct mh_client_tls_cfg *mh_sock_tls_cfg(struct sock_state *st, const struct lsock *k,
                                          const char **err)
{
    for (struct tls_cfg *c = st->cfgs; c; c = c->next)
        if (c->verify == k->verify && c->tls13_only == k->tls13_only &&
            strcmp(c->names, k->ca) == 0 && strcmp(c->cert, k->cert) == 0 &&
            strcmp(c->key, k->cert_key) == 0)
            return c->cfg;
    size_t n = strlen(k->ca) + 1, nc = strlen(k->cert) + 1, nk = strlen(k->cert_key) + 1;
    struct tls_cfg *c = calloc(1, sizeof *c + n + nc + nk);
    if (!c) {
        *err = mh_socket_err_nomem;
        return NULL;
    }
    struct mh_client_tls_opts o = {.ca = k->ca[0] ? k->ca : NULL,
                                   .verify = k->verify,
                                   .cert = k->cert[0] ? k->cert : NULL,
                                   .key = k->cert_key[0] ? k->cert_key : NULL,
                                   .tls13_only = k->tls13_only};
    if (!(c->cfg = mh_client_tls_cfg_new(&o, err))) {
        free(c);
        return NULL;
    }
    c->cert = c->names + n;
    c->key = c->cert + nc;
    memcpy(c->names, k->ca, n);
    memcpy(c->cert, k->cert, nc);
    memcpy(c->key, k->cert_key, nk);
    c->verify = k->verify;
    c->tls13_only = k->tls13_only;
    c->next = st->cfgs;
    st->cfgs = c;
    return c->cfg;
}

struct tls_session *mh_sock_session(struct sock_state *st, const char *key, bool create)
{
    for (struct tls_session *x = st->sessions; x; x = x->next)
        if (strcmp(x->key, key) == 0)
            return x;
    if (!create)
        return NULL;
    size_t n = strlen(key);
    struct tls_session *x = calloc(1, sizeof *x + n + 1);
    if (x) {
        memcpy(x->key, key, n + 1);
        x->next = st->sessions;
        st->sessions = x;
    }
    return x;
}

bool mh_sock_take_slot(struct lsock *k, size_t size)
{
    struct key_limit *l = k->st->limits;
    while (l && strcmp(l->key, k->key) != 0)
        l = l->next;
    if (!l) {
        size_t n = strlen(k->key);
        if (!(l = calloc(1, sizeof *l + n + 1)))
            return true; /* out of memory: unlimited rather than stuck */
        memcpy(l->key, k->key, n + 1);
        l->next = k->st->limits;
        k->st->limits = l;
    }
    if (l->active < size) {
        l->active++;
        k->limit = l;
        return true;
    }
    k->next_waiter = NULL;
    if (l->wait_tail)
        l->wait_tail->next_waiter = k;
    else
        l->wait_head = k;
    l->wait_tail = k;
    k->queued = l;
    return false;
}

void mh_sock_leave_queue(struct lsock *k)
{
    struct key_limit *l = k->queued;
    struct lsock **pp = &l->wait_head, *prev = NULL;
    while (*pp && *pp != k) {
        prev = *pp;
        pp = &(*pp)->next_waiter;
    }
    if (*pp)
        *pp = k->next_waiter;
    if (l->wait_tail == k)
        l->wait_tail = prev;
    k->queued = NULL;
    k->next_waiter = NULL;
}

struct lsock *mh_sock_release_slot(struct lsock *k)
{
    struct key_limit *l = k->limit;
    if (!l)
        return NULL;
    k->limit = NULL;
    l->active--;
    struct lsock *w = l->wait_head;
    if (!w)
        return NULL;
    mh_sock_leave_queue(w);
    l->active++;
    w->limit = l;
    return w;
}
