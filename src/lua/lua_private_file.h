#ifndef MH_LUA_PRIVATE_FILE_H
#define MH_LUA_PRIVATE_FILE_H
/*
 * core.write_private and core.mkdir_private: files a server keeps for itself
 * (ACME keys and certificates), written atomically and with their mode from
 * the start, by system calls in the calling process. A serving worker must not
 * fork a shell for this: a fork copies its page tables (slow with a large
 * RSS, on a busy server) and a shell command line brings quoting risks.
 *   write_private(path, data, mode) -> true: data is written to a new file in
 *       path's folder (O_CREAT|O_EXCL, created with mode, then umask), synced,
 *       renamed over path, and the folder synced: a reader (another worker, a
 *       restart, a crash) sees the old file or the new one, never part of one
 *   mkdir_private(path, mode)       -> true: path and its missing parents are
 *       made, each with mode; an existing folder is left as it is
 * Failures (a folder the server cannot write, a file where a folder should
 * be) answer nil, "<what> <path>: <strerror>"; only wrong argument types raise.
 */
#include <lua.h>

/* Sets core.write_private and core.mkdir_private on the table on top of L. */
void mh_lua_private_file_open(lua_State *L);

#endif
