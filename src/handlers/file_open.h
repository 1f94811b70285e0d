#ifndef MH_FILE_OPEN_H
#define MH_FILE_OPEN_H
/*
 * Opening a file named by a request path, never outside a root directory.
 *
 * Two steps. mh_file_path_decode turns the escaped request path below the
 * mount point into a relative file name and refuses what no file name of
 * ours may contain: a NUL byte, an encoded '/' ("%2f"), a "." or ".."
 * segment (raw or encoded as "%2e%2e"), a malformed escape, and, unless
 * allowed, a segment starting with '.'. mh_file_open_beneath then opens that
 * name relative to the root's fd with openat2(RESOLVE_BENEATH |
 * RESOLVE_NO_MAGICLINKS), so a symlink that points out of the root fails in
 * the kernel; on kernels without openat2 it walks the name one component at
 * a time (mh_file_open_walk), which proves the same thing in user space.
 */
#include <stdbool.h>
#include <stddef.h>

/* Why a request path was refused (compared by identity). */
extern const char mh_file_err_bad_escape[]; /* malformed %XX: 400 */
extern const char mh_file_err_nul[];        /* a NUL byte: 400 */
extern const char mh_file_err_dotdot[];     /* a "." or ".." segment, raw or encoded: 400 */
extern const char mh_file_err_slash[];      /* "%2f" inside a segment: 400 */
extern const char mh_file_err_dotfile[];    /* a segment starting with '.', not allowed: 404 */
extern const char mh_file_err_too_long[];   /* longer than the output buffer: 414 */

/*
 * Decodes the escaped path `p` (the part of the request path after the
 * mount prefix, e.g. "css/a%20b.css") into `out` (NUL-terminated, at most
 * `cap` bytes with the NUL). Empty segments ("a//b") are dropped; a leading
 * '/' is dropped; a trailing '/' is kept, so the caller can tell a directory
 * request. Returns NULL and sets *len, or one of the errors above.
 */
const char *mh_file_path_decode(const char *p, size_t plen, bool dotfiles, char *out, size_t cap,
                                size_t *len);

/*
 * Opens `rel` (relative, as mh_file_path_decode makes it; "" is the root
 * itself) beneath `rootfd` with `flags` (O_RDONLY | O_CLOEXEC and the like;
 * O_CREAT is not supported). Symlinks are followed only while they stay
 * beneath the root; "/proc"-style magic links are never followed. Returns
 * the fd, or -errno: -ENOENT, -EACCES, -ENOTDIR, -EXDEV (would leave the
 * root), -ELOOP (too many links), -ENAMETOOLONG (deeper than
 * MH_FILE_WALK_DEPTH in the fallback).
 */
int mh_file_open_beneath(int rootfd, const char *rel, int flags);

/* Most directory levels the fallback walk holds open at once. */
#define MH_FILE_WALK_DEPTH 64

/*
 * The fallback of mh_file_open_beneath for kernels without openat2 (before
 * 5.6), exported so tests run it everywhere. Each component is opened with
 * O_NOFOLLOW relative to the fd of its parent; a symlink is read and its
 * target spliced into the remaining name; ".." pops to an fd already held,
 * so the walk never asks the kernel to resolve ".." and cannot be raced
 * out of the root. An absolute link target, or ".." at the root, is -EXDEV.
 */
int mh_file_open_walk(int rootfd, const char *rel, int flags);

#endif
