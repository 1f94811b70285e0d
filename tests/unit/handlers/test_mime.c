/* The MIME table: Debian's /etc/mime.types when present, the built-in fallback otherwise. */
#include "mime.h"
#include "unit.h"

#include <stdlib.h>
#include <unistd.h>

static const struct {
    const char *name, *type;
} rows[] = {
    {"index.html", "text/html; charset=utf-8"},
    {"a/b/INDEX.HTM", "text/html; charset=utf-8"},
    {"site.css", "text/css; charset=utf-8"},
    {"app.js", "text/javascript; charset=utf-8"},
    {"data.json", "application/json"},
    {"logo.svg", "image/svg+xml"},
    {"photo.jpg", "image/jpeg"},
    {"noext", "application/octet-stream"},
    {"dir.d/noext", "application/octet-stream"},
    {".bashrc", "application/octet-stream"},
    {"a/.hidden", "application/octet-stream"},
    {"trailing.", "application/octet-stream"},
    {"x.unknownextension", "application/octet-stream"},
};

static void check_rows(const struct mh_mime *m, const char *what)
{
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        const char *got = mh_mime_lookup(m, rows[i].name, strlen(rows[i].name));
        CHECKF(strcmp(got, rows[i].type) == 0, "%s: %s -> %s, want %s", what, rows[i].name, got,
               rows[i].type);
    }
}

int main(void)
{
    struct mh_mime *m = mh_mime_load("/etc/mime.types");
    CHECK(m != NULL);
    if (access("/etc/mime.types", R_OK) == 0) {
        CHECK(mh_mime_count(m) > 500);
        CHECK_STR(mh_mime_lookup(m, "a.wasm", 6), "application/wasm");
        CHECK_STR(mh_mime_lookup(m, "a.md", 4), "text/markdown; charset=utf-8");
    }
    check_rows(m, "mime.types");
    mh_mime_free(m);

    m = mh_mime_load("/nonexistent/mime.types");
    CHECK(m != NULL && mh_mime_count(m) < 50);
    check_rows(m, "built-in");
    mh_mime_free(m);

    char path[] = "/tmp/mh_mime_XXXXXX";
    int fd = mkstemp(path);
    const char text[] = "# comment\n"
                        "text/x-first\tfoo  BAR # trailing comment\n"
                        "   \n"
                        "application/x-second foo baz\n"
                        "application/x-lonely\n";
    CHECK(write(fd, text, sizeof text - 1) == (ssize_t)(sizeof text - 1));
    close(fd);
    m = mh_mime_load(path);
    CHECK_STR(mh_mime_lookup(m, "a.foo", 5), "text/x-first; charset=utf-8"); /* first line wins */
    CHECK_STR(mh_mime_lookup(m, "a.bar", 5), "text/x-first; charset=utf-8");
    CHECK_STR(mh_mime_lookup(m, "a.baz", 5), "application/x-second");
    CHECK_STR(mh_mime_lookup(m, "a.comment", 9), "application/octet-stream");
    mh_mime_free(m);
    unlink(path);
    return unit_report();
}
