#ifndef MH_COMPRESS_FILTER_H
#define MH_COMPRESS_FILTER_H
/*
 * Response compression as an output filter (req.h): installed on a request
 * after routing, it decides in on_head from the response head
 * (mh_compress_decide: status, type, Content-Encoding, length) and the
 * request's Accept-Encoding, then gzips every piece of body on its way out,
 * whatever kind it is (memory, a referenced Lua string, a file range), in
 * constant memory: a 16 KiB read buffer and zlib's state.
 *
 * A response of unknown length (a handler that flushes before it is done)
 * is compressed when what it staged by its first flush already holds
 * min_bytes; a complete response has its length known. Each flush of a
 * streaming response is a zlib sync flush, so the client sees what the
 * handler wrote without waiting for the end.
 *
 * The request model hands a filter everything staged since the last send
 * and drops what it leaves unread, so a body staged whole (a static file)
 * is compressed whole: its compressed size is held in memory until
 * written. Bodies known to be larger than MH_COMPRESS_FILTER_MAX are sent
 * as they are (with Vary) rather than holding megabytes per response.
 *
 * Filters and their zlib streams come from a pool (one per worker or app)
 * and go back to it when the response ends, so a compressed response
 * allocates nothing in steady state.
 */
#include <stdbool.h>
#include <stddef.h>

#include "buf.h"
#include "compress.h"

#define MH_COMPRESS_FILTER_MAX (8u << 20)

struct mh_req;
struct mh_compress_filter;

struct mh_compress_pool {
    struct mh_compress_filter *_free;
    size_t _nfree, _max;
    struct mh_buf _out; /* scratch for zlib's output */
};

/* max_cached: idle filters kept (each holds ~256 KiB of zlib state). */
void mh_compress_pool_init(struct mh_compress_pool *p, size_t max_cached);
/* Frees the idle filters; every filter must have ended (done) before. */
void mh_compress_pool_destroy(struct mh_compress_pool *p);

/*
 * Installs the gzip filter on r when `conf` is on and r is not a HEAD
 * request (call before the head is sent: the dispatcher's prepare hook).
 * `conf` must outlive the request. Nothing happens on OOM: the response goes
 * out uncompressed.
 */
void mh_compress_install(struct mh_compress_pool *p, const struct mh_compress_conf *conf,
                         struct mh_req *r);

#endif
