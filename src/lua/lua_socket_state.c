/*
 * What the sockets of one generation share: the dialer (net/dialer.h: the
 * resolver, TLS configurations and saved sessions), the idle pool, and the
 * per-key connection limits with the sockets queued behind them. Plain C:
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
    mh_dialer_free(st->dialer);
    st->dialer = NULL;
    while (st->limits) {
        struct key_limit *l = st->limits;
        st->limits = l->next;
        free(l);
    }
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
