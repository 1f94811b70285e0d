/* The static-file planner: request rows (path, headers) in, status, headers and body parts out. */
#include "files.h"
#include "mime.h"
#include "tmp_tree.h"
#include "unit.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[] = "/tmp/mh_files_XXXXXX";

struct row {
    const char *path;
    const char *hdr; /* "Name: value" lines separated by '|' */
    int status;
    const char *want; /* "Name=value" that must be among the headers, or NULL */
    const char *no;   /* header name that must be absent, or NULL */
    long length;      /* content_length, -1 = don't care */
};

static const struct row rows[] = {
    {"a.txt", "", 200, "Content-Type=text/plain; charset=utf-8", "Vary", 10},
    {"a.txt", "", 200, "Accept-Ranges=bytes", NULL, 10},
    {"a.txt", "", 200, "Cache-Control=max-age=60", NULL, -1},
    {"missing.txt", "", 404, NULL, NULL, -1},
    {"a.txt/", "", 404, NULL, NULL, -1},
    {"%2e%2e/x", "", 400, NULL, NULL, -1},
    {"a%00.txt", "", 400, NULL, NULL, -1},
    {"a%2f.txt", "", 400, NULL, NULL, -1},
    {".secret", "", 404, NULL, NULL, -1},
    {"sub", "", 301, "Location=/static/sub/?q=1", NULL, -1},
    {"sub/", "", 200, "Content-Type=text/html; charset=utf-8", NULL, 5},
    {"noindex/", "", 404, NULL, NULL, -1},
    {"", "", 200, "Content-Type=text/html; charset=utf-8", NULL, 4}, /* the mount's index */
    {"a.txt", "Range: bytes=0-3", 206, "Content-Range=bytes 0-3/10", NULL, 4},
    {"a.txt", "Range: bytes=-2", 206, "Content-Range=bytes 8-9/10", NULL, 2},
    {"a.txt", "Range: bytes=20-", 416, "Content-Range=bytes */10", NULL, -1},
    {"a.txt", "Range: bytes=5-2", 200, NULL, "Content-Range", 10},
    {"a.txt", "Range: bytes=0-0,5-6", 206,
     "Content-Type=multipart/byteranges; boundary=moonhttp-byteranges-3d1f0a", NULL, -1},
    {"a.txt", "Range: bytes=0-1|If-Range: \"nope\"", 200, NULL, "Content-Range", 10},
    {"a.txt", "If-None-Match: *", 304, NULL, "Content-Type", -1},
    {"a.txt", "If-Modified-Since: Fri, 01 Jan 2100 00:00:00 GMT", 304, NULL, NULL, -1},
    {"a.txt", "If-Modified-Since: Thu, 01 Jan 1970 00:00:00 GMT", 200, NULL, NULL, 10},
    {"app.js", "Accept-Encoding: gzip, br", 200, "Content-Encoding=br", NULL, 2},
    {"app.js", "Accept-Encoding: gzip", 200, "Content-Encoding=gzip", NULL, 3},
    {"app.js", "Accept-Encoding: gzip;q=0.5, br;q=0.4", 200, "Content-Encoding=gzip", NULL, 3},
    {"app.js", "", 200, NULL, "Content-Encoding", 12},
    {"app.js", "Accept-Encoding: gzip;q=0, br;q=0", 200, NULL, "Vary", 12},
    {"app.js", "Accept-Encoding: br", 200, "Vary=Accept-Encoding", NULL, 2},
    {"app.js", "Accept-Encoding: identity", 200, "Content-Type=text/javascript; charset=utf-8",
     "Content-Encoding", 12},
    {"app.js", "Accept-Encoding: gzip;q=0, br;q=0", 200, NULL, "Content-Encoding", 12},
};

static void run_row(const struct mh_files *f, struct mh_file_cache *c, const struct mh_mime *m,
                    size_t i, bool head)
{
    const struct row *w = &rows[i];
    struct mh_files_input in;
    memset(&in, 0, sizeof in);
    in.head = head;
    in.path = w->path;
    in.path_len = strlen(w->path);
    char loc[128];
    snprintf(loc, sizeof loc, "/static/%s", w->path);
    in.location = loc;
    in.location_len = strlen(loc);
    in.query = "q=1";
    in.query_len = 3;
    mh_accept_encoding_init(&in.accept);
    char hdrs[256];
    snprintf(hdrs, sizeof hdrs, "%s", w->hdr);
    for (char *line = strtok(hdrs, "|"); line; line = strtok(NULL, "|")) {
        char *v = strchr(line, ':');
        *v = '\0';
        v += 2;
        size_t vl = strlen(v);
        if (!strcmp(line, "Range"))
            in.range = v, in.range_len = vl;
        else if (!strcmp(line, "If-Range"))
            in.if_range = v, in.if_range_len = vl;
        else if (!strcmp(line, "If-None-Match"))
            in.if_none_match = v, in.if_none_match_len = vl;
        else if (!strcmp(line, "If-Modified-Since"))
            in.if_modified_since = v, in.if_modified_since_len = vl;
        else if (!strcmp(line, "Accept-Encoding"))
            mh_accept_encoding_add(&in.accept, v, vl);
    }
    struct mh_files_reply r;
    mh_files_reply_init(&r);
    CHECK(mh_files_plan(f, c, m, &in, 1.0, &r) == 0);
    bool ranged = head && (w->status == 206 || w->status == 416); /* HEAD ignores Range */
    int want_status = ranged ? 200 : w->status;
    CHECKF(r.status == want_status, "row %zu%s (%s %s): status %d want %d", i, head ? " HEAD" : "",
           w->path, w->hdr, r.status, want_status);
    if (w->want && !ranged) {
        bool found = false;
        for (unsigned k = 0; k < r.nheaders; k++) {
            char hv[256];
            snprintf(hv, sizeof hv, "%s=%.*s", r.headers[k].name, (int)r.headers[k].value_len,
                     r.headers[k].value);
            found |= strcmp(hv, w->want) == 0;
        }
        CHECKF(found, "row %zu: no header %s", i, w->want);
    }
    for (unsigned k = 0; w->no && k < r.nheaders; k++)
        CHECKF(strcmp(r.headers[k].name, w->no) != 0, "row %zu: unexpected %s", i, w->no);
    if (w->length >= 0 && !head)
        CHECKF(r.content_length == (uint64_t)w->length, "row %zu: length %llu want %ld", i,
               (unsigned long long)r.content_length, w->length);
    CHECK(r.has_body == (!head && (r.status == 200 || r.status == 206)));
    mh_files_reply_free(&r, c);
}

/* Multipart framing: the parts add up to Content-Length and carry the right bytes. */
static void test_multipart(const struct mh_files *f, struct mh_file_cache *c,
                           const struct mh_mime *m)
{
    struct mh_files_input in;
    memset(&in, 0, sizeof in);
    in.path = "a.txt";
    in.path_len = 5;
    in.range = "bytes=7-8,0-1,1-2";
    in.range_len = strlen(in.range);
    mh_accept_encoding_init(&in.accept);
    struct mh_files_reply r;
    mh_files_reply_init(&r);
    CHECK(mh_files_plan(f, c, m, &in, 1.0, &r) == 0);
    CHECK(r.status == 206 && r.nparts == 3);
    char body[1024];
    size_t n = 0;
    for (unsigned i = 0; i < r.nparts; i++) {
        memcpy(body + n, r.parts[i].mem, r.parts[i].mem_len);
        n += r.parts[i].mem_len;
        CHECK(pread(r.entry->fd, body + n, r.parts[i].len, (off_t)r.parts[i].offset) ==
              (ssize_t)r.parts[i].len);
        n += r.parts[i].len;
    }
    body[n] = '\0';
    CHECK(n == r.content_length);
    CHECK_STR(body,
              "--moonhttp-byteranges-3d1f0a\r\nContent-Type: text/plain; charset=utf-8\r\n"
              "Content-Range: bytes 0-2/10\r\n\r\n012"
              "\r\n--moonhttp-byteranges-3d1f0a\r\nContent-Type: text/plain; charset=utf-8\r\n"
              "Content-Range: bytes 7-8/10\r\n\r\n78"
              "\r\n--moonhttp-byteranges-3d1f0a--\r\n");
    mh_files_reply_free(&r, c);
}

int main(void)
{
    if (!mkdtemp(dir))
        return 1;
    char p[300];
    snprintf(p, sizeof p, "%s/sub", dir);
    mkdir(p, 0755);
    snprintf(p, sizeof p, "%s/noindex", dir);
    mkdir(p, 0755);
    tmp_put(dir, "a.txt", "0123456789");
    tmp_put(dir, ".secret", "s");
    tmp_put(dir, "index.html", "root");
    tmp_put(dir, "sub/index.html", "hello");
    tmp_put(dir, "app.js", "console.log1");
    tmp_put(dir, "app.js.gz", "GZ!");
    tmp_put(dir, "app.js.br", "BR");
    struct mh_files_opts o = {.index = "index.html", .max_age = 60, .precompressed = true};
    char err[256];
    struct mh_files *f = mh_files_new(dir, &o, err, sizeof err);
    CHECK(f != NULL);
    CHECK(mh_files_new("/nonexistent", &o, err, sizeof err) == NULL && strstr(err, "/nonexistent"));
    struct mh_mime *m = mh_mime_load("/etc/mime.types");
    struct mh_file_cache *c = mh_file_cache_new(64, 10);
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        run_row(f, c, m, i, false);
        run_row(f, c, m, i, true);
    }
    test_multipart(f, c, m);
    mh_file_cache_free(c);
    mh_mime_free(m);
    mh_files_free(f);
    tmp_remove(dir);
    return unit_report();
}
