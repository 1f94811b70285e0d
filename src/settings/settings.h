#ifndef MH_SETTINGS_H
#define MH_SETTINGS_H
/*
 * The server's settings: the values (struct mh_config) and the schema that
 * declares each of them once (mh_settings[]: name, type, default, unit,
 * range or choices, documentation). Everything that reads or shows a setting
 * goes through the schema: the command-line reader (server/config.c), the
 * reader of http.server{} tables (lua/lua_settings.c), --help, the generated
 * docs/reference/settings.md and the config fuzz target. So a setting cannot exist in
 * one of them and not the others, and a default cannot differ between the
 * code and its documentation.
 *
 * This layer knows no Lua and no command line: values arrive as strings (as
 * a flag writes them) or numbers, and errors are short messages in err.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "compress.h"
#include "tls_certs.h"

#define MH_MAX_LISTEN 8
#define MH_ACCESS_REDACT_MAX 16 /* names access_log_redact may list */

/* How a listen entry asked for TLS (see mh_config_listen_tls). */
enum mh_listen_tls {
    MH_LISTEN_TLS_UNSAID, /* a plain address */
    MH_LISTEN_TLS_OFF,    /* { addr = ..., tls = false } */
    MH_LISTEN_TLS_SHARED, /* { addr = ..., tls = true } or "https://addr": the top-level tls */
    MH_LISTEN_TLS_OWN,    /* { addr = ..., tls = {...} }: its own certificates */
};

enum mh_run_mode { MH_MODE_SERVE, MH_MODE_CHECK, MH_MODE_RUN, MH_MODE_TEST };

/* A shared dict of http.server{ shared = { name = size } } (or --shared name=size,...). */
#define MH_MAX_SHARED      16
#define MH_SHARED_MIN_SIZE (8 * 1024)
struct mh_shared_decl {
    char *name; /* 1..63 of [A-Za-z0-9_] */
    long size;  /* bytes: the zone is exactly this big */
};

/* The values; what each means is in mh_settings[] (settings.c) and docs/reference/settings.md. */
struct mh_config {
    /* settings (seconds as double, sizes in bytes) */
    double read_header_timeout;
    double read_timeout;
    double body_timeout;  /* no progress: between two reads of a body still owed */
    double write_timeout; /* total: end of head to end of response (opt-in) */
    double send_timeout;  /* no progress: between two successful writes */
    double idle_timeout;
    double shutdown_timeout;
    double drain_timeout; /* a reload: how long the old code's long-lived requests go on */
    double drain_spread;  /* ...and over how long those left are then closed */
    double once_start_timeout; /* worker.c: serving waits for once on_start functions */
    long max_header_bytes;
    long max_body_bytes;
    long discard_body_bytes; /* an unread body kept the connection up to this */
    long max_connections;
    long keepalive_requests;
    long backlog;
    bool reuseport; /* one listening socket per worker slot (master.c) */
    bool free_ports; /* listen and metrics on ports the kernel picks (mh_config_validate) */
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
    char *log_format;            /* "text" | "json" */
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
    double loop_block_warn;      /* seconds one resume may hold the loop before a warning; 0 = off */
    char *access_log_redact;     /* "off" or query parameter names separated by commas */
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

    /*
     * What the script asked for at the last reload (owned, NULL before one):
     * a reload keeps the running settings and logs the ones the script
     * changed, and this keeps it from logging the same change again on every
     * later reload (lua/lua_settings.c, mh_config_changed).
     */
    struct mh_config *_asked;
    unsigned char _in_script[64]; /* in an _asked copy: the settings the script's table held */

    /* which settings came from the command line: they beat the script's */
    unsigned char _from_cli[64]; /* indexed like mh_settings[] (checked in settings.c) */
};

/* What a setting's value is, which says how it is read, compared and shown. */
enum mh_setting_type {
    MH_SETTING_DURATION, /* double seconds: 5, "1.5s", "500ms", "2m" */
    MH_SETTING_BYTES,    /* long bytes: 65536, "64k", "1m", "1g" */
    MH_SETTING_INT,      /* long */
    MH_SETTING_BOOL,     /* bool: on/off, true/false, yes/no, 1/0 as strings */
    MH_SETTING_STRING,   /* char *, owned; with choices, one of them */
    MH_SETTING_LISTEN,   /* the listen[] entries, repeatable */
    MH_SETTING_TLS,      /* struct mh_tls_certs: a Lua table only */
    MH_SETTING_SHARED,   /* the shared[] dicts: name=size,... */
    MH_SETTING_COMPRESS, /* struct mh_compress_conf: on, off, 1..9 (or a Lua table) */
    MH_SETTING_MODULE,   /* a Lua table the Lua module `module` reads: no field, script only */
};

/*
 * One setting, declared once. `def` is the default as a flag would write it,
 * parsed by mh_setting_parse at mh_config_init, so the default that runs is
 * the one --help and docs/reference/settings.md show (NULL: none). Numbers must lie in
 * min..max (in seconds or bytes); a string with `choices` must be one of
 * them, one with `check` must pass it: both are checked by
 * mh_config_validate, after the command line and the script are merged.
 */
struct mh_setting {
    const char *name; /* the Lua key; the flag is --name with '_' as '-' */
    enum mh_setting_type type;
    size_t offset; /* of the value in struct mh_config */
    const char *def;
    double min, max;
    const char *const *choices; /* NULL-terminated, or NULL */
    /* NULL when v is fine, else a reason ("" for none beyond `expect`). */
    const char *(*check)(const char *v);
    const char *expect; /* with check: what is allowed, for errors and docs */
    bool list;          /* a string setting that Lua may give as a list: kept joined with ',' */
    const char *doc;    /* one line: --help and docs/reference/settings.md */
    const char *more;   /* docs/reference/settings.md only: what the line leaves out, or NULL */
    /*
     * MH_SETTING_MODULE: the Lua module whose configure(value, level) reads
     * the value when http.server{} is called (it raises for a bad one).
     */
    const char *module;
};

extern const struct mh_setting mh_settings[];
extern const size_t mh_settings_count;

/* The setting called name (len bytes; flag_form: '-' counts as '_'), or NULL. */
const struct mh_setting *mh_setting_find(const char *name, size_t len, bool flag_form);
/* The known setting a misspelt name most likely meant, or NULL. */
const char *mh_setting_suggest(const char *name, size_t len, bool flag_form);

/*
 * Sets s from a string as the command line writes it ("500ms", "64k", "on";
 * a listen entry is appended). Ranges are checked here, choices at
 * mh_config_validate. 0, or -1 with err.
 */
int mh_setting_parse(struct mh_config *c, const struct mh_setting *s, const char *v, char *err,
                     size_t errlen);
/*
 * A string setting against its choices (naming the closest one) or its
 * check; other types pass. mh_config_validate runs it on every setting; a
 * reader may run it early to name where the value came from. 0, or -1 with err.
 */
int mh_setting_check(const struct mh_config *c, const struct mh_setting *s, char *err,
                     size_t errlen);
/* Sets a number-valued setting (duration in seconds, bytes, int). 0, or -1 with err. */
int mh_setting_set_number(struct mh_config *c, const struct mh_setting *s, double v, char *err,
                          size_t errlen);
/* Whether s has the same value in a and b. */
bool mh_setting_same(const struct mh_setting *s, const struct mh_config *a,
                     const struct mh_config *b);

/* Whether `name` is a setting http.server{} knows. */
bool mh_config_is_setting(const char *name, size_t len);
/* The known setting a misspelt name most likely meant (`idle_timout`), or NULL. */
const char *mh_config_suggest(const char *name, size_t len);

/* Fills in the defaults of mh_settings[]. */
void mh_config_init(struct mh_config *c);
void mh_config_free(struct mh_config *c);
/*
 * A copy of s for a string field of struct mh_config (mh_config_free and the
 * clear functions below free them). Out of memory while reading settings
 * exits with a message: there is no server yet to keep running.
 */
char *mh_config_strdup(const char *s);

/* Certificates, listen entries and shared dicts, emptied (for a reader replacing them). */
void mh_config_clear_certs(struct mh_tls_certs *t);
void mh_config_clear_listen(struct mh_config *c);
void mh_config_shared_clear(struct mh_shared_decl *d, size_t *n);
/*
 * Adds name = size to d[] (*n entries, kept sorted by name): the size as a
 * string ("16m") when `size` is not NULL, else `bytes`. 0, or -1 with err.
 */
int mh_config_shared_add(struct mh_shared_decl *d, size_t *n, const char *name, size_t nlen,
                         const char *size, double bytes, char *err, size_t errlen);

/* "1048576", "64k", "1m", "1g" (binary multiples, an optional "b") into bytes: 0, or -1. */
int mh_config_parse_bytes(const char *s, double *out);

/* Choices, checks and cross-field rules after everything is merged. 0 or -1 with err. */
int mh_config_validate(struct mh_config *c, char *err, size_t errlen);

/*
 * The certificates listener i serves with, or NULL for plain HTTP (after
 * mh_config_validate). An entry marked for TLS uses its own or the top-level
 * certificates; a plain address is TLS only when it is the only listener and
 * top-level certificates are configured.
 */
const struct mh_tls_certs *mh_config_listen_tls(const struct mh_config *c, size_t i);

/*
 * Whether a TLS listener takes its certificates from ACME (tls = { acme = ... });
 * mh_config_validate then declares the shared zone MH_ACME_ZONE.
 */
bool mh_config_has_acme(const struct mh_config *c);

/* Number of workers to run ("auto" = online CPUs). */
int mh_config_workers(const struct mh_config *c);

/* --help's lines for the settings: "  --flag  doc (default x; range)", one per setting. */
void mh_settings_print_flags(FILE *out);
/* docs/reference/settings.md: every setting with its flag, default, values and documentation. */
void mh_settings_write_markdown(FILE *out);

#endif
