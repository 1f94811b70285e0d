#include "config.h"

#include "listener.h"
#include "log.h"
#include "suggest.h"

#include <errno.h>
#include <lauxlib.h>
#include <lua.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum setting_type {
    T_DURATION,
    T_BYTES,
    T_INT,
    T_BOOL,
    T_STRING,
    T_LISTEN,
    T_TLS,
    T_SHARED,
    T_COMPRESS,
};

struct setting {
    const char *name; /* Lua key; the flag is --name with '_' as '-' */
    enum setting_type type;
    size_t offset;
    double min, max;
    const char *help;
};

#define OFF(field) offsetof(struct mh_config, field)

static const struct setting settings[] = {
    {"listen", T_LISTEN, OFF(listen), 0, 0,
     "address to listen on, host:port or :port; https://host:port for TLS (repeatable)"},
    {"tls", T_TLS, OFF(tls), 0, 0,
     "TLS certificates: { cert = ..., key = ... } or a list of them (script only)"},
    {"tls_cert", T_STRING, OFF(tls_cert), 0, 0, "TLS certificate chain, PEM (with --tls-key)"},
    {"tls_key", T_STRING, OFF(tls_key), 0, 0, "TLS private key, PEM (with --tls-cert)"},
    {"workers", T_STRING, OFF(workers), 0, 0, "worker processes: N or auto (one per core)"},
    {"read_header_timeout", T_DURATION, OFF(read_header_timeout), 0, 86400,
     "seconds to read a request head, from its first byte"},
    {"read_timeout", T_DURATION, OFF(read_timeout), 0, 86400,
     "seconds to read a whole request incl. body (0 = off)"},
    {"body_timeout", T_DURATION, OFF(body_timeout), 0, 86400,
     "seconds a request body still owed may bring no bytes while the server waits for them; "
     "then 408, or the connection (HTTP/2: the stream) is cut when the response has begun "
     "(0 = off)"},
    {"write_timeout", T_DURATION, OFF(write_timeout), 0, 86400,
     "seconds from end of request head to end of response, a total deadline (0 = off)"},
    {"idle_timeout", T_DURATION, OFF(idle_timeout), 0, 86400,
     "seconds a keep-alive connection may wait for its next request"},
    {"shutdown_timeout", T_DURATION, OFF(shutdown_timeout), 0, 86400,
     "seconds in-flight requests get on graceful stop"},
    {"max_header_bytes", T_BYTES, OFF(max_header_bytes), 256, 16 << 20,
     "request line + headers limit (431, or 414 for a long target)"},
    {"max_body_bytes", T_BYTES, OFF(max_body_bytes), 0, 1L << 40, "request body limit (413)"},
    {"max_connections", T_INT, OFF(max_connections), 1, 1 << 24,
     "open connections per worker; accept pauses above it"},
    {"keepalive_requests", T_INT, OFF(keepalive_requests), 0, 1L << 40,
     "requests per connection before it is closed (0 = no limit)"},
    {"backlog", T_INT, OFF(backlog), 1, 1 << 20, "listen(2) backlog"},
    {"tcp_nodelay", T_BOOL, OFF(tcp_nodelay), 0, 0, "set TCP_NODELAY on accepted sockets"},
    {"redirect_code", T_INT, OFF(redirect_code), 300, 399,
     "status of path-cleaning redirects (307, or 301 as Go 1.22)"},
    {"clean_path", T_STRING, OFF(clean_path), 0, 0,
     "non-canonical paths: redirect (as Go) or rewrite (route the clean path)"},
    {"log_level", T_STRING, OFF(log_level), 0, 0, "error, warn, info or debug"},
    {"log_format", T_STRING, OFF(log_format), 0, 0,
     "error log lines on stderr: text, or json (one object per line: time, level, pid, msg)"},
    {"shutdown_delay", T_DURATION, OFF(shutdown_delay), 0, 3600,
     "seconds to keep serving after SIGTERM with http.stopping() true (health checks fail "
     "first), before the graceful stop"},
    {"access_log", T_STRING, OFF(access_log), 0, 0, "access log file, - for stdout, or off"},
    {"access_log_format", T_STRING, OFF(access_log_format), 0, 0,
     "access log format: common, combined or json"},
    {"request_id_header", T_STRING, OFF(request_id_header), 0, 0,
     "request header whose value req:id() and the json access log use (e.g. X-Request-Id; "
     "only behind a proxy that sets it), or off: ids are always generated"},
    {"pid_file", T_STRING, OFF(pid_file), 0, 0, "file to write the server's pid to, or off"},
    {"metrics", T_STRING, OFF(metrics), 0, 0,
     "address of a Prometheus metrics listener (host:port), or off"},
    {"thread_pool", T_INT, OFF(thread_pool), 1, 64,
     "threads per worker for C work kept off the event loop (password hashing)"},
    {"max_pending_timers", T_INT, OFF(max_pending_timers), 1, 1 << 24,
     "pending http.timer/http.every timers per worker; past it they return nil, err"},
    {"send_timeout", T_DURATION, OFF(send_timeout), 0, 86400,
     "seconds a response may make no progress (client reads nothing) before it is cut (0 = off)"},
    {"handler_cpu_limit", T_DURATION, OFF(handler_cpu_limit), 0, 86400,
     "seconds of CPU a handler, timer or thread may use without yielding before it gets "
     "\"cpu limit exceeded\"; time blocked in a system call does not count (0 = off)"},
    {"lua_memory_limit", T_BYTES, OFF(lua_memory_limit), 0, 1L << 40,
     "bytes of Lua memory per worker; the allocation past it fails with Lua's memory error "
     "(0 = off)"},
    {"worker_stall_timeout", T_DURATION, OFF(worker_stall_timeout), 0, 86400,
     "seconds (wall time) a worker's event loop may go without a turn before the master "
     "kills and replaces it (0 = off)"},
    {"http2", T_BOOL, OFF(http2), 0, 0, "offer HTTP/2 (ALPN h2, then http/1.1) on TLS listeners"},
    {"h2c", T_BOOL, OFF(h2c), 0, 0,
     "serve cleartext HTTP/2 with prior knowledge (detected from the connection preface)"},
    {"h2_max_concurrent_streams", T_INT, OFF(h2_max_concurrent_streams), 1, 1 << 20,
     "HTTP/2 streams a client may have open at once per connection (past it: RST_STREAM "
     "REFUSED_STREAM, the connection goes on)"},
    {"h2_header_table_size", T_BYTES, OFF(h2_header_table_size), 0, 1 << 20,
     "HTTP/2 HPACK dynamic table size, each way: clients may use this much for request headers "
     "(SETTINGS_HEADER_TABLE_SIZE), the server uses at most this much for response headers"},
    {"h2_flood_budget", T_INT, OFF(h2_flood_budget), 10, 1 << 24,
     "HTTP/2 frames that do no work (PING, SETTINGS, PRIORITY, empty DATA, client RST_STREAM, "
     "streams refused or reset for a protocol error) a connection may send in a burst (refilled "
     "over 10 s); past it: GOAWAY ENHANCE_YOUR_CALM"},
    {"shared", T_SHARED, OFF(shared), MH_SHARED_MIN_SIZE, 32.0 * (1L << 30),
     "shared dicts across workers: { name = size } in the script, name=size,... as a flag "
     "(e.g. cache=16m,limits=1m)"},
    {"compress", T_COMPRESS, OFF(compress), 0, 0,
     "gzip responses: on, off, a level 1..9, or (script) { types, min_bytes, level }"},
};
#define NSETTINGS (sizeof settings / sizeof settings[0])
_Static_assert(NSETTINGS <= sizeof((struct mh_config *)0)->_from_cli,
               "mh_config._from_cli needs a slot per setting");

static const struct setting *find_setting(const char *name, size_t len, bool flag_form);

static char *xstrdup(const char *s)
{
    char *d = strdup(s);
    if (!d) {
        fputs("moonhttp: out of memory\n", stderr);
        exit(1);
    }
    return d;
}

void mh_config_init(struct mh_config *c)
{
    memset(c, 0, sizeof *c);
    c->read_header_timeout = 5;
    c->read_timeout = 0;
    c->body_timeout = 60;
    c->write_timeout = 0;
    c->send_timeout = 30;
    c->idle_timeout = 60;
    c->shutdown_timeout = 10;
    c->max_header_bytes = 64 * 1024;
    c->max_body_bytes = 1 << 20;
    c->max_connections = 10000;
    c->max_pending_timers = 1024;
    c->thread_pool = 2;
    c->keepalive_requests = 0;
    c->backlog = 4096;
    c->redirect_code = 307;
    c->tcp_nodelay = true;
    c->clean_path = xstrdup("redirect");
    c->log_level = xstrdup("info");
    c->log_format = xstrdup("text");
    c->workers = xstrdup("auto");
    c->access_log = xstrdup("off");
    c->access_log_format = xstrdup("common");
    c->request_id_header = xstrdup("off");
    c->pid_file = xstrdup("off");
    c->metrics = xstrdup("off");
    mh_compress_conf_init(&c->compress);
    c->handler_cpu_limit = 2;
    c->http2 = c->h2c = true;
    c->h2_max_concurrent_streams = 100;
    c->h2_header_table_size = 4096;
    c->h2_flood_budget = 1000;
    c->lua_memory_limit = 1L << 30;
    c->worker_stall_timeout = 10;
    c->mode = MH_MODE_SERVE;
}

static void clear_certs(struct mh_tls_certs *t)
{
    for (size_t i = 0; i < t->n; i++) {
        free(t->cert[i]);
        free(t->key[i]);
    }
    t->n = 0;
    t->tls13_only = false;
    free(t->client_ca);
    t->client_ca = NULL;
    t->client_optional = false;
}

static void clear_listen(struct mh_config *c)
{
    for (size_t i = 0; i < c->nlisten; i++) {
        free(c->listen[i]);
        if (c->listen_certs[i]) {
            clear_certs(c->listen_certs[i]);
            free(c->listen_certs[i]);
            c->listen_certs[i] = NULL;
        }
        c->listen_tls[i] = MH_LISTEN_TLS_UNSAID;
    }
    c->nlisten = 0;
}

void mh_config_free(struct mh_config *c)
{
    clear_listen(c);
    clear_certs(&c->tls);
    free(c->tls_cert);
    free(c->tls_key);
    free(c->clean_path);
    free(c->log_level);
    free(c->log_format);
    free(c->workers);
    free(c->access_log);
    free(c->access_log_format);
    free(c->request_id_header);
    free(c->pid_file);
    free(c->metrics);
    mh_config_shared_clear(c->shared, &c->nshared);
}

/* Parses "1.5", "500ms", "2s", "1m" into seconds. */
static int parse_duration(const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || errno || !isfinite(v))
        return -1;
    if (*end == 0 || strcmp(end, "s") == 0)
        ;
    else if (strcmp(end, "ms") == 0)
        v /= 1000;
    else if (strcmp(end, "m") == 0)
        v *= 60;
    else
        return -1;
    *out = v;
    return 0;
}

/* Parses "1048576", "64k", "1m", "1g" (binary multiples) into bytes. */
static int parse_bytes(const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || errno || !isfinite(v))
        return -1;
    switch (*end) {
    case 0:
        break;
    case 'k':
    case 'K':
        v *= 1024;
        end++;
        break;
    case 'm':
    case 'M':
        v *= 1024 * 1024;
        end++;
        break;
    case 'g':
    case 'G':
        v *= 1024.0 * 1024 * 1024;
        end++;
        break;
    default:
        return -1;
    }
    if (*end == 'b' || *end == 'B')
        end++;
    if (*end)
        return -1;
    *out = v;
    return 0;
}

int mh_config_parse_bytes(const char *s, double *out)
{
    return parse_bytes(s, out);
}

void mh_config_shared_clear(struct mh_shared_decl *d, size_t *n)
{
    for (size_t i = 0; i < *n; i++)
        free(d[i].name);
    *n = 0;
}

/* Adds name = size (a string like "16m" or bytes) to d[], kept sorted by name. */
static int shared_add(struct mh_shared_decl *d, size_t *n, const char *name, size_t nlen,
                      const char *size, double bytes, char *err, size_t errlen)
{
    bool ok = nlen > 0 && nlen < 64;
    for (size_t i = 0; ok && i < nlen; i++)
        ok = name[i] == '_' || (name[i] >= '0' && name[i] <= '9') ||
             ((name[i] | 0x20) >= 'a' && (name[i] | 0x20) <= 'z');
    if (!ok) {
        snprintf(err, errlen, "shared: \"%.*s\" is not a name (1 to 63 letters, digits or _)",
                 (int)nlen, name);
        return -1;
    }
    if (size && parse_bytes(size, &bytes) < 0) {
        snprintf(err, errlen, "shared.%.*s: \"%s\" is not a size (e.g. 65536, 64k, 16m)", (int)nlen,
                 name, size);
        return -1;
    }
    const struct setting *s = find_setting("shared", 6, false);
    if (bytes < s->min || bytes > s->max || bytes != floor(bytes)) {
        snprintf(err, errlen, "shared.%.*s: %g bytes is out of range (%gk..%gg)", (int)nlen, name,
                 bytes, s->min / 1024, s->max / (1L << 30));
        return -1;
    }
    size_t at = 0;
    while (at < *n && strncmp(d[at].name, name, nlen) < 0)
        at++;
    if (at < *n && strlen(d[at].name) == nlen && !strncmp(d[at].name, name, nlen)) {
        snprintf(err, errlen, "shared: %.*s is declared twice", (int)nlen, name);
        return -1;
    }
    if (*n == MH_MAX_SHARED) {
        snprintf(err, errlen, "shared: at most %d dicts", MH_MAX_SHARED);
        return -1;
    }
    memmove(&d[at + 1], &d[at], (*n - at) * sizeof *d);
    d[at].name = strndup(name, nlen);
    d[at].size = (long)bytes;
    (*n)++;
    return d[at].name ? 0 : -1;
}

/* --shared cache=16m,limits=1m */
static int shared_from_flag(struct mh_config *c, const struct setting *s, const char *v, char *err,
                            size_t errlen)
{
    (void)s;
    mh_config_shared_clear(c->shared, &c->nshared);
    while (*v) {
        const char *comma = strchr(v, ','), *end = comma ? comma : v + strlen(v);
        const char *eq = memchr(v, '=', (size_t)(end - v));
        if (!eq) {
            snprintf(err, errlen, "shared: expected name=size, got \"%.*s\"", (int)(end - v), v);
            return -1;
        }
        char size[64];
        snprintf(size, sizeof size, "%.*s", (int)(end - eq - 1), eq + 1);
        if (shared_add(c->shared, &c->nshared, v, (size_t)(eq - v), size, 0, err, errlen) < 0)
            return -1;
        v = comma ? comma + 1 : end;
    }
    return 0;
}

int mh_config_shared_from_lua(struct mh_shared_decl *out, size_t *n, lua_State *L, int idx,
                              char *err, size_t errlen)
{
    idx = lua_absindex(L, idx);
    mh_config_shared_clear(out, n);
    if (lua_type(L, idx) != LUA_TTABLE) {
        snprintf(err, errlen, "shared: expected a table { name = size }, got %s",
                 luaL_typename(L, idx));
        return -1;
    }
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        int rc = -1;
        if (lua_type(L, -2) != LUA_TSTRING) {
            snprintf(err, errlen, "shared: names must be strings");
        } else {
            size_t nlen;
            const char *name = lua_tolstring(L, -2, &nlen);
            if (lua_type(L, -1) == LUA_TNUMBER)
                rc = shared_add(out, n, name, nlen, NULL, lua_tonumber(L, -1), err, errlen);
            else if (lua_type(L, -1) == LUA_TSTRING)
                rc = shared_add(out, n, name, nlen, lua_tostring(L, -1), 0, err, errlen);
            else
                snprintf(err, errlen, "shared.%s: expected a size like \"16m\", got %s", name,
                         luaL_typename(L, -1));
        }
        lua_pop(L, 1);
        if (rc < 0) {
            lua_pop(L, 1);
            return -1;
        }
    }
    return 0;
}

static int set_number(struct mh_config *c, const struct setting *s, double v, char *err,
                      size_t errlen)
{
    if (v < s->min || v > s->max || (s->type != T_DURATION && v != floor(v))) {
        snprintf(err, errlen, "%s: %g is out of range (%g..%g%s)", s->name, v, s->min, s->max,
                 s->type == T_DURATION ? " seconds" : ", whole numbers");
        return -1;
    }
    char *field = (char *)c + s->offset;
    if (s->type == T_DURATION)
        *(double *)field = v;
    else
        *(long *)field = (long)v;
    return 0;
}

static int set_string_value(struct mh_config *c, const struct setting *s, const char *v, char *err,
                            size_t errlen)
{
    char *field = (char *)c + s->offset;
    double d;
    switch (s->type) {
    case T_DURATION:
        if (parse_duration(v, &d) < 0) {
            snprintf(err, errlen, "%s: \"%s\" is not a duration (e.g. 5, 1.5s, 500ms)", s->name, v);
            return -1;
        }
        return set_number(c, s, d, err, errlen);
    case T_BYTES:
        if (parse_bytes(v, &d) < 0) {
            snprintf(err, errlen, "%s: \"%s\" is not a size (e.g. 65536, 64k, 1m)", s->name, v);
            return -1;
        }
        return set_number(c, s, d, err, errlen);
    case T_INT: {
        char *end;
        errno = 0;
        long n = strtol(v, &end, 10);
        if (end == v || *end || errno) {
            snprintf(err, errlen, "%s: \"%s\" is not a whole number", s->name, v);
            return -1;
        }
        return set_number(c, s, (double)n, err, errlen);
    }
    case T_BOOL:
        if (!strcmp(v, "on") || !strcmp(v, "true") || !strcmp(v, "1") || !strcmp(v, "yes"))
            *(bool *)field = true;
        else if (!strcmp(v, "off") || !strcmp(v, "false") || !strcmp(v, "0") || !strcmp(v, "no"))
            *(bool *)field = false;
        else {
            snprintf(err, errlen, "%s: \"%s\" is not on/off", s->name, v);
            return -1;
        }
        return 0;
    case T_STRING:
        free(*(char **)field);
        *(char **)field = xstrdup(v);
        return 0;
    case T_LISTEN: {
        if (c->nlisten == MH_MAX_LISTEN) {
            snprintf(err, errlen, "listen: at most %d addresses", MH_MAX_LISTEN);
            return -1;
        }
        enum mh_listen_tls tls = MH_LISTEN_TLS_UNSAID;
        if (!strncmp(v, "https://", 8)) {
            tls = MH_LISTEN_TLS_SHARED;
            v += 8;
        } else if (!strncmp(v, "http://", 7)) {
            tls = MH_LISTEN_TLS_OFF;
            v += 7;
        }
        c->listen_tls[c->nlisten] = tls;
        c->listen[c->nlisten++] = xstrdup(v);
        return 0;
    }
    case T_TLS:
        snprintf(err, errlen, "tls: set it in the script, or use --tls-cert and --tls-key");
        return -1;
    case T_SHARED:
        return shared_from_flag(c, s, v, err, errlen);
    case T_COMPRESS: {
        struct mh_compress_conf *cc = (struct mh_compress_conf *)field;
        char *end;
        long level = strtol(v, &end, 10);
        mh_compress_conf_init(cc);
        if (!strcmp(v, "on") || !strcmp(v, "off")) {
            cc->on = v[1] == 'n';
        } else if (end != v && !*end && level >= 1 && level <= 9) {
            cc->on = true;
            cc->level = (int)level;
        } else {
            snprintf(err, errlen, "compress: \"%s\" is not on, off or a level 1..9", v);
            return -1;
        }
        return 0;
    }
    }
    return -1;
}

static const struct setting *find_setting(const char *name, size_t len, bool flag_form)
{
    for (size_t i = 0; i < NSETTINGS; i++) {
        const char *n = settings[i].name;
        if (strlen(n) != len)
            continue;
        size_t j = 0;
        for (; j < len; j++) {
            char ch = name[j];
            if (flag_form && ch == '-')
                ch = '_';
            if (ch != n[j])
                break;
        }
        if (j == len)
            return &settings[i];
    }
    return NULL;
}

/* The known setting closest to a misspelt name, or NULL when none is close. */
static const char *closest_setting(const char *name, size_t len, bool flag_form)
{
    struct mh_suggest s;
    mh_suggest_init(&s, name, len, flag_form);
    for (size_t i = 0; i < NSETTINGS; i++)
        mh_suggest_try(&s, settings[i].name);
    return s.best;
}

bool mh_config_is_setting(const char *name, size_t len)
{
    return find_setting(name, len, false) != NULL;
}

const char *mh_config_suggest(const char *name, size_t len)
{
    return closest_setting(name, len, false);
}

void mh_config_print_help(const char *argv0)
{
    struct mh_config d;
    mh_config_init(&d);
    printf("usage: %s [flags] app.lua            serve app.lua\n"
           "       %s run script.lua [args...]   run a script on the event loop\n"
           "       %s --check app.lua            load app.lua, build routes, report errors\n\n"
           "flags (they override http.server{...} in the script):\n",
           argv0, argv0, argv0);
    printf("  %-28s %s\n", "--dev",
           "one worker, reload on save of the script or a module it required; "
           "log each request, tracebacks in 500s");
    printf("  %-28s %s\n", "--check", "load the script and build the routes, then exit 0/1");
    printf("  %-28s %s\n", "--help, --version", "");
    for (size_t i = 0; i < NSETTINGS; i++) {
        const struct setting *s = &settings[i];
        char flag[64], def[64];
        snprintf(flag, sizeof flag, "--%s", s->name);
        for (char *p = flag + 2; *p; p++)
            if (*p == '_')
                *p = '-';
        const char *field = (const char *)&d + s->offset;
        switch (s->type) {
        case T_DURATION:
            snprintf(def, sizeof def, "%gs", *(const double *)field);
            break;
        case T_BYTES:
        case T_INT:
            snprintf(def, sizeof def, "%ld", *(const long *)field);
            break;
        case T_BOOL:
            snprintf(def, sizeof def, "%s", *(const bool *)field ? "on" : "off");
            break;
        case T_STRING:
            snprintf(def, sizeof def, "%s", *(char *const *)field ? *(char *const *)field : "none");
            break;
        case T_LISTEN:
            snprintf(def, sizeof def, ":8080");
            break;
        case T_TLS:
        case T_SHARED:
            snprintf(def, sizeof def, "none");
            break;
        case T_COMPRESS:
            snprintf(def, sizeof def, "off");
            break;
        }
        printf("  %-28s %s (default %s)\n", flag, s->help, def);
    }
    mh_config_free(&d);
}

/*
 * Flags may come before or after the script (`moonhttp app.lua --listen :9000`),
 * and `--` ends them. `moonhttp run script.lua args...` is the exception: what
 * follows the script belongs to the script, untouched.
 */
int mh_config_parse_args(struct mh_config *c, int argc, char **argv, char *err, size_t errlen)
{
    int i = 1;
    bool flags_done = false;
    if (argc > 1 && strcmp(argv[1], "run") == 0) {
        c->mode = MH_MODE_RUN;
        i = 2;
    }
    for (; i < argc; i++) {
        const char *a = argv[i];
        if (!flags_done && !strcmp(a, "--")) {
            flags_done = true;
            continue;
        }
        if (flags_done || a[0] != '-' || a[1] != '-') {
            if (c->script) {
                snprintf(err, errlen, "unexpected argument after script: %s", a);
                return -1;
            }
            c->script = a;
            c->script_argc = argc - i;
            c->script_argv = argv + i;
            if (c->mode == MH_MODE_RUN)
                break;
            c->script_argc = 1;
            continue;
        }
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            mh_config_print_help(argv[0]);
            return 1;
        }
        if (!strcmp(a, "--version")) {
            printf("moonhttp %s\n", MH_VERSION);
            return 1;
        }
        if (!strcmp(a, "--dev")) {
            c->dev = true;
            continue;
        }
        if (!strcmp(a, "--check")) {
            c->mode = MH_MODE_CHECK;
            continue;
        }
        const char *name = a + 2, *eq = strchr(name, '=');
        size_t nlen = eq ? (size_t)(eq - name) : strlen(name);
        const struct setting *s = find_setting(name, nlen, true);
        if (!s) {
            char hint[96] = "";
            const char *near = closest_setting(name, nlen, true);
            if (near) {
                char flag[64];
                snprintf(flag, sizeof flag, "%s", near);
                for (char *p = flag; *p; p++)
                    if (*p == '_')
                        *p = '-';
                snprintf(hint, sizeof hint, "did you mean --%s? ", flag);
            }
            snprintf(err, errlen, "unknown flag %s (%ssee --help)", a, hint);
            return -1;
        }
        const char *val = eq ? eq + 1 : NULL;
        if (!val) {
            if (i + 1 >= argc) {
                snprintf(err, errlen, "flag %s needs a value", a);
                return -1;
            }
            val = argv[++i];
        }
        size_t idx = (size_t)(s - settings);
        if (s->type == T_LISTEN && !c->_from_cli[idx])
            clear_listen(c);
        if (set_string_value(c, s, val, err, errlen) < 0)
            return -1;
        c->_from_cli[idx] = 1;
    }
    if (!c->script) {
        snprintf(err, errlen, "no script given (usage: moonhttp [flags] app.lua; see --help)");
        return -1;
    }
    return 0;
}

/* -1 with the message in err when the table at idx has a name outside known (NULL-terminated). */
static int check_keys(lua_State *L, int idx, const char *what, const char *const *known, char *err,
                      size_t errlen)
{
    idx = lua_absindex(L, idx);
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        lua_pop(L, 1);
        size_t len;
        const char *k = lua_type(L, -1) == LUA_TSTRING ? lua_tolstring(L, -1, &len) : NULL;
        const char *const *n = known;
        while (k && *n && strcmp(k, *n) != 0)
            n++;
        if (!k || !*n) {
            if (k)
                mh_suggest_unknown(err, errlen, what, "key", k, len, known);
            else
                snprintf(err, errlen, "%s: key names must be strings", what);
            lua_pop(L, 1);
            return -1;
        }
    }
    return 0;
}

/* The settings of an endpoint beside its certificates (tls_certs.h). */
static const char *const tls_options[] = {"min_version", "client_ca", "client_auth", NULL};

/* Reads tls_options from the table at vidx into t. 0, or -1 with err. */
static int lua_tls_options(struct mh_tls_certs *t, lua_State *L, int vidx, const char *what,
                           char *err, size_t errlen)
{
    int rc = 0;
    if (lua_getfield(L, vidx, "min_version") != LUA_TNIL) {
        const char *v = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : "";
        if (strcmp(v, "1.2") != 0 && strcmp(v, "1.3") != 0) {
            snprintf(err, errlen, "%s.min_version: expected \"1.2\" or \"1.3\"", what);
            rc = -1;
        }
        t->tls13_only = strcmp(v, "1.3") == 0;
    }
    lua_pop(L, 1);
    int ca = lua_getfield(L, vidx, "client_ca");
    int auth = lua_getfield(L, vidx, "client_auth");
    const char *v = auth == LUA_TSTRING ? lua_tostring(L, -1) : "";
    if (rc == 0 && ca != LUA_TNIL && ca != LUA_TSTRING) {
        snprintf(err, errlen, "%s.client_ca: expected a PEM file name", what);
        rc = -1;
    } else if (rc == 0 && auth != LUA_TNIL && strcmp(v, "require") && strcmp(v, "optional")) {
        snprintf(err, errlen, "%s.client_auth: expected \"require\" or \"optional\"", what);
        rc = -1;
    } else if (rc == 0 && auth != LUA_TNIL && ca == LUA_TNIL) {
        snprintf(err, errlen, "%s.client_auth: needs client_ca (the CAs to check against)", what);
        rc = -1;
    } else if (rc == 0 && ca == LUA_TSTRING) {
        t->client_ca = xstrdup(lua_tostring(L, -2));
        t->client_optional = strcmp(v, "optional") == 0; /* client_ca alone: required */
    }
    lua_pop(L, 2);
    return rc;
}

/* In a list of certificates, the string keys are the options: an unknown one is an error. */
static int check_option_keys(lua_State *L, int vidx, const char *what, char *err, size_t errlen)
{
    lua_pushnil(L);
    while (lua_next(L, vidx)) {
        lua_pop(L, 1);
        if (lua_type(L, -1) != LUA_TSTRING)
            continue;
        size_t len;
        const char *k = lua_tolstring(L, -1, &len);
        const char *const *n = tls_options;
        while (*n && strcmp(k, *n) != 0)
            n++;
        if (!*n) {
            mh_suggest_unknown(err, errlen, what, "key", k, len, tls_options);
            lua_pop(L, 1);
            return -1;
        }
    }
    return 0;
}

/*
 * Reads { cert = ..., key = ... } or a list of such tables at vidx into t,
 * with the options (tls_options) in the same table: beside cert and key, or
 * beside the list's entries.
 */
static int lua_certs(struct mh_tls_certs *t, lua_State *L, int vidx, const char *what, char *err,
                     size_t errlen)
{
    vidx = lua_absindex(L, vidx);
    clear_certs(t);
    if (lua_type(L, vidx) != LUA_TTABLE) {
        snprintf(err, errlen, "%s: expected { cert = ..., key = ... } or a list of them", what);
        return -1;
    }
    bool single = lua_getfield(L, vidx, "cert") != LUA_TNIL;
    lua_pop(L, 1);
    if ((!single && check_option_keys(L, vidx, what, err, errlen) < 0) ||
        lua_tls_options(t, L, vidx, what, err, errlen) < 0)
        return -1;
    lua_Integer n = single ? 1 : luaL_len(L, vidx);
    if (n < 1 || n > MH_MAX_CERTS) {
        snprintf(err, errlen, "%s: expected 1 to %d certificates", what, MH_MAX_CERTS);
        return -1;
    }
    for (lua_Integer i = 1; i <= n; i++) {
        if (single)
            lua_pushvalue(L, vidx);
        else
            lua_rawgeti(L, vidx, i);
        static const char *const known[] = {"cert", "key", NULL};
        static const char *const known_single[] = {"cert",      "key",         "min_version",
                                                   "client_ca", "client_auth", NULL};
        int ok = lua_type(L, -1) == LUA_TTABLE;
        if (ok && check_keys(L, -1, what, single ? known_single : known, err, errlen) < 0) {
            lua_settop(L, vidx);
            return -1;
        }
        ok = ok && lua_getfield(L, -1, "cert") == LUA_TSTRING;
        ok = ok && lua_getfield(L, -2, "key") == LUA_TSTRING;
        if (ok) {
            t->cert[t->n] = xstrdup(lua_tostring(L, -2));
            t->key[t->n++] = xstrdup(lua_tostring(L, -1));
        }
        lua_settop(L, vidx);
        if (!ok) {
            snprintf(err, errlen, "%s[%lld]: expected { cert = \"file\", key = \"file\" }", what,
                     (long long)i);
            return -1;
        }
    }
    return 0;
}

/* A listen entry: "addr" or { addr = "addr", tls = true | false | certificates }. */
static int lua_listen_entry(struct mh_config *c, const struct setting *s, lua_State *L, int vidx,
                            lua_Integer i, char *err, size_t errlen)
{
    if (lua_type(L, vidx) == LUA_TSTRING)
        return set_string_value(c, s, lua_tostring(L, vidx), err, errlen);
    if (lua_type(L, vidx) != LUA_TTABLE || lua_getfield(L, vidx, "addr") != LUA_TSTRING) {
        if (lua_type(L, vidx) == LUA_TTABLE)
            lua_pop(L, 1);
        snprintf(err, errlen, "listen[%lld]: expected a string or { addr = ..., tls = ... }",
                 (long long)i);
        return -1;
    }
    static const char *const known[] = {"addr", "tls", NULL};
    char what[32];
    snprintf(what, sizeof what, "listen[%lld]", (long long)i);
    int rc = set_string_value(c, s, lua_tostring(L, -1), err, errlen);
    lua_pop(L, 1);
    if (rc < 0 || check_keys(L, vidx, what, known, err, errlen) < 0)
        return -1;
    size_t at = c->nlisten - 1;
    int t = lua_getfield(L, vidx, "tls");
    if (t == LUA_TBOOLEAN) {
        c->listen_tls[at] = lua_toboolean(L, -1) ? MH_LISTEN_TLS_SHARED : MH_LISTEN_TLS_OFF;
    } else if (t != LUA_TNIL) {
        snprintf(what, sizeof what, "listen[%lld].tls", (long long)i);
        if (!(c->listen_certs[at] = calloc(1, sizeof *c->listen_certs[at]))) {
            snprintf(err, errlen, "out of memory");
            rc = -1;
        } else {
            rc = lua_certs(c->listen_certs[at], L, -1, what, err, errlen);
            c->listen_tls[at] = MH_LISTEN_TLS_OWN;
        }
    }
    lua_pop(L, 1);
    return rc;
}

static int compress_types(lua_State *L, int t, struct mh_compress_conf *c, const char *what,
                          char *err, size_t errlen)
{
    if (lua_type(L, t) != LUA_TTABLE) {
        snprintf(err, errlen, "%s.types: expected a list of media types", what);
        return -1;
    }
    mh_compress_conf_clear_types(c);
    lua_Integer n = (lua_Integer)lua_rawlen(L, t);
    for (lua_Integer i = 1; i <= n; i++) {
        lua_rawgeti(L, t, i);
        size_t len;
        const char *s = lua_type(L, -1) == LUA_TSTRING ? lua_tolstring(L, -1, &len) : NULL;
        const char *e = s ? mh_compress_conf_add_type(c, s, len) : "expected a string";
        lua_pop(L, 1);
        if (e) {
            snprintf(err, errlen, "%s.types[%lld]: %s", what, (long long)i, e);
            return -1;
        }
    }
    return 0;
}

/*
 * compress = true | false | { types = {...}, min_bytes = n, level = 1..9 }:
 * a table turns compression on; types replace the default list when given.
 */
int mh_config_compress_from_lua(struct mh_compress_conf *c, lua_State *L, int idx, const char *what,
                                char *err, size_t errlen)
{
    idx = lua_absindex(L, idx);
    mh_compress_conf_init(c);
    if (lua_type(L, idx) == LUA_TBOOLEAN) {
        c->on = lua_toboolean(L, idx);
        return 0;
    }
    if (lua_type(L, idx) != LUA_TTABLE) {
        snprintf(err, errlen, "%s: expected a boolean or { types, min_bytes, level }", what);
        return -1;
    }
    c->on = true;
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        const char *k = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : "?";
        int rc = 0;
        if (!strcmp(k, "types")) {
            rc = compress_types(L, lua_gettop(L), c, what, err, errlen);
        } else if (!strcmp(k, "min_bytes") || !strcmp(k, "level")) {
            int isnum;
            lua_Integer v = lua_tointegerx(L, -1, &isnum);
            bool level = k[0] == 'l';
            if (!isnum || v < (level ? 1 : 0) || v > (level ? 9 : (lua_Integer)1 << 40)) {
                snprintf(err, errlen, "%s.%s: expected a whole number %s", what, k,
                         level ? "1..9" : ">= 0");
                rc = -1;
            } else if (level) {
                c->level = (int)v;
            } else {
                c->min_bytes = (uint64_t)v;
            }
        } else {
            static const char *const known[] = {"types", "min_bytes", "level", NULL};
            mh_suggest_unknown(err, errlen, what, "key", k, strlen(k), known);
            rc = -1;
        }
        lua_pop(L, 1);
        if (rc < 0) {
            lua_pop(L, 1);
            return -1;
        }
    }
    return 0;
}

static int apply_lua_value(struct mh_config *c, const struct setting *s, lua_State *L, int vidx,
                           char *err, size_t errlen)
{
    char *field = (char *)c + s->offset;
    int t = lua_type(L, vidx);
    if (s->type == T_BOOL) {
        if (t != LUA_TBOOLEAN) {
            snprintf(err, errlen, "%s: expected a boolean, got %s", s->name, lua_typename(L, t));
            return -1;
        }
        *(bool *)field = lua_toboolean(L, vidx);
        return 0;
    }
    if (s->type == T_TLS)
        return lua_certs(&c->tls, L, vidx, "tls", err, errlen);
    if (s->type == T_SHARED)
        return mh_config_shared_from_lua(c->shared, &c->nshared, L, vidx, err, errlen);
    if (s->type == T_COMPRESS)
        return mh_config_compress_from_lua((struct mh_compress_conf *)field, L, vidx, "compress",
                                           err, errlen);
    if (s->type == T_LISTEN) {
        clear_listen(c);
        if (t == LUA_TSTRING)
            return set_string_value(c, s, lua_tostring(L, vidx), err, errlen);
        if (t != LUA_TTABLE) {
            snprintf(err, errlen, "listen: expected a string or a list of entries");
            return -1;
        }
        lua_getfield(L, vidx, "addr");
        bool entry = !lua_isnil(L, -1);
        lua_pop(L, 1);
        if (entry) /* listen = { addr = ..., tls = ... } */
            return lua_listen_entry(c, s, L, vidx, 1, err, errlen);
        lua_Integer n = luaL_len(L, vidx);
        for (lua_Integer i = 1; i <= n; i++) {
            lua_rawgeti(L, vidx, i);
            int rc = lua_listen_entry(c, s, L, lua_gettop(L), i, err, errlen);
            lua_pop(L, 1);
            if (rc < 0)
                return rc;
        }
        return 0;
    }
    if (t == LUA_TNUMBER && s->type != T_STRING)
        return set_number(c, s, lua_tonumber(L, vidx), err, errlen);
    if (t == LUA_TSTRING || (t == LUA_TNUMBER && s->type == T_STRING))
        return set_string_value(c, s, lua_tostring(L, vidx), err, errlen);
    snprintf(err, errlen, "%s: unexpected %s", s->name, lua_typename(L, t));
    return -1;
}

int mh_config_apply_lua(struct mh_config *c, lua_State *L, int idx, char *err, size_t errlen)
{
    idx = lua_absindex(L, idx);
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        if (lua_type(L, -2) != LUA_TSTRING) {
            lua_pop(L, 2);
            snprintf(err, errlen, "http.server: setting names must be strings");
            return -1;
        }
        size_t klen;
        const char *k = lua_tolstring(L, -2, &klen);
        const struct setting *s = find_setting(k, klen, false);
        if (!s) {
            snprintf(err, errlen, "http.server: unknown setting \"%s\"", k);
            lua_pop(L, 2);
            return -1;
        }
        int rc = 0;
        if (!c->_from_cli[s - settings])
            rc = apply_lua_value(c, s, L, -1, err, errlen);
        lua_pop(L, 1);
        if (rc < 0) {
            lua_pop(L, 1);
            return -1;
        }
    }
    return 0;
}

static bool same_str(const char *a, const char *b)
{
    return (!a && !b) || (a && b && !strcmp(a, b));
}

static bool same_certs(const struct mh_tls_certs *a, const struct mh_tls_certs *b)
{
    if (!a || !b)
        return a == b;
    if (a->n != b->n || a->tls13_only != b->tls13_only || !same_str(a->client_ca, b->client_ca) ||
        a->client_optional != b->client_optional)
        return false;
    for (size_t i = 0; i < a->n; i++)
        if (!same_str(a->cert[i], b->cert[i]) || !same_str(a->key[i], b->key[i]))
            return false;
    return true;
}

/* Whether setting s has the same value in a and b. */
static bool same_setting(const struct setting *s, const struct mh_config *a,
                         const struct mh_config *b)
{
    const char *fa = (const char *)a + s->offset, *fb = (const char *)b + s->offset;
    switch (s->type) {
    case T_DURATION:
        return *(const double *)fa == *(const double *)fb;
    case T_BYTES:
    case T_INT:
        return *(const long *)fa == *(const long *)fb;
    case T_BOOL:
        return *(const bool *)fa == *(const bool *)fb;
    case T_STRING:
        return same_str(*(char *const *)fa, *(char *const *)fb);
    case T_LISTEN:
        if (a->nlisten != b->nlisten)
            return false;
        for (size_t i = 0; i < a->nlisten; i++)
            if (strcmp(a->listen[i], b->listen[i]) || a->listen_tls[i] != b->listen_tls[i] ||
                !same_certs(a->listen_certs[i], b->listen_certs[i]))
                return false;
        return true;
    case T_TLS:
        return same_certs(&a->tls, &b->tls);
    case T_SHARED:
        if (a->nshared != b->nshared)
            return false;
        for (size_t i = 0; i < a->nshared; i++)
            if (strcmp(a->shared[i].name, b->shared[i].name) ||
                a->shared[i].size != b->shared[i].size)
                return false;
        return true;
    case T_COMPRESS: /* both start from mh_compress_conf_init's memset: padding compares too */
        return memcmp(&a->compress, &b->compress, sizeof a->compress) == 0;
    }
    return false;
}

int mh_config_changed(const struct mh_config *c, lua_State *L, int idx, char *out, size_t outlen)
{
    idx = lua_absindex(L, idx);
    size_t used = 0;
    int n = 0;
    out[0] = 0;
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        size_t klen;
        const char *k = lua_type(L, -2) == LUA_TSTRING ? lua_tolstring(L, -2, &klen) : NULL;
        const struct setting *s = k ? find_setting(k, klen, false) : NULL;
        /* A reload does apply shared dicts it adds, and says itself which size needs a restart
         * (server/shared_zones.c). */
        if (s && !c->_from_cli[s - settings] && s->type != T_SHARED) {
            struct mh_config fresh;
            char err[256];
            mh_config_init(&fresh);
            /* A value that does not even parse differs too: a restart would fail on it. */
            bool same = apply_lua_value(&fresh, s, L, -1, err, sizeof err) == 0 &&
                        same_setting(s, &fresh, c);
            mh_config_free(&fresh);
            if (!same) {
                int w = snprintf(out + used, outlen - used, "%s%s", n ? ", " : "", s->name);
                if (w > 0 && (size_t)w < outlen - used)
                    used += (size_t)w;
                n++;
            }
        }
        lua_pop(L, 1);
    }
    return n;
}

int mh_config_validate(struct mh_config *c, char *err, size_t errlen)
{
    if (strcmp(c->clean_path, "redirect") && strcmp(c->clean_path, "rewrite")) {
        snprintf(err, errlen, "clean_path: \"%s\" is not redirect or rewrite", c->clean_path);
        return -1;
    }
    if (mh_log_level_parse(c->log_level) < 0) {
        snprintf(err, errlen, "log_level: \"%s\" is not error, warn, info or debug", c->log_level);
        return -1;
    }
    if (strcmp(c->log_format, "text") && strcmp(c->log_format, "json")) {
        snprintf(err, errlen, "log_format: \"%s\" is not text or json", c->log_format);
        return -1;
    }
    if (strcmp(c->workers, "auto")) {
        char *end;
        long n = strtol(c->workers, &end, 10);
        if (*end || n < 1 || n > 1024) {
            snprintf(err, errlen, "workers: \"%s\" is not auto or a number 1..1024", c->workers);
            return -1;
        }
    }
    if (strcmp(c->access_log_format, "common") && strcmp(c->access_log_format, "combined") &&
        strcmp(c->access_log_format, "json")) {
        snprintf(err, errlen, "access_log_format: \"%s\" is not common, combined or json",
                 c->access_log_format);
        return -1;
    }
    if (strcmp(c->request_id_header, "off") &&
        (!c->request_id_header[0] ||
         strspn(c->request_id_header, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                      "0123456789-_") != strlen(c->request_id_header))) {
        snprintf(err, errlen, "request_id_header: \"%s\" is not a header name or off",
                 c->request_id_header);
        return -1;
    }
    if (strcmp(c->metrics, "off")) {
        struct sockaddr_storage ss;
        socklen_t len;
        const char *e = mh_listen_addr_parse(c->metrics, &ss, &len);
        if (e) {
            snprintf(err, errlen, "metrics: \"%s\": %s", c->metrics, e);
            return -1;
        }
    }
    if (c->nlisten == 0 && c->mode != MH_MODE_RUN)
        c->listen[c->nlisten++] = xstrdup(":8080");
    for (size_t i = 0; i < c->nlisten; i++) {
        struct sockaddr_storage ss;
        socklen_t len;
        const char *e = mh_listen_addr_parse(c->listen[i], &ss, &len);
        if (e) {
            snprintf(err, errlen, "listen: \"%s\": %s", c->listen[i], e);
            return -1;
        }
    }
    if (!c->tls_cert != !c->tls_key) {
        snprintf(err, errlen, "--tls-cert and --tls-key go together");
        return -1;
    }
    if (c->tls_cert) {
        clear_certs(&c->tls);
        c->tls.cert[0] = xstrdup(c->tls_cert);
        c->tls.key[0] = xstrdup(c->tls_key);
        c->tls.n = 1;
    }
    bool used = false;
    for (size_t i = 0; i < c->nlisten; i++) {
        if (c->listen_tls[i] == MH_LISTEN_TLS_SHARED && c->tls.n == 0) {
            snprintf(err, errlen, "listen \"%s\": TLS asked for, but no tls certificates are set",
                     c->listen[i]);
            return -1;
        }
        used = used || mh_config_listen_tls(c, i) == &c->tls;
    }
    if (c->tls.n > 0 && !used && c->mode == MH_MODE_SERVE) {
        snprintf(err, errlen,
                 "tls: no listener uses the certificates (with several listeners, "
                 "mark one { addr = ..., tls = true } or \"https://addr\")");
        return -1;
    }
    return 0;
}

const struct mh_tls_certs *mh_config_listen_tls(const struct mh_config *c, size_t i)
{
    switch (c->listen_tls[i]) {
    case MH_LISTEN_TLS_OWN:
        return c->listen_certs[i];
    case MH_LISTEN_TLS_SHARED:
        return &c->tls;
    case MH_LISTEN_TLS_UNSAID:
        return c->nlisten == 1 && c->tls.n > 0 ? &c->tls : NULL;
    default:
        return NULL;
    }
}

int mh_config_workers(const struct mh_config *c)
{
    if (c->dev)
        return 1;
    if (strcmp(c->workers, "auto") == 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        return n > 0 ? (int)n : 1;
    }
    return atoi(c->workers);
}
