#define _GNU_SOURCE /* memmem */
#include "compress_filter.h"

#include "gzip_stream.h"
#include "req.h"

#include <llhttp.h>
#include <stdlib.h>
#include <string.h>

#define READ_CHUNK (16 * 1024)

struct mh_compress_filter {
    struct mh_ofilter base; /* first: the request's chain points here */
    struct mh_gzip gz;
    struct mh_compress_pool *pool;
    const struct mh_compress_conf *conf;
    struct mh_compress_filter *next_free;
};

/* What the protocols send when a handler set no Content-Type (mh_response_adds_type). */
static const char default_type[] = MH_DEFAULT_TYPE;

static bool cf_head(struct mh_ofilter *base, struct mh_req *r)
{
    struct mh_compress_filter *f = (struct mh_compress_filter *)base;
    struct mh_response *res = &r->res;
    struct mh_accept_encoding ae;
    mh_accept_encoding_init(&ae);
    const struct mh_request *h = &r->head;
    const char *hb = mh_req_head(r);
    for (uint32_t i = 0; i < h->nheaders; i++)
        if (mh_strieq(hb + h->headers[i].name.off, h->headers[i].name.len, "Accept-Encoding", 15))
            mh_accept_encoding_add(&ae, hb + h->headers[i].value.off, h->headers[i].value.len);
    size_t tl = 0, cl = 0, el = 0, rl = 0;
    const char *type = mh_response_get(res, "Content-Type", 12, &tl);
    const char *cc = mh_response_get(res, "Cache-Control", 13, &cl);
    bool encoded = mh_response_get(res, "Content-Encoding", 16, &el) ||
                   mh_response_get(res, "Content-Range", 13, &rl);
    struct mh_compress_input in = {
        .head = h->method == HTTP_HEAD,
        .status = res->status,
        .type = type ? type : default_type,
        .type_len = type ? tl : sizeof default_type - 1,
        .encoded = encoded,
        .no_transform = cc && mh_compress_no_transform(cc, cl),
        .length_known = true,
        .length = res->has_length ? res->declared_length : res->body.bytes,
        .accept = &ae,
    };
    struct mh_compress_verdict v = mh_compress_decide(f->conf, &in);
    size_t vl;
    const char *vary = mh_response_get(res, "Vary", 4, &vl);
    if (v.vary && !(vary && memmem(vary, vl, "Accept-Encoding", 15)))
        mh_response_header(res, "Vary", 4, "Accept-Encoding", 15, false);
    if (!v.gzip || in.length > MH_COMPRESS_FILTER_MAX || mh_gzip_reset(&f->gz, f->conf->level, 0))
        return false;
    mh_response_header(res, "Content-Encoding", 16, "gzip", 4, true);
    mh_response_unset(res, "Content-Length", 14);
    /* A strong validator names these exact bytes; the gzip body is other bytes. */
    size_t etl;
    const char *et = mh_response_get(res, "ETag", 4, &etl);
    if (et && etl >= 2 && et[0] == '"') {
        char weak[128];
        if (etl + 2 < sizeof weak) {
            weak[0] = 'W';
            weak[1] = '/';
            memcpy(weak + 2, et, etl);
            mh_response_header(res, "ETag", 4, weak, etl + 2, true);
        }
    }
    return true;
}

static int cf_data(struct mh_ofilter *base, struct mh_req *r, struct mh_outq *in,
                   struct mh_outq *out, bool last)
{
    struct mh_compress_filter *f = (struct mh_compress_filter *)base;
    struct mh_buf *z = &f->pool->_out;
    char buf[READ_CHUNK];
    for (;;) {
        z->len = 0;
        ssize_t n = mh_outq_read_front(in, buf, sizeof buf);
        if (n < 0)
            return -1;
        bool more = !mh_outq_empty(in);
        /* The last piece of this call: finish, or sync-flush so a streaming client sees it. */
        if (mh_gzip_push(&f->gz, buf, (size_t)n, !more && !last, !more && last, z))
            return -1;
        if (z->len && mh_outq_append(out, z->data, z->len) < 0)
            return -1;
        if (!more)
            return 0;
    }
}

static void cf_done(struct mh_ofilter *base, struct mh_req *r)
{
    struct mh_compress_filter *f = (struct mh_compress_filter *)base;
    struct mh_compress_pool *p = f->pool;
    if (p->_nfree < p->_max) {
        f->next_free = p->_free;
        p->_free = f;
        p->_nfree++;
        return;
    }
    mh_gzip_end(&f->gz);
    free(f);
}

static const struct mh_ofilter_ops gzip_ops = {
    .name = "gzip",
    .on_head = cf_head,
    .on_data = cf_data,
    .done = cf_done,
};

void mh_compress_pool_init(struct mh_compress_pool *p, size_t max_cached)
{
    memset(p, 0, sizeof *p);
    p->_max = max_cached;
}

void mh_compress_pool_destroy(struct mh_compress_pool *p)
{
    while (p->_free) {
        struct mh_compress_filter *f = p->_free;
        p->_free = f->next_free;
        mh_gzip_end(&f->gz);
        free(f);
    }
    p->_nfree = 0;
    mh_buf_free(&p->_out);
}

void mh_compress_install(struct mh_compress_pool *p, const struct mh_compress_conf *conf,
                         struct mh_req *r)
{
    if (!conf->on || r->head.method == HTTP_HEAD)
        return;
    struct mh_compress_filter *f = p->_free;
    if (f) {
        p->_free = f->next_free;
        p->_nfree--;
    } else if (!(f = calloc(1, sizeof *f))) {
        return;
    }
    f->base.ops = &gzip_ops;
    f->pool = p;
    f->conf = conf;
    mh_req_add_filter(r, &f->base);
}
