#ifndef MH_CONFIG_H
#define MH_CONFIG_H
/*
 * Server settings: defaults (DESIGN.md §3), values from the script's
 * http.server{...} and command-line flags, merged so that flags win, and
 * validated once at startup. One table of descriptors drives all three, and
 * --help, so a setting cannot exist in one place and not the others.
 */
#include <stdbool.h>
#include <stddef.h>

#include "compress.h"
#include "tls_certs.h"

struct lua_State;

#define MH_MAX_LISTEN 8

/* How a listen entry asked for TLS (see mh_config_listen_tls). */
enum mh_listen_tls {
    MH_LISTEN_TLS_UNSAID, /* a plain address */
    MH_LISTEN_TLS_OFF,    /* { addr = ..., tls = false } */
    MH_LISTEN_TLS_SHARED, /* { addr = ..., tls = true } or "https://addr": the top-level tls */
    MH_LISTEN_TLS_OWN,    /* { addr = ..., tls = {...} }: its own certificates */
};

enum mh_run_mode { MH_MODE_SERVE, MH_MODE_CHECK, MH_MODE_RUN };

/* A shared dict of http.server{ shared = { name = size } } (or --shared name=size,...). */
#define MH_MAX_SHARED      16
#define MH_SHARED_MIN_SIZE (8 * 1024)
struct mh_shared_decl {
    char *name; /* 1..63 of [A-Za-z0-9_] */
    long size;  /* bytes: the zone is exactly this big */
};

struct mh_config {
    /* settings (seconds as double, sizes in bytes) */
    double read_header_timeout;
    double read_timeout;
    double body_timeout;  /* no progress: between two reads of a body still owed */
    double write_timeout; /* total: end of head to end of response (opt-in) */
    double send_timeout;  /* no progress: between two successful writes */
    double idle_timeout;
    double shutdown_timeout;
    long max_header_bytes;
    long max_body_bytes;
    long max_connections;
    long keepalive_requests;
    long backlog;
    long redirect_code;
    bool tcp_nodelay;
    char *clean_path; /* "redirect" | "rewrite" */

    /* HTTP/2 (issue 16) */
    bool http2;                     /* ALPN h2 on TLS listeners */
    bool h2c;                       /* cleartext HTTP/2 with prior knowledge */
    long h2_max_concurrent_streams; /* SETTINGS_MAX_CONCURRENT_STREAMS */
    long h2_header_table_size;      /* HPACK dynamic tables (request and response headers) */
    long h2_flood_budget;           /* frames doing no work, per burst */

    char *log_level;
    char *log_format; /* "text" | "json" */
    char *workers;               /* "N" | "auto" */
    double shutdown_delay;       /* serve on, http.stopping() true, before a graceful stop */
    char *access_log;            /* path, "-" (stdout) or "off" */
    char *access_log_format;     /* "common" | "combined" | "json" */
    char *request_id_header;     /* header trusted for req:id(), or "off" */
    char *pid_file;              /* path or "off" */
    char *metrics;               /* listen address of the metrics endpoint, or "off" */
    long thread_pool;            /* threads per worker for C work off the loop */
    long max_pending_timers;     /* http.timer / http.every not yet fired, per worker generation */
    double handler_cpu_limit;    /* seconds a task may run without yielding; 0 = off */
    long lua_memory_limit;       /* bytes of Lua heap per worker (all generations); 0 = off */
    double worker_stall_timeout; /* seconds without a loop turn before the master kills; 0 = off */
    size_t nlisten;
    char *listen[MH_MAX_LISTEN];
    enum mh_listen_tls listen_tls[MH_MAX_LISTEN];
    struct mh_tls_certs *listen_certs[MH_MAX_LISTEN]; /* for MH_LISTEN_TLS_OWN, owned */
    struct mh_tls_certs tls;  /* top-level tls = {...} (or --tls-cert/--tls-key) */
    char *tls_cert, *tls_key; /* --tls-cert/--tls-key: replace `tls` when given */
    size_t nshared;
    struct mh_shared_decl shared[MH_MAX_SHARED]; /* sorted by name */
    struct mh_compress_conf compress;            /* response compression (off by default) */

    /* command line only */
    enum mh_run_mode mode;
    bool dev;
    const char *script;
    int script_argc; /* arguments after the script, for `run` */
    char **script_argv;

    /* which settings came from the command line: they beat the script's */
    unsigned char _from_cli[64]; /* indexed like the settings table (checked in config.c) */
};

/* Fills in the defaults. */
void mh_config_init(struct mh_config *c);
void mh_config_free(struct mh_config *c);

/*
 * Parses argv. Returns 0 to go on, 1 when the program should exit 0 (--help,
 * --version), -1 on a usage error (message written to err).
 */
int mh_config_parse_args(struct mh_config *c, int argc, char **argv, char *err, size_t errlen);

/*
 * Applies the settings table at stack index `idx` of L (from http.server{}),
 * except those already set on the command line. Unknown keys and bad values
 * are errors. Returns 0, or -1 with a message in err.
 */
int mh_config_apply_lua(struct mh_config *c, struct lua_State *L, int idx, char *err,
                        size_t errlen);

/*
 * For a reload, which keeps the running settings: the names of the settings
 * in the table at `idx` whose value differs from c's (comma-separated into
 * out; those set on the command line are skipped, they win anyway). Returns
 * how many differ.
 */
int mh_config_changed(const struct mh_config *c, struct lua_State *L, int idx, char *out,
                      size_t outlen);

/*
 * Parses a `compress` value at idx (true, false, or { types =, min_bytes =,
 * level = }) into c, starting from mh_compress_conf_init. Used by the
 * setting and by a route's compress option. Returns 0, or -1 with err
 * (prefixed by `what`).
 */
/* "1048576", "64k", "1m", "1g" (binary multiples, an optional "b") into bytes: 0, or -1. */
int mh_config_parse_bytes(const char *s, double *out);

int mh_config_compress_from_lua(struct mh_compress_conf *c, struct lua_State *L, int idx,
                                const char *what, char *err, size_t errlen);

/*
 * Parses a `shared` value (a table { name = size } at idx, sizes as numbers
 * of bytes or strings like "16m") into out[], sorted by name. Used by
 * http.server{} (to raise at the script's line), by the settings and by
 * reload (to compare). Returns 0, or -1 with err; *n is what was parsed.
 */
int mh_config_shared_from_lua(struct mh_shared_decl *out, size_t *n, struct lua_State *L, int idx,
                              char *err, size_t errlen);
void mh_config_shared_clear(struct mh_shared_decl *d, size_t *n);

/* Cross-field checks after everything is merged. 0 or -1 with err. */
int mh_config_validate(struct mh_config *c, char *err, size_t errlen);

/*
 * The certificates listener i serves with, or NULL for plain HTTP (after
 * mh_config_validate). An entry marked for TLS uses its own or the top-level
 * certificates; a plain address is TLS only when it is the only listener and
 * top-level certificates are configured.
 */
const struct mh_tls_certs *mh_config_listen_tls(const struct mh_config *c, size_t i);

/* Whether `name` is a setting http.server{} knows. */
bool mh_config_is_setting(const char *name, size_t len);
/* The known setting a misspelt name most likely meant (`idle_timout`), or NULL. */
const char *mh_config_suggest(const char *name, size_t len);

/* Number of workers to run ("auto" = online CPUs). */
int mh_config_workers(const struct mh_config *c);

void mh_config_print_help(const char *argv0);

#endif
