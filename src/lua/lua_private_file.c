#include "lua_private_file.h"

#include <errno.h>
#include <fcntl.h>
#include <lauxlib.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A temporary name taken by a writer that died is skipped; this many are tried. */
#define TMP_TRIES 16

static int fail(lua_State *L, const char *what, const char *path, int err)
{
    lua_pushnil(L);
    lua_pushfstring(L, "%s %s: %s", what, path, strerror(err));
    return 2;
}

static lua_Integer check_mode(lua_State *L, int arg)
{
    lua_Integer mode = luaL_checkinteger(L, arg);
    luaL_argcheck(L, mode >= 0 && mode <= 07777, arg, "a file mode (0 to 0o7777)");
    return mode;
}

static int write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Syncs the folder holding path, so the rename itself survives a crash. */
static int sync_folder(const char *path)
{
    const char *slash = strrchr(path, '/');
    char dir[PATH_MAX];
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else
        snprintf(dir, sizeof dir, "%.*s", slash == path ? 1 : (int)(slash - path), path);
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int ret = fsync(fd);
    int err = errno;
    close(fd);
    errno = err;
    return ret;
}

/*
 * The temporary file is named after path and this process, so two workers
 * writing the same file never share one; O_EXCL makes a name left by a writer
 * that died (same pid, reused) a retry with the next number, never a write
 * into someone else's file.
 */
static int l_write_private(lua_State *L)
{
    const char *path = luaL_checkstring(L, 1);
    size_t len;
    const char *data = luaL_checklstring(L, 2, &len);
    mode_t mode = (mode_t)check_mode(L, 3);
    static unsigned counter;
    char tmp[PATH_MAX];
    int fd = -1;
    for (int i = 0; i < TMP_TRIES && fd < 0; i++) {
        if (snprintf(tmp, sizeof tmp, "%s.tmp-%ld-%u", path, (long)getpid(), counter++) >=
            (int)sizeof tmp)
            return fail(L, "cannot write", path, ENAMETOOLONG);
        fd = open(tmp, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, mode);
        if (fd < 0 && errno != EEXIST)
            return fail(L, "cannot write", path, errno);
    }
    if (fd < 0)
        return fail(L, "cannot write", path, EEXIST);
    int err = 0;
    if (write_all(fd, data, len) < 0 || fsync(fd) < 0)
        err = errno;
    if (close(fd) < 0 && !err)
        err = errno;
    if (!err && rename(tmp, path) < 0)
        err = errno;
    if (err) {
        unlink(tmp);
        return fail(L, "cannot write", path, err);
    }
    if (sync_folder(path) < 0)
        return fail(L, "cannot sync the folder of", path, errno);
    lua_pushboolean(L, 1);
    return 1;
}

/* Makes one folder; an existing one is fine, anything else there is an error. */
static int make_one(const char *dir, mode_t mode)
{
    if (mkdir(dir, mode) == 0)
        return 0;
    int err = errno;
    struct stat st;
    if (err == EEXIST) {
        if (stat(dir, &st) < 0)
            return -1;
        if (S_ISDIR(st.st_mode))
            return 0;
        errno = ENOTDIR;
        return -1;
    }
    errno = err;
    return -1;
}

/* mkdir -p, each folder it makes with mode; the error names the folder that failed. */
static int l_mkdir_private(lua_State *L)
{
    size_t len;
    const char *path = luaL_checklstring(L, 1, &len);
    mode_t mode = (mode_t)check_mode(L, 2);
    char dir[PATH_MAX];
    if (len == 0)
        return fail(L, "cannot create the folder", path, ENOENT);
    if (len >= sizeof dir)
        return fail(L, "cannot create the folder", path, ENAMETOOLONG);
    memcpy(dir, path, len + 1);
    for (char *p = dir + 1; *p; p++) {
        if (*p != '/' || p[-1] == '/')
            continue;
        *p = '\0';
        int ret = make_one(dir, mode);
        *p = '/';
        if (ret < 0) {
            int err = errno;
            *p = '\0';
            return fail(L, "cannot create the folder", dir, err);
        }
    }
    if (make_one(dir, mode) < 0)
        return fail(L, "cannot create the folder", path, errno);
    lua_pushboolean(L, 1);
    return 1;
}

void mh_lua_private_file_open(lua_State *L)
{
    static const luaL_Reg fns[] = {
        {"write_private", l_write_private},
        {"mkdir_private", l_mkdir_private},
        {NULL, NULL},
    };
    luaL_setfuncs(L, fns, 0);
}
