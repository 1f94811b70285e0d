/*
 * Drives the WebSocket frame parser as a connection would (unconsumed bytes
 * are offered again with more input) and writes a transcript: F<fin><op>:<len>
 * per header, the payload bytes, | at a frame's end, !err. Shared by the unit
 * test and the fuzz target, which both check that the split never changes it.
 */
#ifndef MH_FUZZ_WS_RUN_H
#define MH_FUZZ_WS_RUN_H
#include "multipart_run.h" /* mp_transcript, mp_put */
#include "ws_frame.h"

#include <stdio.h>

static inline void ws_run(bool require_mask, uint64_t max, const char *wire, size_t len,
                          size_t step, struct mp_transcript *t)
{
    struct mh_ws_parser p;
    mh_ws_parser_init(&p, require_mask, max);
    t->s = NULL;
    t->len = t->cap = 0;
    mp_put(t, "", 0);
    char *pending = malloc(len + 1);
    size_t have = 0, fed = 0;
    for (int guard = 0; guard < 1000000; guard++) {
        struct mh_ws_ev ev;
        size_t used = mh_ws_parse(&p, pending, have, &ev);
        if (used > have)
            abort();
        if (ev.type == MH_WS_NEED_MORE) {
            if (fed == len)
                break;
            size_t n = step && len - fed > step ? step : len - fed;
            memmove(pending, pending + used, have - used);
            have -= used;
            memcpy(pending + have, wire + fed, n);
            have += n;
            fed += n;
            continue;
        }
        char head[64];
        switch (ev.type) {
        case MH_WS_FRAME:
            snprintf(head, sizeof head, "F%d%X:%llu:", ev.fin, ev.opcode,
                     (unsigned long long)ev.length);
            mp_put(t, head, strlen(head));
            break;
        case MH_WS_PAYLOAD:
            if (ev.len == 0)
                abort();
            mp_put(t, ev.data, ev.len);
            break;
        case MH_WS_FRAME_END:
            mp_put(t, "|", 1);
            break;
        case mh_ws_error:
            mp_put(t, "!", 1);
            mp_put(t, p.err, strlen(p.err));
            break;
        default:
            break;
        }
        memmove(pending, pending + used, have - used);
        have -= used;
        if (ev.type == mh_ws_error)
            break;
    }
    free(pending);
}
#endif
