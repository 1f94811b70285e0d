/*
 * libFuzzer target for settings parsing: the input is split at NUL bytes
 * into a command line (flags and values, durations, sizes, listen entries)
 * that goes through mh_config_parse_args and mh_config_validate, and every
 * piece is also parsed as a listen address. The same pieces, taken as
 * key/value pairs, also go through mh_config_apply_lua as an http.server{}
 * table (a value that reads as a number is passed as one). Nothing is
 * opened or bound.
 */
#include "config.h"
#include "listener.h"
#include "log.h"
#include "lua_settings.h"

#include <lauxlib.h>
#include <lua.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#define MAX_ARGS 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    mh_log_threshold = MH_LOG_NONE;
    char *copy = malloc(size + 1);
    if (!copy)
        return 0;
    memcpy(copy, data, size);
    copy[size] = 0;
    char *argv[MAX_ARGS + 2];
    int argc = 0;
    argv[argc++] = "moonhttp";
    for (char *p = copy; p <= copy + size && argc < MAX_ARGS + 1; p += strlen(p) + 1) {
        /* --help and --version print and exit the CLI: keep the run quiet */
        bool quiet = !strcmp(p, "--help") || !strcmp(p, "-h") || !strcmp(p, "--version");
        argv[argc++] = quiet ? "--dev" : p;
        struct sockaddr_storage ss;
        socklen_t len;
        mh_listen_addr_parse(p, &ss, &len);
    }
    argv[argc] = NULL;

    struct mh_config c;
    char err[256];
    mh_config_init(&c);
    int rc = mh_config_parse_args(&c, argc, argv, err, sizeof err);
    if (rc == 0) {
        if (!c.script)
            c.script = "app.lua";
        mh_config_validate(&c, err, sizeof err);
        mh_config_workers(&c);
        for (size_t i = 0; i < c.nlisten; i++)
            mh_config_listen_tls(&c, i);
    }
    mh_config_free(&c);

    static lua_State *L;
    if (!L && !(L = luaL_newstate()))
        abort();
    mh_config_init(&c);
    lua_newtable(L);
    for (int i = 1; i + 1 < argc; i += 2) {
        lua_pushstring(L, argv[i]);
        char *end;
        double v = strtod(argv[i + 1], &end);
        if (*argv[i + 1] && !*end)
            lua_pushnumber(L, v);
        else
            lua_pushstring(L, argv[i + 1]);
        lua_rawset(L, -3);
    }
    if (mh_config_apply_lua(&c, L, -1, err, sizeof err) == 0) {
        c.script = "app.lua";
        mh_config_validate(&c, err, sizeof err);
    }
    lua_settop(L, 0);
    mh_config_free(&c);
    free(copy);
    return 0;
}
