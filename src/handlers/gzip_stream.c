#include "gzip_stream.h"

#include <string.h>

const char mh_gzip_err_nomem[] = "out of memory";
const char mh_gzip_err_state[] = "gzip state";

/*
 * Window and hash sizes for a body of known length, after nginx's
 * ngx_http_gzip_filter: a window larger than the body buys nothing, and a
 * 32 KiB window with memLevel 8 costs ~256 KiB of zlib state per stream.
 */
static void sizes_for(uint64_t hint, int *wbits, int *memlevel)
{
    *wbits = 15;
    *memlevel = 8;
    if (hint == 0)
        return;
    while (hint < ((uint64_t)1 << (*wbits - 1)) && *wbits > 9) {
        (*wbits)--;
        (*memlevel)--;
    }
    if (*memlevel < 1)
        *memlevel = 1;
}

const char *mh_gzip_reset(struct mh_gzip *g, int level, uint64_t size_hint)
{
    int wbits, memlevel;
    sizes_for(size_hint, &wbits, &memlevel);
    g->_finished = false;
    if (g->_ready && g->_wbits == wbits && g->_memlevel == memlevel) {
        if (deflateReset(&g->_z) != Z_OK)
            return mh_gzip_err_state;
        if (g->_level != level) {
            if (deflateParams(&g->_z, level, Z_DEFAULT_STRATEGY) != Z_OK)
                return mh_gzip_err_state;
            g->_level = level;
        }
        return NULL;
    }
    mh_gzip_end(g);
    memset(&g->_z, 0, sizeof g->_z);
    /* windowBits + 16: a gzip header and trailer instead of zlib's. */
    if (deflateInit2(&g->_z, level, Z_DEFLATED, wbits + 16, memlevel, Z_DEFAULT_STRATEGY) != Z_OK)
        return mh_gzip_err_nomem;
    g->_ready = true;
    g->_level = level;
    g->_wbits = wbits;
    g->_memlevel = memlevel;
    return NULL;
}

const char *mh_gzip_push(struct mh_gzip *g, const void *in, size_t len, bool flush, bool finish,
                         struct mh_buf *out)
{
    if (!g->_ready || g->_finished)
        return mh_gzip_err_state;
    z_stream *z = &g->_z;
    z->next_in = (Bytef *)(uintptr_t)in;
    int mode = finish ? Z_FINISH : flush ? Z_SYNC_FLUSH : Z_NO_FLUSH;
    /* zlib takes uInt lengths: feed a huge input in slices. */
    size_t left = len;
    for (;;) {
        uInt slice = left > (1u << 30) ? (1u << 30) : (uInt)left;
        z->avail_in = slice;
        left -= slice;
        int m = left ? Z_NO_FLUSH : mode;
        do {
            size_t room = deflateBound(z, z->avail_in) + 64;
            if (room > 64 * 1024)
                room = 64 * 1024;
            if (mh_buf_reserve(out, room) < 0)
                return mh_gzip_err_nomem;
            z->next_out = (Bytef *)out->data + out->len;
            z->avail_out = (uInt)(out->cap - out->len);
            size_t before = z->avail_out;
            int rc = deflate(z, m);
            if (rc == Z_STREAM_ERROR)
                return mh_gzip_err_state;
            out->len += before - z->avail_out;
            if (rc == Z_STREAM_END)
                break;
        } while (z->avail_in || z->avail_out == 0);
        if (!left)
            break;
    }
    if (finish)
        g->_finished = true;
    return NULL;
}

void mh_gzip_end(struct mh_gzip *g)
{
    if (g->_ready)
        deflateEnd(&g->_z);
    g->_ready = false;
}
