/*
 * libFuzzer target for settings parsing: the input is split at NUL bytes
 * into a command line (flags and values, durations, sizes, listen entries)
 * that goes through mh_config_parse_args and mh_config_validate, and every
 * piece is also parsed as a listen address. The same pieces, taken as
 * key/value pairs, also go through mh_config_apply_lua as an http.server{}
 * table (a value that reads as a number is passed as one). Then each piece
 * is a value for the schema row its first byte picks (settings/settings.h),
 * through both readers, so every setting is reached without guessing names.
 * Whatever a reader accepts must keep the schema's promises (check_schema):
 * numbers in their range, strings among their choices. Nothing is opened
 * or bound.
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

/* A merged, validated config that breaks a promise of mh_settings[] is a bug: abort. */
static void check_schema(const struct mh_config *c)
{
    char err[256];
    for (size_t i = 0; i < mh_settings_count; i++) {
        const struct mh_setting *s = &mh_settings[i];
        const char *field = (const char *)c + s->offset;
        double v = s->type == MH_SETTING_DURATION ? *(const double *)field
                   : s->type == MH_SETTING_BYTES || s->type == MH_SETTING_INT
                       ? (double)*(const long *)field
                       : s->min;
        if (!(v >= s->min && v <= s->max) || mh_setting_check(c, s, err, sizeof err) < 0)
            abort();
    }
    if (c->nlisten > MH_MAX_LISTEN || c->nshared > MH_MAX_SHARED)
        abort();
    for (size_t i = 0; i < c->nshared; i++)
        if (c->shared[i].size < MH_SHARED_MIN_SIZE ||
            (i > 0 && strcmp(c->shared[i - 1].name, c->shared[i].name) >= 0))
            abort();
}

/* Each piece as the value of the row its first byte picks, as a flag would give it and in Lua. */
static void by_schema(lua_State *L, char **pieces, int n)
{
    struct mh_config c;
    char err[256];
    mh_config_init(&c);
    for (int i = 0; i < n; i++) {
        const struct mh_setting *s = &mh_settings[(unsigned char)pieces[i][0] % mh_settings_count];
        const char *v = pieces[i][0] ? pieces[i] + 1 : pieces[i];
        mh_setting_parse(&c, s, v, err, sizeof err);
    }
    c.script = "app.lua";
    if (mh_config_validate(&c, err, sizeof err) == 0)
        check_schema(&c);
    mh_config_free(&c);

    mh_config_init(&c);
    lua_newtable(L);
    for (int i = 0; i < n; i++) {
        const struct mh_setting *s = &mh_settings[(unsigned char)pieces[i][0] % mh_settings_count];
        const char *v = pieces[i][0] ? pieces[i] + 1 : pieces[i];
        char *end;
        double d = strtod(v, &end);
        if (*v && !*end)
            lua_pushnumber(L, d);
        else if (!strcmp(v, "true") || !strcmp(v, "false"))
            lua_pushboolean(L, v[0] == 't');
        else
            lua_pushstring(L, v);
        lua_setfield(L, -2, s->name);
    }
    if (mh_config_apply_lua(&c, L, -1, err, sizeof err) == 0) {
        c.script = "app.lua";
        if (mh_config_validate(&c, err, sizeof err) == 0)
            check_schema(&c);
    }
    lua_settop(L, 0);
    mh_config_free(&c);
}

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
        if (mh_config_validate(&c, err, sizeof err) == 0)
            check_schema(&c);
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
        if (mh_config_validate(&c, err, sizeof err) == 0)
            check_schema(&c);
    }
    lua_settop(L, 0);
    mh_config_free(&c);
    by_schema(L, argv + 1, argc - 1);
    free(copy);
    return 0;
}
