#define _GNU_SOURCE /* O_PATH */
#include "files.h"

#include "conditional.h"
#include "file_open.h"
#include "mime.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Fixed, so a reply needs no random source; a file containing it is still framed right. */
#define BOUNDARY "moonhttp-byteranges-3d1f0a"

struct mh_files *mh_files_new(const char *dir, const struct mh_files_opts *opts, char *err,
                              size_t errlen)
{
    int fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, errlen, "%s: %s", dir, strerror(errno));
        return NULL;
    }
    struct mh_files *f = calloc(1, sizeof *f);
    if (!f || (opts->index && !(f->index = strdup(opts->index)))) {
        free(f);
        close(fd);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    f->rootfd = fd;
    f->index_len = f->index ? strlen(f->index) : 0;
    f->max_age = opts->max_age;
    f->precompressed = opts->precompressed;
    f->dotfiles = opts->dotfiles;
    if (opts->max_age >= 0)
        snprintf(f->cache_control, sizeof f->cache_control, "max-age=%ld", opts->max_age);
    return f;
}

void mh_files_free(struct mh_files *f)
{
    if (!f)
        return;
    close(f->rootfd);
    free(f->index);
    free(f);
}

void mh_files_reply_init(struct mh_files_reply *r)
{
    memset(r, 0, sizeof *r);
}

void mh_files_reply_reset(struct mh_files_reply *r, struct mh_file_cache *cache)
{
    if (r->entry)
        mh_file_cache_release(cache, r->entry);
    struct mh_buf text = r->_text;
    text.len = 0;
    memset(r, 0, offsetof(struct mh_files_reply, _ranges));
    r->_text = text;
}

void mh_files_reply_free(struct mh_files_reply *r, struct mh_file_cache *cache)
{
    mh_files_reply_reset(r, cache);
    mh_buf_free(&r->_text);
}

static void header(struct mh_files_reply *r, const char *name, const char *value, size_t len)
{
    if (r->nheaders < MH_FILES_MAX_HEADERS)
        r->headers[r->nheaders++] = (struct mh_files_header){name, value, len};
}

static void fail(struct mh_files_reply *r, int status, const char *body)
{
    r->status = status;
    r->error_body = body;
}

/* The status for a failed open (-errno). */
static void open_failed(struct mh_files_reply *r, int err)
{
    switch (err) {
    case -EACCES:
    case -EPERM:
        fail(r, 403, "403 Forbidden\n");
        return;
    case -EMFILE:
    case -ENFILE:
    case -ENOMEM:
    case -EIO:
        fail(r, 503, "503 Service Unavailable\n");
        return;
    default: /* ENOENT, ENOTDIR, EXDEV (out of the root), ELOOP, ENAMETOOLONG, ... */
        fail(r, 404, "404 page not found\n");
    }
}

/* Sets the status for a refused path; returns e (NULL: the path was fine). */
static const char *decode_status(struct mh_files_reply *r, const char *e)
{
    if (!e)
        return NULL;
    if (e == mh_file_err_dotfile)
        fail(r, 404, "404 page not found\n");
    else if (e == mh_file_err_too_long)
        fail(r, 414, "414 URI Too Long\n");
    else
        fail(r, 400, "400 Bad Request\n");
    return e;
}

/* Looks up a precompressed sibling of `name` (len bytes in r->_name, room for 3 more). */
static struct mh_file_entry *sibling(const struct mh_files *f, struct mh_file_cache *cache,
                                     char *name, size_t len, const char *ext, double now)
{
    memcpy(name + len, ext, strlen(ext) + 1);
    struct mh_file_entry *e = mh_file_cache_get(cache, f->rootfd, name, len + strlen(ext), now);
    name[len] = '\0';
    if (e && (e->err || e->is_dir)) {
        mh_file_cache_release(cache, e);
        return NULL;
    }
    return e;
}

static void choose_encoding(const struct mh_files *f, struct mh_file_cache *cache,
                            const struct mh_files_input *in, double now, size_t len,
                            struct mh_files_reply *r)
{
    struct mh_file_entry *br = NULL, *gz = NULL;
    unsigned avail = 0;
    /* Probe only what the client could take: a browser without br costs one lookup. */
    if (mh_accept_encoding_choose(&in->accept, MH_CODING_BIT(MH_CODING_BR)) == MH_CODING_BR &&
        (br = sibling(f, cache, r->_name, len, ".br", now)))
        avail |= MH_CODING_BIT(MH_CODING_BR);
    if (mh_accept_encoding_choose(&in->accept, MH_CODING_BIT(MH_CODING_GZIP)) == MH_CODING_GZIP &&
        (gz = sibling(f, cache, r->_name, len, ".gz", now)))
        avail |= MH_CODING_BIT(MH_CODING_GZIP);
    enum mh_coding c = mh_accept_encoding_choose(&in->accept, avail);
    struct mh_file_entry *pick = c == MH_CODING_BR ? br : c == MH_CODING_GZIP ? gz : NULL;
    if (br && br != pick)
        mh_file_cache_release(cache, br);
    if (gz && gz != pick)
        mh_file_cache_release(cache, gz);
    /*
     * Vary when a sibling exists: the body then depends on Accept-Encoding.
     * A client that accepts none of them costs no probe and gets identity
     * without Vary, which a shared cache may give to anyone: still correct.
     */
    r->varies = avail != 0;
    if (pick) {
        mh_file_cache_release(cache, r->entry);
        r->entry = pick;
        r->coding = c;
    }
}

/* The 206 head and parts for the ranges in r->_ranges. -1 on OOM. */
static int plan_ranges(struct mh_files_reply *r, unsigned n, const char *type)
{
    struct mh_file_entry *e = r->entry;
    struct mh_buf *t = &r->_text;
    r->status = 206;
    if (n == 1) {
        char cr[80];
        int k = snprintf(cr, sizeof cr, "bytes %" PRIu64 "-%" PRIu64 "/%" PRIu64,
                         r->_ranges[0].first, r->_ranges[0].last, e->size);
        if (mh_buf_append(t, cr, (size_t)k) < 0)
            return -1;
        header(r, "Content-Range", t->data, (size_t)k);
        r->parts[0] = (struct mh_files_part){NULL, 0, r->_ranges[0].first,
                                             r->_ranges[0].last - r->_ranges[0].first + 1};
        r->nparts = 1;
        r->content_length = r->parts[0].len;
        return 0;
    }
    /* multipart/byteranges: each part's separator is memory, its bytes come from the file. */
    size_t offs[MH_RANGE_MAX + 1];
    uint64_t total = 0;
    for (unsigned i = 0; i <= n; i++) {
        char sep[256];
        int k = i < n ? snprintf(sep, sizeof sep,
                                 "%s--" BOUNDARY "\r\nContent-Type: %s\r\n"
                                 "Content-Range: bytes %" PRIu64 "-%" PRIu64 "/%" PRIu64 "\r\n\r\n",
                                 i ? "\r\n" : "", type, r->_ranges[i].first, r->_ranges[i].last,
                                 e->size)
                      : snprintf(sep, sizeof sep, "\r\n--" BOUNDARY "--\r\n");
        if (k < 0 || (size_t)k >= sizeof sep)
            k = snprintf(sep, sizeof sep, "%s--" BOUNDARY "\r\n\r\n", i ? "\r\n" : "");
        offs[i] = t->len;
        if (mh_buf_append(t, sep, (size_t)k) < 0)
            return -1;
        r->parts[i].mem_len = (size_t)k;
        if (i < n) {
            r->parts[i].offset = r->_ranges[i].first;
            r->parts[i].len = r->_ranges[i].last - r->_ranges[i].first + 1;
        }
        total += (uint64_t)k + r->parts[i].len;
    }
    static const char ctype[] = "multipart/byteranges; boundary=" BOUNDARY;
    header(r, "Content-Type", ctype, sizeof ctype - 1);
    for (unsigned i = 0; i <= n; i++)
        r->parts[i].mem = t->data + offs[i]; /* after the last append: the buffer no longer moves */
    r->nparts = n + 1;
    r->content_length = total;
    return 0;
}

static int plan_redirect(const struct mh_files_input *in, struct mh_files_reply *r)
{
    struct mh_buf *t = &r->_text;
    if (mh_buf_append(t, in->location, in->location_len) < 0 || mh_buf_append(t, "/", 1) < 0 ||
        (in->query &&
         (mh_buf_append(t, "?", 1) < 0 || mh_buf_append(t, in->query, in->query_len) < 0)))
        return -1;
    r->status = 301;
    r->error_body = "301 Moved Permanently\n";
    header(r, "Location", t->data, t->len);
    return 0;
}

int mh_files_plan(const struct mh_files *f, struct mh_file_cache *cache, const struct mh_mime *mime,
                  const struct mh_files_input *in, double now, struct mh_files_reply *r)
{
    size_t len;
    /* Leave room for "/" + index or a ".br" suffix after the name. */
    size_t room = sizeof r->_name - (f->index_len > 3 ? f->index_len : 3) - 2;
    if (decode_status(
            r, mh_file_path_decode(in->path, in->path_len, f->dotfiles, r->_name, room, &len)))
        return 0;
    struct mh_file_entry *e = mh_file_cache_get(cache, f->rootfd, r->_name, len, now);
    if (!e)
        return -1;
    r->entry = e;
    if (e->err) {
        open_failed(r, e->err);
        return 0;
    }
    bool slash = in->path_len ? in->path[in->path_len - 1] == '/'
                              : in->location_len && in->location[in->location_len - 1] == '/';
    if (!e->is_dir && slash) {
        fail(r, 404, "404 page not found\n"); /* "file.txt/" names a directory that is not */
        return 0;
    }
    if (e->is_dir) {
        if (!slash)
            return plan_redirect(in, r);
        if (!f->index) {
            fail(r, 404, "404 page not found\n");
            return 0;
        }
        if (len)
            r->_name[len++] = '/';
        memcpy(r->_name + len, f->index, f->index_len + 1);
        len += f->index_len;
        mh_file_cache_release(cache, e);
        e = r->entry = mh_file_cache_get(cache, f->rootfd, r->_name, len, now);
        if (!e)
            return -1;
        if (e->err || e->is_dir) {
            if (e->is_dir)
                fail(r, 404, "404 page not found\n");
            else
                open_failed(r, e->err);
            return 0;
        }
    }
    if (!e->type)
        e->type = mh_mime_lookup(mime, r->_name, len);
    const char *type = e->type;
    if (f->precompressed)
        choose_encoding(f, cache, in, now, len, r);
    e = r->entry;
    header(r, "ETag", e->etag, e->etag_len);
    header(r, "Last-Modified", e->last_modified, MH_HTTP_DATE_LEN);
    if (f->cache_control[0])
        header(r, "Cache-Control", f->cache_control, strlen(f->cache_control));
    if (r->varies)
        header(r, "Vary", "Accept-Encoding", 15);
    if (mh_cond_not_modified(in->if_none_match, in->if_none_match_len, in->if_modified_since,
                             in->if_modified_since_len, e->etag, e->etag_len, e->mtime)) {
        r->status = 304;
        return 0;
    }
    if (r->coding != MH_CODING_IDENTITY)
        header(r, "Content-Encoding", r->coding == MH_CODING_BR ? "br" : "gzip",
               r->coding == MH_CODING_BR ? 2 : 4);
    header(r, "Accept-Ranges", "bytes", 5);
    unsigned n = 0;
    enum mh_range_result rr = MH_RANGE_IGNORE;
    if (in->range && !in->head &&
        (!in->if_range ||
         mh_cond_if_range(in->if_range, in->if_range_len, e->etag, e->etag_len, e->mtime)))
        rr = mh_range_parse(in->range, in->range_len, e->size, r->_ranges, &n);
    if (rr == MH_RANGE_UNSATISFIABLE) {
        int k = snprintf(r->_len_buf, sizeof r->_len_buf, "bytes */%" PRIu64, e->size);
        header(r, "Content-Range", r->_len_buf, (size_t)k);
        fail(r, 416, "416 Range Not Satisfiable\n");
        return 0;
    }
    if (rr == MH_RANGE_OK) {
        if (plan_ranges(r, n, type) < 0)
            return -1;
    } else {
        r->status = 200;
        r->parts[0] = (struct mh_files_part){NULL, 0, 0, e->size};
        r->nparts = 1;
        r->content_length = e->size;
    }
    if (r->nparts < 2)
        header(r, "Content-Type", type, strlen(type));
    r->has_body = !in->head;
    return 0;
}
