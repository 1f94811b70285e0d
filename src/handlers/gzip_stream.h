#ifndef MH_GZIP_STREAM_H
#define MH_GZIP_STREAM_H
/*
 * A streaming gzip encoder over zlib: body chunks in, gzip bytes out, in
 * constant memory per response (zlib's window and hash, sized once from
 * the level and, when known, the body length, as nginx does for small
 * bodies). Streams are reusable: mh_gzip_reset makes a used one new
 * without freeing zlib's memory, so a worker keeps a few and a compressed
 * response allocates nothing in steady state. A zeroed struct is a stream
 * not yet reset.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <zlib.h>

#include "buf.h"

struct mh_gzip {
    z_stream _z;
    int _level, _wbits, _memlevel;
    bool _ready;    /* deflateInit2 succeeded */
    bool _finished; /* the trailer is out */
};

/* Errors (compared by identity). */
extern const char mh_gzip_err_nomem[]; /* zlib or the output buffer could not allocate */
extern const char mh_gzip_err_state[]; /* push after finish, or zlib refused the input */

/*
 * Prepares g for a new response at `level` (1..9). size_hint is the body
 * length when known (0 = unknown): a short body gets a smaller window and
 * hash, which costs less to set up and compresses it no worse. Reuses g's
 * zlib state when the sizes match. Returns NULL or an error.
 */
const char *mh_gzip_reset(struct mh_gzip *g, int level, uint64_t size_hint);

/*
 * Compresses `len` bytes of `in` and appends what zlib emits to `out`;
 * with `finish`, flushes everything and appends the gzip trailer (then g
 * is spent until the next reset). Without `finish`, zlib may hold the
 * bytes back (it emits in blocks); call with `flush` to force out what it
 * has (for a handler that waits between writes). Returns NULL or an error.
 */
const char *mh_gzip_push(struct mh_gzip *g, const void *in, size_t len, bool flush, bool finish,
                         struct mh_buf *out);

/* Frees zlib's memory; g may be reset again afterwards. */
void mh_gzip_end(struct mh_gzip *g);

#endif
