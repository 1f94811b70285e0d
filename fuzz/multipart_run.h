/*
 * Drives the multipart parser the way lua_multipart.c does (the caller keeps
 * what was not consumed and offers it again with more input) and writes a
 * transcript of the events: P (part), H:name=value, B (body), D:data (runs
 * of data joined), E (part end), X (done), !err. Shared by the unit test and
 * the fuzz target, which both check that the split never changes it.
 */
#ifndef MH_FUZZ_MULTIPART_RUN_H
#define MH_FUZZ_MULTIPART_RUN_H
#include "multipart.h"

#include <stdlib.h>
#include <string.h>

struct mp_transcript {
    char *s;
    size_t len, cap;
};

static inline void mp_put(struct mp_transcript *t, const char *p, size_t n)
{
    if (t->len + n + 1 > t->cap) {
        t->cap = (t->len + n + 1) * 2;
        t->s = realloc(t->s, t->cap);
        if (!t->s)
            abort();
    }
    memcpy(t->s + t->len, p, n);
    t->len += n;
    t->s[t->len] = 0;
}

/* Feeds body in pieces of `step` bytes (0: all at once). The caller frees t->s. */
static inline void mp_run(const char *boundary, const char *body, size_t len, size_t step,
                   struct mp_transcript *t)
{
    struct mh_multipart p;
    t->s = NULL;
    t->len = t->cap = 0;
    mp_put(t, "", 0);
    if (mh_multipart_init(&p, boundary, strlen(boundary), 256, 8) < 0) {
        mp_put(t, "!boundary", 9);
        return;
    }
    char *pending = malloc(len + 1);
    size_t have = 0, fed = 0;
    char last = 0; /* the previous event, so data runs join */
    for (int guard = 0; guard < 1000000; guard++) {
        bool eof = fed == len;
        struct mh_multipart_ev ev;
        size_t used = mh_multipart_parse(&p, pending, have, eof, &ev);
        if (used > have)
            abort(); /* consumed more than it was given */
        if (ev.type == MH_MP_NEED_MORE) {
            if (used == 0 && eof)
                abort(); /* no progress at the end: it must have said ERROR or DONE */
            size_t n = step && len - fed > step ? step : len - fed;
            memmove(pending, pending + used, have - used);
            have -= used;
            memcpy(pending + have, body + fed, n);
            have += n;
            fed += n;
            continue;
        }
        switch (ev.type) {
        case MH_MP_PART:
            mp_put(t, "P", 1);
            break;
        case MH_MP_HEADER:
            mp_put(t, "H:", 2);
            mp_put(t, ev.name, ev.name_len);
            mp_put(t, "=", 1);
            mp_put(t, ev.data, ev.data_len);
            mp_put(t, "|", 1);
            break;
        case MH_MP_BODY:
            mp_put(t, "B", 1);
            break;
        case MH_MP_DATA:
            if (ev.data_len == 0)
                abort(); /* empty data events would loop forever */
            if (last != 'D')
                mp_put(t, "D:", 2);
            mp_put(t, ev.data, ev.data_len);
            break;
        case MH_MP_PART_END:
            mp_put(t, "|E", 2);
            break;
        case MH_MP_DONE:
            mp_put(t, "X", 1);
            break;
        case MH_MP_ERROR:
            mp_put(t, "!", 1);
            mp_put(t, p.err, strlen(p.err));
            break;
        default:
            break;
        }
        last = ev.type == MH_MP_DATA ? 'D' : 0;
        memmove(pending, pending + used, have - used);
        have -= used;
        if (ev.type == MH_MP_DONE || ev.type == MH_MP_ERROR)
            break;
    }
    free(pending);
}
#endif
