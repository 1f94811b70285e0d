#include "app_test.h"

#include "lua_load.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* Writes <dir>/moonhttp/test.lua from the embedded copy; 0 or -1 with errno. */
static int write_helper(const char *dir, char *file, size_t filelen)
{
    size_t len;
    const char *src = mh_lua_embedded_source("moonhttp.test", &len);
    char sub[PATH_MAX];
    if ((size_t)snprintf(sub, sizeof sub, "%s/moonhttp", dir) >= sizeof sub ||
        (size_t)snprintf(file, filelen, "%s/test.lua", sub) >= filelen) {
        errno = ENAMETOOLONG;
        return -1;
    }
    if (!src || mkdir(sub, 0700) < 0)
        return -1;
    FILE *f = fopen(file, "w");
    if (!f)
        return -1;
    size_t wrote = fwrite(src, 1, len, f);
    return fclose(f) == 0 && wrote == len ? 0 : -1;
}

/*
 * Lua 5.4 reads LUA_PATH_5_4 before LUA_PATH: the folder goes first in the
 * one it will read; ";;" (Lua's default path) ends a path that was unset.
 */
static void put_first_on_lua_path(const char *dir)
{
    const char *name = getenv("LUA_PATH_5_4") ? "LUA_PATH_5_4" : "LUA_PATH";
    const char *was = getenv(name);
    size_t n = strlen(dir) + (was ? strlen(was) : 0) + 16;
    char *path = malloc(n);
    if (!path)
        return;
    snprintf(path, n, "%s/?.lua;%s", dir, was ? was : ";");
    setenv(name, path, 1);
    free(path);
}

static int run_busted(int argc, char **argv)
{
    char **args = calloc((size_t)argc + 2, sizeof *args);
    if (!args)
        return 1;
    args[0] = "busted";
    memcpy(args + 1, argv, (size_t)argc * sizeof *args);
    pid_t pid = fork();
    if (pid == 0) {
        execvp("busted", args);
        if (errno == ENOENT)
            fprintf(stderr, "moonhttp test: busted is not installed (Debian: apt install "
                            "lua-busted; LuaRocks: luarocks --lua-version 5.4 install busted)\n");
        else
            fprintf(stderr, "moonhttp test: cannot run busted: %s\n", strerror(errno));
        _exit(127);
    }
    free(args);
    if (pid < 0) {
        fprintf(stderr, "moonhttp test: fork: %s\n", strerror(errno));
        return 1;
    }
    /* As system(3): ^C stops busted, and this process stays to clean up after it. */
    struct sigaction ignore = {.sa_handler = SIG_IGN}, was_int, was_quit;
    sigaction(SIGINT, &ignore, &was_int);
    sigaction(SIGQUIT, &ignore, &was_quit);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    sigaction(SIGINT, &was_int, NULL);
    sigaction(SIGQUIT, &was_quit, NULL);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int mh_app_test_run(int argc, char **argv)
{
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n < 0) {
        fprintf(stderr, "moonhttp test: cannot find this binary: %s\n", strerror(errno));
        return 1;
    }
    self[n] = 0;
    const char *tmp = getenv("TMPDIR");
    char dir[PATH_MAX], file[PATH_MAX];
    file[0] = 0;
    if ((size_t)snprintf(dir, sizeof dir, "%s/moonhttp-test.XXXXXX", tmp && *tmp ? tmp : "/tmp") >=
        sizeof dir) {
        fprintf(stderr, "moonhttp test: TMPDIR is too long a path\n");
        return 1;
    }
    if (!mkdtemp(dir)) {
        fprintf(stderr, "moonhttp test: %s: %s\n", dir, strerror(errno));
        return 1;
    }
    int rc = 1;
    if (write_helper(dir, file, sizeof file) < 0) {
        fprintf(stderr, "moonhttp test: writing %s: %s\n", file, strerror(errno));
    } else {
        setenv("MOONHTTP_BIN", self, 1);
        put_first_on_lua_path(dir);
        rc = run_busted(argc, argv);
    }
    if (file[0])
        unlink(file);
    char sub[PATH_MAX];
    if ((size_t)snprintf(sub, sizeof sub, "%s/moonhttp", dir) < sizeof sub)
        rmdir(sub);
    rmdir(dir);
    return rc;
}
