/* Compression settings and the per-response decision, as rows. */
#include "compress.h"
#include "unit.h"

static const struct {
    bool head;
    int status;
    const char *type, *ae;
    bool encoded, no_transform;
    long length; /* -1 unknown */
    bool gzip, vary;
} rows[] = {
    {false, 200, "text/html; charset=utf-8", "gzip", false, false, 2000, true, true},
    {false, 200, "TEXT/Plain", "gzip", false, false, -1, true, true},
    {false, 200, "application/json", "br, gzip;q=0.5", false, false, 5000, true, true},
    {false, 200, "application/json", "identity", false, false, 5000, false, true},
    {false, 200, "application/json", "gzip;q=0", false, false, 5000, false, true},
    {false, 200, "application/json", NULL, false, false, 5000, false, true},
    {false, 200, "application/json", "gzip", false, false, 1023, false, false},
    {false, 200, "application/json", "gzip", false, false, 1024, true, true},
    {false, 200, "image/png", "gzip", false, false, 5000, false, false},
    {false, 200, "application/jsonx", "gzip", false, false, 5000, false, false},
    {false, 200, "text", "gzip", false, false, 5000, false, false},
    {false, 200, NULL, "gzip", false, false, 5000, false, false},
    {true, 200, "text/html", "gzip", false, false, 5000, false, false},
    {false, 204, "text/html", "gzip", false, false, -1, false, false},
    {false, 304, "text/html", "gzip", false, false, -1, false, false},
    {false, 206, "text/html", "gzip", false, false, 5000, false, false},
    {false, 101, "text/html", "gzip", false, false, -1, false, false},
    {false, 404, "text/html", "gzip", false, false, 5000, true, true},
    {false, 200, "text/html", "gzip", true, false, 5000, false, false},
    {false, 200, "text/html", "gzip", false, true, 5000, false, false},
};

int main(void)
{
    struct mh_compress_conf c;
    mh_compress_conf_init(&c);
    CHECK(!c.on && c.level == 1 && c.min_bytes == 1024 && c.ntypes == 4);
    c.on = true;
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        struct mh_accept_encoding a;
        mh_accept_encoding_init(&a);
        if (rows[i].ae)
            mh_accept_encoding_add(&a, rows[i].ae, strlen(rows[i].ae));
        struct mh_compress_input in = {
            .head = rows[i].head,
            .status = rows[i].status,
            .type = rows[i].type,
            .type_len = rows[i].type ? strlen(rows[i].type) : 0,
            .encoded = rows[i].encoded,
            .no_transform = rows[i].no_transform,
            .length_known = rows[i].length >= 0,
            .length = rows[i].length >= 0 ? (uint64_t)rows[i].length : 0,
            .accept = &a,
        };
        struct mh_compress_verdict v = mh_compress_decide(&c, &in);
        CHECKF(v.gzip == rows[i].gzip && v.vary == rows[i].vary, "row %zu: gzip %d vary %d", i,
               v.gzip, v.vary);
    }
    c.on = false;
    struct mh_accept_encoding a;
    mh_accept_encoding_init(&a);
    mh_accept_encoding_add(&a, "gzip", 4);
    struct mh_compress_input in = {.status = 200, .type = "text/html", .type_len = 9, .accept = &a};
    CHECK(!mh_compress_decide(&c, &in).gzip);

    mh_compress_conf_clear_types(&c);
    CHECK(mh_compress_conf_add_type(&c, "Application/XML", 15) == NULL);
    CHECK(mh_compress_type_matches(&c, "application/xml;charset=utf-8", 29));
    CHECK(!mh_compress_type_matches(&c, "text/html", 9));
    CHECK(mh_compress_conf_add_type(&c, "text", 4) != NULL);
    CHECK(mh_compress_conf_add_type(&c, "/json", 5) != NULL);
    CHECK(mh_compress_conf_add_type(&c, "text/", 5) != NULL);
    CHECK(mh_compress_conf_add_type(&c, "a/b/c", 5) != NULL);
    CHECK(mh_compress_conf_add_type(&c, "te xt/html", 10) != NULL);
    CHECK(mh_compress_conf_add_type(&c, "*/*", 3) != NULL);
    for (int i = 1; i < MH_COMPRESS_MAX_TYPES; i++)
        CHECK(mh_compress_conf_add_type(&c, "a/b", 3) == NULL);
    CHECK(mh_compress_conf_add_type(&c, "a/b", 3) != NULL);

    CHECK(mh_compress_no_transform("no-transform", 12));
    CHECK(mh_compress_no_transform("max-age=1, No-Transform", 23));
    CHECK(!mh_compress_no_transform("no-transformer", 14));
    CHECK(!mh_compress_no_transform("xno-transform", 13));
    CHECK(!mh_compress_no_transform("", 0));
    return unit_report();
}
