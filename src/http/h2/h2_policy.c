#include "h2_policy.h"

#include "conn_impl.h" /* the connection preface */

#include <string.h>

/* Receive window of the connection: room for every stream's default window, up to this. */
#define CONN_WINDOW_MAX (16 << 20)

size_t mh_h2_settings(const struct mh_http_limits *lim,
                      nghttp2_settings_entry iv[MH_H2_SETTINGS_MAX])
{
    size_t n = 0;
    iv[n++] =
        (nghttp2_settings_entry){NGHTTP2_SETTINGS_HEADER_TABLE_SIZE, lim->h2_header_table_size};
    iv[n++] = (nghttp2_settings_entry){NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE,
                                       (uint32_t)lim->max_header_bytes};
    iv[n++] = (nghttp2_settings_entry){NGHTTP2_SETTINGS_ENABLE_PUSH, 0};
    /* RFC 8441: WebSockets over HTTP/2 (browsers then open them on this connection) */
    iv[n++] = (nghttp2_settings_entry){NGHTTP2_SETTINGS_ENABLE_CONNECT_PROTOCOL, 1};
    return n;
}

nghttp2_settings_entry mh_h2_settings_streams(const struct mh_http_limits *lim)
{
    return (nghttp2_settings_entry){NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS,
                                    lim->h2_max_concurrent_streams};
}

int32_t mh_h2_conn_window(const struct mh_http_limits *lim)
{
    uint64_t window = (uint64_t)lim->h2_max_concurrent_streams * NGHTTP2_INITIAL_WINDOW_SIZE;
    return window == 0 || window > CONN_WINDOW_MAX ? CONN_WINDOW_MAX : (int32_t)window;
}

void mh_h2_flood_init(struct mh_h2_flood *f, uint32_t budget, double now)
{
    f->tokens = budget;
    f->at = now;
}

bool mh_h2_flood_take(struct mh_h2_flood *f, uint32_t budget, double now)
{
    f->tokens += (now - f->at) * budget / MH_H2_FLOOD_REFILL;
    if (f->tokens > budget)
        f->tokens = budget;
    f->at = now;
    f->tokens -= 1;
    return f->tokens >= 0;
}

bool mh_h2_ids_headers(struct mh_h2_ids *ids, int32_t id)
{
    if (id > ids->last) {
        /* IDs between the last and this one are skipped: closed, never opened */
        int32_t lo = ids->last ? ids->last + 2 : 1;
        if (id > lo && ids->first) {
            ids->gap_lo[ids->next_gap] = lo;
            ids->gap_hi[ids->next_gap] = id - 2;
            ids->next_gap = (uint8_t)((ids->next_gap + 1) % MH_H2_GAPS);
            if (ids->ngaps < MH_H2_GAPS)
                ids->ngaps++;
        }
        if (!ids->first)
            ids->first = id;
        ids->last = id;
        return true;
    }
    if (id < ids->first)
        return false;
    for (unsigned i = 0; i < ids->ngaps; i++)
        if (id >= ids->gap_lo[i] && id <= ids->gap_hi[i])
            return false;
    return true;
}

void mh_h2_ended_add(struct mh_h2_ended *e, int32_t id)
{
    e->id[e->next] = id;
    e->next = (uint8_t)((e->next + 1) % MH_H2_ENDED);
}

bool mh_h2_ended_has(const struct mh_h2_ended *e, int32_t id)
{
    for (unsigned i = 0; i < MH_H2_ENDED; i++)
        if (e->id[i] == id)
            return id != 0;
    return false;
}

void mh_h2_acks_init(struct mh_h2_acks *a)
{
    memset(a, 0, sizeof *a);
    a->left = MH_H2_PREFACE_LEN;
}

static uint32_t be24(const uint8_t *p)
{
    return (uint32_t)p[0] << 16 | (uint32_t)p[1] << 8 | p[2];
}

static uint32_t stream_id(const uint8_t *p)
{
    return ((uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]) & 0x7fffffff;
}

static void take(const uint8_t **in, size_t *n, size_t k, const uint8_t **seg, size_t *len)
{
    *seg = *in;
    *len = k;
    *in += k;
    *n -= k;
}

bool mh_h2_acks_next(struct mh_h2_acks *a, const uint8_t **in, size_t *n, const uint8_t **seg,
                     size_t *len)
{
    while (*n > 0) {
        if (a->left > 0) {
            take(in, n, *n < a->left ? *n : a->left, seg, len);
            a->left -= (uint32_t)*len;
            return true;
        }
        size_t k = sizeof a->hdr - a->nhdr;
        if (k > *n)
            k = *n;
        memcpy(a->hdr + a->nhdr, *in, k);
        a->nhdr = (uint8_t)(a->nhdr + k);
        *in += k;
        *n -= k;
        if (a->nhdr < sizeof a->hdr)
            return false; /* held until the rest of the header comes */
        a->nhdr = 0;
        uint32_t length = be24(a->hdr);
        /* only a well-formed ACK counts: a malformed one reaches nghttp2, which rejects it */
        if (!mh_h2_acks_done(a) && a->hdr[3] == NGHTTP2_SETTINGS &&
            (a->hdr[4] & NGHTTP2_FLAG_ACK) && length == 0 && stream_id(a->hdr + 5) == 0 &&
            ++a->seen == 2)
            continue; /* the stream limit's acknowledgement: cut */
        a->left = length;
        *seg = a->hdr;
        *len = sizeof a->hdr;
        return true;
    }
    return false;
}
