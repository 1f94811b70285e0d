#define _GNU_SOURCE /* O_PATH */
/* Safe opening beneath a root: path decoding rules, then openat2 and the walk fallback on a real
 * tree. */
#include "file_open.h"
#include "tmp_tree.h"
#include "unit.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static const struct {
    const char *in;
    bool dotfiles;
    const char *err; /* NULL: decodes to `out` */
    const char *out;
} decode_rows[] = {
    {"a.txt", false, NULL, "a.txt"},
    {"/css//site.css", false, NULL, "css/site.css"},
    {"dir/", false, NULL, "dir"},
    {"", false, NULL, ""},
    {"a%20b.txt", false, NULL, "a b.txt"},
    {"%41%62c", false, NULL, "Abc"},
    {"..", false, mh_file_err_dotdot, NULL},
    {"a/../b", false, mh_file_err_dotdot, NULL},
    {"a/./b", false, mh_file_err_dotdot, NULL},
    {"%2e%2e/etc/passwd", false, mh_file_err_dotdot, NULL},
    {"%2E%2e", false, mh_file_err_dotdot, NULL},
    {".%2e/x", false, mh_file_err_dotdot, NULL},
    {"a/%2e", true, mh_file_err_dotdot, NULL},
    {"..%2fetc", false, mh_file_err_slash, NULL},
    {"a%2Fb", false, mh_file_err_slash, NULL},
    {"a%00.txt", false, mh_file_err_nul, NULL},
    {"a%0", false, mh_file_err_bad_escape, NULL},
    {"a%zz", false, mh_file_err_bad_escape, NULL},
    {"%", false, mh_file_err_bad_escape, NULL},
    {".git/config", false, mh_file_err_dotfile, NULL},
    {"a/.env", false, mh_file_err_dotfile, NULL},
    {"%2eenv", false, mh_file_err_dotfile, NULL},
    {".well-known/x", true, NULL, ".well-known/x"},
    {"a/...", true, NULL, "a/..."},
    {"a..b", false, NULL, "a..b"},
};

static void test_decode(void)
{
    for (size_t i = 0; i < sizeof decode_rows / sizeof decode_rows[0]; i++) {
        char out[64];
        size_t len = 99;
        const char *err = mh_file_path_decode(decode_rows[i].in, strlen(decode_rows[i].in),
                                              decode_rows[i].dotfiles, out, sizeof out, &len);
        CHECKF(err == decode_rows[i].err, "row %zu (%s): err %s", i, decode_rows[i].in,
               err ? err : "none");
        if (!decode_rows[i].err && !err) {
            CHECK_STR(out, decode_rows[i].out);
            CHECK(len == strlen(decode_rows[i].out));
        }
    }
    char small[4];
    size_t len;
    CHECK(mh_file_path_decode("abcd", 4, false, small, sizeof small, &len) == mh_file_err_too_long);
    CHECK(mh_file_path_decode("abc", 3, false, small, sizeof small, &len) == NULL);
    CHECK(mh_file_path_decode("a/bc", 4, false, small, sizeof small, &len) == mh_file_err_too_long);
}

static char tmpl[] = "/tmp/mh_open_XXXXXX";

static void link_at(const char *target, const char *rel)
{
    char p[256];
    snprintf(p, sizeof p, "%s/%s", tmpl, rel);
    if (symlink(target, p) < 0)
        perror("symlink");
}

static void mkdir_at(const char *rel)
{
    char p[256];
    snprintf(p, sizeof p, "%s/%s", tmpl, rel);
    mkdir(p, 0755);
}

/* What opening `rel` beneath root/ gives: 0 = a readable fd whose content starts with `want`. */
static const struct {
    const char *rel;
    int err;
    const char *want;
} open_rows[] = {
    {"a.txt", 0, "A"},
    {"sub/b.txt", 0, "B"},
    {"sub", 0, NULL},
    {"", 0, NULL},
    {"missing", -ENOENT, NULL},
    {"sub/missing", -ENOENT, NULL},
    {"a.txt/x", -ENOTDIR, NULL},
    {"in_link", 0, "A"},            /* -> a.txt */
    {"sub/up_link", 0, "A"},        /* -> ../a.txt, still inside */
    {"dir_link/b.txt", 0, "B"},     /* -> sub */
    {"out_link", -EXDEV, NULL},     /* -> ../outside.txt */
    {"abs_link", -EXDEV, NULL},     /* -> /etc/passwd */
    {"sub/deep_out", -EXDEV, NULL}, /* -> ../../outside.txt */
    {"loop1", -ELOOP, NULL},        /* -> loop2 -> loop1 */
};

static void test_open(int (*open_fn)(int, const char *, int), const char *what)
{
    char root[256];
    snprintf(root, sizeof root, "%s/root", tmpl);
    int rootfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
    CHECK(rootfd >= 0);
    for (size_t i = 0; i < sizeof open_rows / sizeof open_rows[0]; i++) {
        int fd = open_fn(rootfd, open_rows[i].rel, O_RDONLY | O_CLOEXEC);
        int err = fd < 0 ? fd : 0;
        CHECKF(err == open_rows[i].err, "%s row %zu (%s): got %d want %d", what, i,
               open_rows[i].rel, err, open_rows[i].err);
        if (fd >= 0 && open_rows[i].want) {
            char buf[8] = {0};
            CHECK(read(fd, buf, sizeof buf - 1) > 0);
            CHECKF(strncmp(buf, open_rows[i].want, strlen(open_rows[i].want)) == 0,
                   "%s row %zu: content %s", what, i, buf);
        }
        if (fd >= 0)
            close(fd);
    }
    close(rootfd);
}

int main(void)
{
    test_decode();
    if (!mkdtemp(tmpl))
        return 1;
    mkdir_at("root");
    mkdir_at("root/sub");
    tmp_put(tmpl, "outside.txt", "OUT");
    tmp_put(tmpl, "root/a.txt", "A");
    tmp_put(tmpl, "root/sub/b.txt", "B");
    link_at("a.txt", "root/in_link");
    link_at("../a.txt", "root/sub/up_link");
    link_at("sub", "root/dir_link");
    link_at("../outside.txt", "root/out_link");
    link_at("/etc/passwd", "root/abs_link");
    link_at("../../outside.txt", "root/sub/deep_out");
    link_at("loop2", "root/loop1");
    link_at("loop1", "root/loop2");
    test_open(mh_file_open_beneath, "beneath");
    test_open(mh_file_open_walk, "walk");
    tmp_remove(tmpl);
    return unit_report();
}
