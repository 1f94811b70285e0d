/* The streaming gzip encoder: what goes in comes out of inflate, in any chunking, with stream
 * reuse. */
#include "gzip_stream.h"
#include "unit.h"

#include <stdlib.h>

static size_t gunzip(const struct mh_buf *in, char *out, size_t cap)
{
    z_stream z;
    memset(&z, 0, sizeof z);
    if (inflateInit2(&z, 15 + 16) != Z_OK)
        return (size_t)-1;
    z.next_in = (Bytef *)in->data;
    z.avail_in = (uInt)in->len;
    z.next_out = (Bytef *)out;
    z.avail_out = (uInt)cap;
    int rc = inflate(&z, Z_FINISH);
    size_t n = cap - z.avail_out;
    inflateEnd(&z);
    return rc == Z_STREAM_END && z.avail_in == 0 ? n : (size_t)-1;
}

static void round_trip(struct mh_gzip *g, const char *data, size_t len, size_t chunk, int level,
                       uint64_t hint, bool flush_each)
{
    struct mh_buf out = {0};
    CHECK(mh_gzip_reset(g, level, hint) == NULL);
    size_t flushed_at = 0;
    for (size_t off = 0; off < len; off += chunk) {
        size_t n = len - off < chunk ? len - off : chunk;
        CHECK(mh_gzip_push(g, data + off, n, flush_each, false, &out) == NULL);
        if (flush_each) {
            CHECK(out.len > flushed_at); /* a flush always emits something */
            flushed_at = out.len;
        }
    }
    CHECK(mh_gzip_push(g, NULL, 0, false, true, &out) == NULL);
    CHECK(mh_gzip_push(g, "x", 1, false, false, &out) == mh_gzip_err_state);
    CHECK(out.len >= 18 && (unsigned char)out.data[0] == 0x1f &&
          (unsigned char)out.data[1] == 0x8b);
    char *back = malloc(len + 1);
    size_t n = gunzip(&out, back, len + 1);
    CHECKF(n == len && memcmp(back, data, len) == 0, "len %zu chunk %zu level %d: got %zu", len,
           chunk, level, n);
    free(back);
    mh_buf_free(&out);
}

int main(void)
{
    size_t len = 300 * 1024;
    char *data = malloc(len);
    unsigned x = 1;
    static const char *const words[] = {"{\"id\": ",   "\"name\": ", "\"alpha\", ", "42, ",
                                        "\"beta\"}, ", "[",          "]\n",         "true, "};
    for (size_t i = 0; i < len;) { /* compressible but not trivial: JSON-ish words */
        x = x * 1103515245 + 12345;
        const char *w = words[(x >> 16) % 8];
        for (; *w && i < len; w++)
            data[i++] = *w;
    }
    struct mh_gzip g;
    memset(&g, 0, sizeof g);
    round_trip(&g, data, len, len, 1, 0, false);
    round_trip(&g, data, len, 1000, 1, 0, false);
    round_trip(&g, data, len, 7, 6, 0, false);
    round_trip(&g, data, 20 * 1024, 4096, 1, 20 * 1024, true);
    round_trip(&g, data, 100, 100, 9, 100, false);
    round_trip(&g, data, 0, 1, 1, 0, false);
    round_trip(&g, data, len, 65536, 1, len, false);

    struct mh_buf out = {0};
    CHECK(mh_gzip_reset(&g, 1, 0) == NULL);
    CHECK(mh_gzip_push(&g, data, len, false, true, &out) == NULL);
    CHECK(out.len < len / 2);
    mh_buf_free(&out);
    mh_gzip_end(&g);
    mh_gzip_end(&g); /* idempotent */
    CHECK(mh_gzip_push(&g, "x", 1, false, false, &out) == mh_gzip_err_state);
    free(data);
    return unit_report();
}
