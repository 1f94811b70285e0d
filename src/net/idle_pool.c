#include "idle_pool.h"

void mh_idle_park(struct mh_idle_pool *p, struct mh_idle_key *k, struct mh_idle_conn *c)
{
    c->key = k;
    c->kprev = NULL;
    c->knext = k->head;
    if (k->head)
        k->head->kprev = c;
    k->head = c;
    k->n++;
    c->lprev = NULL;
    c->lnext = p->head;
    if (p->head)
        p->head->lprev = c;
    else
        p->tail = c;
    p->head = c;
    p->n++;
}

void mh_idle_unlink(struct mh_idle_pool *p, struct mh_idle_conn *c)
{
    struct mh_idle_key *k = c->key;
    if (c->kprev)
        c->kprev->knext = c->knext;
    else
        k->head = c->knext;
    if (c->knext)
        c->knext->kprev = c->kprev;
    k->n--;
    if (c->lprev)
        c->lprev->lnext = c->lnext;
    else
        p->head = c->lnext;
    if (c->lnext)
        c->lnext->lprev = c->lprev;
    else
        p->tail = c->lprev;
    p->n--;
    c->kprev = c->knext = c->lprev = c->lnext = NULL;
    c->key = NULL;
}

struct mh_idle_conn *mh_idle_take(struct mh_idle_pool *p, struct mh_idle_key *k)
{
    struct mh_idle_conn *c = k->head;
    if (c)
        mh_idle_unlink(p, c);
    return c;
}

struct mh_idle_conn *mh_idle_excess(const struct mh_idle_pool *p, const struct mh_idle_key *k,
                                    size_t per_key, size_t max)
{
    if (k->n > per_key) {
        struct mh_idle_conn *old = k->head;
        while (old->knext)
            old = old->knext;
        return old;
    }
    return p->n > max ? p->tail : NULL;
}
