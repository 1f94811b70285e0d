#include "handler.h"

#include <stdlib.h>

int mh_handler_table_add(struct mh_handler_table *t, const struct mh_handler *h)
{
    if (t->n == t->cap) {
        int cap = t->cap ? t->cap * 2 : 16;
        const struct mh_handler **v = realloc(t->v, (size_t)cap * sizeof *v);
        if (!v)
            return -1;
        t->v = v;
        t->cap = cap;
    }
    t->v[t->n] = h;
    return t->n++;
}

void mh_handler_table_free(struct mh_handler_table *t)
{
    free(t->v);
    t->v = NULL;
    t->n = t->cap = 0;
}
