#include "files_handler.h"

#include "mime.h"
#include "req.h"
#include "router.h"

#include <llhttp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void on_chunk_done(void *ud, uintptr_t token)
{
    mh_file_cache_release(ud, (struct mh_file_entry *)token);
}

/* Length of the literal path prefix of the route's pattern ("GET /static/{p...}" -> 8). */
static size_t mount_prefix(const struct mh_route *route)
{
    const char *p = mh_route_pattern(route);
    const char *slash = strchr(p, '/');
    if (!slash)
        return 0;
    const char *brace = strchr(slash, '{');
    size_t n = brace ? (size_t)(brace - slash) : strlen(slash);
    while (n && slash[n - 1] != '/')
        n--;
    return n;
}

/* Fills the planner's view of the request: one pass over the headers. */
static void read_input(struct mh_req *r, struct mh_files_input *in)
{
    const struct mh_request *h = &r->head;
    const char *base = mh_req_head(r);
    memset(in, 0, sizeof in[0]);
    in->head = h->method == HTTP_HEAD;
    const struct mh_req_route *rt = &r->routed;
    size_t prefix = rt->route ? mount_prefix(rt->route) : 0;
    const char *path = rt->path ? rt->path : base + h->path.off;
    size_t plen = rt->path ? rt->path_len : h->path.len;
    if (prefix > plen)
        prefix = plen;
    in->path = path + prefix;
    in->path_len = plen - prefix;
    in->location = path;
    in->location_len = plen;
    if (h->query.len) {
        in->query = base + h->query.off;
        in->query_len = h->query.len;
    }
    mh_accept_encoding_init(&in->accept);
    for (uint32_t i = 0; i < h->nheaders; i++) {
        const char *n = base + h->headers[i].name.off;
        size_t nl = h->headers[i].name.len;
        const char *v = base + h->headers[i].value.off;
        size_t vl = h->headers[i].value.len;
        switch (nl) {
        case 5:
            if (mh_strieq(n, nl, "Range", 5) && !in->range)
                in->range = v, in->range_len = vl;
            break;
        case 8:
            if (mh_strieq(n, nl, "If-Range", 8) && !in->if_range)
                in->if_range = v, in->if_range_len = vl;
            break;
        case 13:
            if (mh_strieq(n, nl, "If-None-Match", 13) && !in->if_none_match)
                in->if_none_match = v, in->if_none_match_len = vl;
            break;
        case 15:
            if (mh_strieq(n, nl, "Accept-Encoding", 15))
                mh_accept_encoding_add(&in->accept, v, vl);
            break;
        case 17:
            if (mh_strieq(n, nl, "If-Modified-Since", 17) && !in->if_modified_since)
                in->if_modified_since = v, in->if_modified_since_len = vl;
            break;
        }
    }
}

static void send_reply(struct mh_files_handler *fh, struct mh_req *r, struct mh_files_reply *p)
{
    mh_req_set_status(r, p->status);
    for (unsigned i = 0; i < p->nheaders; i++)
        mh_req_set_header(r, p->headers[i].name, strlen(p->headers[i].name), p->headers[i].value,
                          p->headers[i].value_len, false);
    if (p->error_body) {
        mh_req_set_header(r, "Content-Type", 12, MH_DEFAULT_TYPE, sizeof MH_DEFAULT_TYPE - 1, true);
        mh_req_write(r, p->error_body, strlen(p->error_body));
        return;
    }
    if (p->status == 304)
        return;
    mh_req_set_length(r, p->content_length);
    if (!p->has_body)
        return;
    for (unsigned i = 0; i < p->nparts; i++) {
        const struct mh_files_part *part = &p->parts[i];
        if (part->mem_len && mh_req_write(r, part->mem, part->mem_len))
            return;
        if (!part->len)
            continue;
        mh_file_cache_retain(p->entry);
        if (mh_req_write_file(r, p->entry->fd, (off_t)part->offset, part->len, on_chunk_done,
                              fh->cache, (uintptr_t)p->entry) == mh_req_err_nomem) {
            mh_file_cache_release(fh->cache, p->entry); /* not queued: still ours */
            mh_req_abort(r);
            return;
        }
    }
}

static void files_start(const struct mh_handler *h, struct mh_req *r)
{
    struct mh_files_handler *fh = (struct mh_files_handler *)h;
    if (r->head.method != HTTP_GET && r->head.method != HTTP_HEAD) {
        mh_req_set_status(r, 405);
        mh_req_set_header(r, "Allow", 5, "GET, HEAD", 9, true);
        mh_req_write(r, "Method Not Allowed\n", 19);
        mh_req_finish(r);
        return;
    }
    struct mh_files_input in;
    read_input(r, &in);
    struct mh_files_reply reply;
    mh_files_reply_init(&reply);
    if (mh_files_plan(fh->files, fh->cache, fh->mime, &in, r->started, &reply) < 0) {
        mh_files_reply_reset(&reply, fh->cache);
        reply.status = 503;
        reply.error_body = "503 Service Unavailable\n";
    }
    send_reply(fh, r, &reply);
    mh_files_reply_free(&reply, fh->cache);
    mh_req_finish(r);
}

static const struct mh_handler_ops files_ops = {
    .name = "files",
    .start = files_start,
};

struct mh_files_handler *mh_files_handler_new(const char *dir, const struct mh_files_opts *opts,
                                              const struct mh_mime *mime, char *err, size_t errlen)
{
    struct mh_files_handler *h = calloc(1, sizeof *h);
    if (!h) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    h->base.ops = &files_ops;
    h->mime = mime;
    h->files = mh_files_new(dir, opts, err, errlen);
    h->cache = h->files ? mh_file_cache_new(MH_FILES_CACHE_ENTRIES, MH_FILES_CACHE_TTL) : NULL;
    if (!h->cache) {
        if (h->files)
            snprintf(err, errlen, "out of memory");
        mh_files_handler_free(h);
        return NULL;
    }
    return h;
}

void mh_files_handler_free(struct mh_files_handler *h)
{
    if (!h)
        return;
    mh_file_cache_free(h->cache);
    mh_files_free(h->files);
    free(h);
}
