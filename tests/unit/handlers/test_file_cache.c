/* The open-file cache: hits cost no open, TTL expiry, LRU bound, errors cached, no fd closed in
 * use. */
#define _GNU_SOURCE /* O_PATH */
#include "file_cache.h"
#include "tmp_tree.h"
#include "unit.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[] = "/tmp/mh_fcache_XXXXXX";

int main(void)
{
    if (!mkdtemp(dir))
        return 1;
    tmp_put(dir, "a.txt", "hello");
    tmp_put(dir, "b.txt", "bb");
    tmp_put(dir, "c.txt", "ccc");
    char sub[300];
    snprintf(sub, sizeof sub, "%s/sub", dir);
    mkdir(sub, 0755);
    int root = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);

    struct mh_file_cache *c = mh_file_cache_new(2, 1.0);
    struct mh_file_cache_stats st;
    struct mh_file_entry *a = mh_file_cache_get(c, root, "a.txt", 5, 100.0);
    CHECK(a && a->err == 0 && a->fd >= 0 && a->size == 5 && !a->is_dir);
    CHECK(a->etag_len > 2 && a->etag[0] == '"');
    CHECK(strlen(a->last_modified) == MH_HTTP_DATE_LEN);
    struct mh_file_entry *a2 = mh_file_cache_get(c, root, "a.txt", 5, 100.5);
    CHECK(a2 == a);
    mh_file_cache_stats(c, &st);
    CHECK(st.hits == 1 && st.misses == 1 && st.entries == 1);
    mh_file_cache_release(c, a2);

    /* Expired: reopened, and the old entry (still held) keeps its fd until released. */
    tmp_put(dir, "a.txt", "hello, longer");
    struct mh_file_entry *a3 = mh_file_cache_get(c, root, "a.txt", 5, 101.5);
    CHECK(a3 != a && a3->size == 13);
    char buf[8];
    CHECK(pread(a->fd, buf, 5, 0) == 5); /* the held fd still works */
    mh_file_cache_release(c, a);
    mh_file_cache_release(c, a3);

    struct mh_file_entry *m = mh_file_cache_get(c, root, "missing", 7, 102.0);
    CHECK(m && m->err == -ENOENT && m->fd == -1);
    mh_file_cache_release(c, m);
    m = mh_file_cache_get(c, root, "missing", 7, 102.1);
    CHECK(m && m->err == -ENOENT);
    mh_file_cache_stats(c, &st);
    CHECK(st.hits == 2); /* the 404 came from the cache */
    mh_file_cache_release(c, m);

    /* Bounded: a third name evicts the least recently used. */
    struct mh_file_entry *b = mh_file_cache_get(c, root, "b.txt", 5, 102.2);
    mh_file_cache_release(c, b);
    mh_file_cache_stats(c, &st);
    CHECK(st.entries == 2 && st.evictions >= 1);

    /* All entries held: a new name is served uncached. */
    struct mh_file_entry *h1 = mh_file_cache_get(c, root, "b.txt", 5, 102.3);
    struct mh_file_entry *h2 = mh_file_cache_get(c, root, "missing", 7, 102.3);
    struct mh_file_entry *h3 = mh_file_cache_get(c, root, "c.txt", 5, 102.3);
    CHECK(h1 && h2 && h3 && h3->size == 3);
    mh_file_cache_stats(c, &st);
    CHECK(st.entries == 2);
    mh_file_cache_release(c, h3);
    mh_file_cache_release(c, h2);
    mh_file_cache_release(c, h1);

    struct mh_file_entry *d = mh_file_cache_get(c, root, "sub", 3, 103.0);
    CHECK(d && d->err == 0 && d->is_dir && d->fd == -1);
    mh_file_cache_release(c, d);
    struct mh_file_entry *esc = mh_file_cache_get(c, root, "../etc/passwd", 13, 103.0);
    CHECK(esc && esc->err == -EXDEV);
    mh_file_cache_release(c, esc);
    mh_file_cache_free(c);

    /* max_entries 0: no caching at all. */
    c = mh_file_cache_new(0, 1.0);
    a = mh_file_cache_get(c, root, "a.txt", 5, 1.0);
    a2 = mh_file_cache_get(c, root, "a.txt", 5, 1.0);
    CHECK(a && a2 && a != a2);
    mh_file_cache_release(c, a);
    mh_file_cache_release(c, a2);
    mh_file_cache_free(c);

    close(root);
    tmp_remove(dir);
    return unit_report();
}
