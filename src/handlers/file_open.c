#define _GNU_SOURCE /* O_PATH, openat2 */
#include "file_open.h"

#include "path.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

const char mh_file_err_bad_escape[] = "bad escape";
const char mh_file_err_nul[] = "NUL byte";
const char mh_file_err_dotdot[] = "dot segment";
const char mh_file_err_slash[] = "encoded slash";
const char mh_file_err_dotfile[] = "dotfile";
const char mh_file_err_too_long[] = "path too long";

const char *mh_file_path_decode(const char *p, size_t plen, bool dotfiles, char *out, size_t cap,
                                size_t *len)
{
    size_t o = 0;
    size_t i = 0;
    while (i < plen) {
        if (p[i] == '/') {
            i++;
            continue;
        }
        size_t seg = o ? o + 1 : 0; /* where this segment's first byte goes */
        if (seg >= cap)
            return mh_file_err_too_long;
        if (o)
            out[o] = '/';
        size_t w = seg;
        for (; i < plen && p[i] != '/'; i++) {
            unsigned char c = (unsigned char)p[i];
            if (c == '%') {
                int hi = i + 2 < plen ? mh_path_hexval((unsigned char)p[i + 1]) : -1;
                int lo = hi >= 0 ? mh_path_hexval((unsigned char)p[i + 2]) : -1;
                if (lo < 0)
                    return mh_file_err_bad_escape;
                c = (unsigned char)(hi << 4 | lo);
                i += 2;
                if (c == '/')
                    return mh_file_err_slash;
            }
            if (c == 0)
                return mh_file_err_nul;
            if (w + 1 >= cap)
                return mh_file_err_too_long;
            out[w++] = (char)c;
        }
        size_t n = w - seg;
        if (out[seg] == '.') {
            if (n == 1 || (n == 2 && out[seg + 1] == '.'))
                return mh_file_err_dotdot;
            if (!dotfiles)
                return mh_file_err_dotfile;
        }
        o = w;
    }
    out[o] = '\0';
    *len = o;
    return NULL;
}

/*
 * Set once the kernel answered ENOSYS: it will not grow openat2 while we
 * run, so later opens go straight to the walk. A fact about the process's
 * kernel, not per-worker state, hence a file-level flag.
 */
static int no_openat2;

int mh_file_open_beneath(int rootfd, const char *rel, int flags)
{
    if (!no_openat2) {
        struct open_how how;
        memset(&how, 0, sizeof how);
        how.flags = (unsigned long long)flags;
        how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
        long fd = syscall(SYS_openat2, rootfd, *rel ? rel : ".", &how, sizeof how);
        if (fd >= 0)
            return (int)fd;
        if (errno != ENOSYS)
            return -errno;
        no_openat2 = 1;
    }
    return mh_file_open_walk(rootfd, rel, flags);
}

/*
 * Replaces the name at *rest (what follows the link, "" or "/...") with
 * `target` + that, so a link at the end stays a last component.
 */
static int splice_link(char *buf, size_t cap, char **rest, const char *target, size_t tlen)
{
    size_t left = strlen(*rest);
    if (tlen + left + 1 > cap)
        return -ENAMETOOLONG;
    memmove(buf + tlen, *rest, left + 1);
    memcpy(buf, target, tlen);
    *rest = buf;
    return 0;
}

int mh_file_open_walk(int rootfd, const char *rel, int flags)
{
    int stack[MH_FILE_WALK_DEPTH];
    int depth = 0, links = 0, ret;
    char buf[2 * PATH_MAX];
    size_t rlen = strlen(rel);
    if (rlen >= sizeof buf)
        return -ENAMETOOLONG;
    memcpy(buf, rel, rlen + 1);
    char *rest = buf;
    for (;;) {
        while (*rest == '/')
            rest++;
        int cur = depth ? stack[depth - 1] : rootfd;
        if (!*rest) { /* the name ended at a directory: open it with the caller's flags */
            ret = openat(cur, ".", flags | O_CLOEXEC);
            ret = ret < 0 ? -errno : ret;
            break;
        }
        char *end = strchr(rest, '/');
        size_t n = end ? (size_t)(end - rest) : strlen(rest);
        char comp[NAME_MAX + 1];
        if (n > NAME_MAX) {
            ret = -ENAMETOOLONG;
            break;
        }
        memcpy(comp, rest, n);
        comp[n] = '\0';
        rest += n;
        if (strcmp(comp, ".") == 0)
            continue;
        if (strcmp(comp, "..") == 0) {
            if (!depth) {
                ret = -EXDEV;
                break;
            }
            close(stack[--depth]);
            continue;
        }
        int fd = openat(cur, comp, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) < 0) {
            ret = -errno;
            if (fd >= 0)
                close(fd);
            break;
        }
        if (S_ISLNK(st.st_mode)) {
            char target[PATH_MAX];
            ssize_t tl = readlinkat(fd, "", target, sizeof target);
            close(fd);
            if (tl < 0 || (size_t)tl >= sizeof target) {
                ret = tl < 0 ? -errno : -ENAMETOOLONG;
                break;
            }
            if (++links > 40) {
                ret = -ELOOP;
                break;
            }
            if (tl == 0 || target[0] == '/') {
                ret = -EXDEV; /* an absolute link cannot be proven to stay beneath */
                break;
            }
            if ((ret = splice_link(buf, sizeof buf, &rest, target, (size_t)tl)) < 0)
                break;
            continue;
        }
        if (!*rest) { /* the last component, without a trailing '/' */
            close(fd);
            /* O_NOFOLLOW: if a symlink was swapped in since the check, refuse it. */
            ret = openat(cur, comp, flags | O_NOFOLLOW | O_CLOEXEC);
            ret = ret < 0 ? -errno : ret;
            break;
        }
        if (!S_ISDIR(st.st_mode)) {
            close(fd);
            ret = -ENOTDIR;
            break;
        }
        if (depth == MH_FILE_WALK_DEPTH) {
            close(fd);
            ret = -ENAMETOOLONG;
            break;
        }
        stack[depth++] = fd;
    }
    while (depth)
        close(stack[--depth]);
    return ret;
}
