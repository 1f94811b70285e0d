/*
 * mh_settings[]: every setting of the server, declared once. The readers
 * (command line, http.server{}), --help, docs/reference/settings.md and the config
 * fuzz target all walk this table; declaring a setting is one row here, its
 * field in struct mh_config, and its use where it acts.
 */
#include "settings.h"

#include "listener.h"

#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#define OFF(field) offsetof(struct mh_config, field)
#define DAY        86400

static const char *const clean_path_choices[] = {"redirect", "rewrite", NULL};
static const char *const log_level_choices[] = {"error", "warn", "info", "debug", NULL};
static const char *const log_format_choices[] = {"text", "json", NULL};
static const char *const access_log_format_choices[] = {"common", "combined", "json", NULL};

static const char *check_workers(const char *v)
{
    if (!strcmp(v, "auto"))
        return NULL;
    char *end;
    long n = strtol(v, &end, 10);
    return end == v || *end || n < 1 || n > 1024 ? "" : NULL;
}

static const char *check_header_name(const char *v)
{
    static const char token[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_";
    if (!strcmp(v, "off"))
        return NULL;
    return v[0] && strspn(v, token) == strlen(v) ? NULL : "";
}

/* access_log_redact: off, or names of query parameters separated by commas, at most 16. */
static const char *check_param_names(const char *v)
{
    static const char name[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.[]";
    if (!strcmp(v, "off"))
        return NULL;
    int n = 0;
    for (const char *p = v;; p++) {
        size_t len = strspn(p, name);
        if (len == 0 || ++n > MH_ACCESS_REDACT_MAX)
            return "";
        p += len;
        if (*p == 0)
            return NULL;
        if (*p != ',')
            return "";
    }
}

static const char *check_address(const char *v)
{
    if (!strcmp(v, "off"))
        return NULL;
    struct sockaddr_storage ss;
    socklen_t len;
    return mh_listen_addr_parse(v, &ss, &len);
}

/* Rows in the order --help and docs/reference/settings.md list them. */
const struct mh_setting mh_settings[] = {
    {.name = "listen",
     .type = MH_SETTING_LISTEN,
     .offset = OFF(listen),
     .def = ":8080",
     .doc = "address to listen on, host:port or :port; https://host:port for TLS (repeatable)",
     .more = "`\":8080\"` is all addresses, IPv6 and IPv4; `\"127.0.0.1:9000\"`, `\"[::1]:8080\"`; "
             "in the script a list for several, each a string or `{ addr = ..., tls = true | "
             "false | { cert = ..., key = ... } }`"},
    {.name = "tls",
     .type = MH_SETTING_TLS,
     .offset = OFF(tls),
     .doc = "TLS certificates: { cert = ..., key = ... } or a list of them (script only)",
     .more = "beside them `min_version = \"1.2\"` (default) or `\"1.3\"`, `client_ca = "
             "\"ca.pem\"` and `client_auth = \"require\"` (default) or `\"optional\"`; the first "
             "certificate is the default, the others are chosen by SNI; `acme = { ... }` beside "
             "or instead of them: certificates from an ACME CA (no `cert` needed)"},
    {.name = "tls_cert",
     .type = MH_SETTING_STRING,
     .offset = OFF(tls_cert),
     .doc = "TLS certificate chain, PEM (with --tls-key)",
     .more = "replaces `tls` with one certificate"},
    {.name = "tls_key",
     .type = MH_SETTING_STRING,
     .offset = OFF(tls_key),
     .doc = "TLS private key, PEM (with --tls-cert)"},
    {.name = "workers",
     .type = MH_SETTING_STRING,
     .offset = OFF(workers),
     .def = "auto",
     .check = check_workers,
     .expect = "auto or a number 1..1024",
     .doc = "worker processes: N or auto (one per core)",
     .more = "`--dev` forces 1"},
    {.name = "read_header_timeout",
     .type = MH_SETTING_DURATION,
     .offset = OFF(read_header_timeout),
     .def = "5s",
     .max = DAY,
     .doc = "seconds to read a request head, from its first byte",
     .more = "also for a new connection's first request; a client trickling the head slowly "
             "(\"slowloris\") is cut when it passes"},
    {.name = "read_timeout",
     .type = MH_SETTING_DURATION,
     .offset = OFF(read_timeout),
     .def = "0s",
     .max = DAY,
     .doc = "seconds to read a whole request incl. body (0 = off)",
     .more = "from its first byte; off so uploads are not killed"},
    {.name = "body_timeout",
     .type = MH_SETTING_DURATION,
     .offset = OFF(body_timeout),
     .def = "60s",
     .max = DAY,
     .doc = "seconds a request body still owed may bring no bytes while the server waits for "
            "them; then 408, or the connection (HTTP/2: the stream) is cut when the response "
            "has begun (0 = off)",
     .more = "as nginx's `client_body_timeout`: the handler's body read gets `nil, \"timeout\"` "
             "and the answer has `Connection: close`. A slow but steady upload is never cut, and "
             "time the server itself does not read (the handler has not asked yet; HTTP/2: the "
             "client's flow-control window is shut) does not count"},
    {.name = "write_timeout",
     .type = MH_SETTING_DURATION,
     .offset = OFF(write_timeout),
     .def = "0s",
     .max = DAY,
     .doc = "seconds from end of request head to end of response, a total deadline (0 = off)",
     .more = "opt-in; the connection is closed when it passes"},
    {.name = "idle_timeout",
     .type = MH_SETTING_DURATION,
     .offset = OFF(idle_timeout),
     .def = "60s",
     .max = DAY,
     .doc = "seconds a keep-alive connection may wait for its next request"},
    {.name = "shutdown_timeout",
     .type = MH_SETTING_DURATION,
     .offset = OFF(shutdown_timeout),
     .def = "10s",
     .max = DAY,
     .doc = "seconds a graceful stop (SIGTERM) lets in-flight requests finish and WebSockets, SSE "
            "streams and streaming responses go on (http.draining() true, ws:on_drain runs), "
            "the last drain_spread of it closing them"},
    {.name = "drain_timeout",
     .type = MH_SETTING_DURATION,
     .offset = OFF(drain_timeout),
     .def = "5m",
     .max = DAY,
     .doc = "seconds a reload lets the replaced code's WebSockets, SSE streams and streaming "
            "responses go on (http.draining() true, ws:on_drain runs) before they are closed; "
            "0: closed at once"},
    {.name = "drain_spread",
     .type = MH_SETTING_DURATION,
     .offset = OFF(drain_spread),
     .def = "5s",
     .max = 3600,
     .doc = "seconds over which the connections still open when drain_timeout ends (a reload), "
            "or the last seconds of shutdown_timeout (a stop), are closed, "
            "each at a random moment, so their clients do not all reconnect at once"},
    {.name = "once_start_timeout",
     .type = MH_SETTING_DURATION,
     .offset = OFF(once_start_timeout),
     .def = "30s",
     .max = DAY,
     .doc = "seconds a worker waits for the `http.on_start(fn, { once = true })` functions of "
            "its code before it serves anyway (0 = no wait)",
     .more = "a worker accepts only once they have run (in it or another worker), so what they "
             "create exists for every request; past this it logs a warning and serves"},
    {.name = "max_header_bytes",
     .type = MH_SETTING_BYTES,
     .offset = OFF(max_header_bytes),
     .def = "64k",
     .min = 256,
     .max = 16 << 20,
     .doc = "request line + headers limit (431, or 414 for a long target)",
     .more = "on HTTP/2 it bounds the header list"},
    {.name = "max_body_bytes",
     .type = MH_SETTING_BYTES,
     .offset = OFF(max_body_bytes),
     .def = "1m",
     .max = 1L << 40,
     .doc = "request body limit (413)",
     .more = "and the connection is closed; a route's `max_body` option replaces it there"},
    {.name = "discard_body_bytes",
     .type = MH_SETTING_BYTES,
     .offset = OFF(discard_body_bytes),
     .def = "256k",
     .max = 1L << 30,
     .doc = "request body bytes a handler left unread that the server reads and drops to keep "
            "the connection; past it the answer says Connection: close and the connection closes",
     .more = "a chunked body whose end has not arrived when the handler answers is never waited "
             "for: the connection closes; it also bounds what a closing connection reads before "
             "it closes (HTTP/2: a stream's flow-control window bounds it)"},
    {.name = "max_connections",
     .type = MH_SETTING_INT,
     .offset = OFF(max_connections),
     .def = "10000",
     .min = 1,
     .max = 1 << 24,
     .doc = "open connections per worker; accept pauses above it",
     .more = "until one closes"},
    {.name = "keepalive_requests",
     .type = MH_SETTING_INT,
     .offset = OFF(keepalive_requests),
     .def = "0",
     .max = 1L << 40,
     .doc = "requests per connection before it is closed (0 = no limit)"},
    {.name = "backlog",
     .type = MH_SETTING_INT,
     .offset = OFF(backlog),
     .def = "4096",
     .min = 1,
     .max = 1 << 20,
     .doc = "listen(2) backlog"},
    {.name = "reuseport",
     .type = MH_SETTING_BOOL,
     .offset = OFF(reuseport),
     .def = "on",
     .doc = "one listening socket per worker (SO_REUSEPORT), so new connections are spread "
            "evenly; off: all workers accept from one shared socket",
     .more = "several workers only; the port is first bound without SO_REUSEPORT, so a busy "
             "port still fails. Off when workers should pick up the connections of a slot whose "
             "worker is down (a crash loop's back-off), at the price of uneven load"},
    {.name = "free_ports",
     .type = MH_SETTING_BOOL,
     .offset = OFF(free_ports),
     .def = "off",
     .doc = "every listener (and metrics) keeps its address and TLS but binds a free port the "
            "kernel picks; for tests",
     .more = "the log's `listening on ... (port N)` lines name the ports, in the order of "
             "`listen`; an all-addresses host (`:8080`, `0.0.0.0`, `[::]`) becomes loopback, so "
             "a server under test is not reachable from the network. `moonhttp.test` sets it "
             "(docs/guide/testing.md)"},
    {.name = "tcp_nodelay",
     .type = MH_SETTING_BOOL,
     .offset = OFF(tcp_nodelay),
     .def = "on",
     .doc = "set TCP_NODELAY on accepted sockets",
     .more = "small responses leave at once"},
    {.name = "redirect_code",
     .type = MH_SETTING_INT,
     .offset = OFF(redirect_code),
     .def = "307",
     .min = 300,
     .max = 399,
     .doc = "status of path-cleaning redirects (307, or 301 as Go 1.22)",
     .more = "the router's path-cleaning and trailing-slash redirects"},
    {.name = "clean_path",
     .type = MH_SETTING_STRING,
     .offset = OFF(clean_path),
     .def = "redirect",
     .choices = clean_path_choices,
     .doc = "non-canonical paths: redirect (as Go) or rewrite (route the clean path)"},
    {.name = "log_level",
     .type = MH_SETTING_STRING,
     .offset = OFF(log_level),
     .def = "info",
     .choices = log_level_choices,
     .doc = "error, warn, info or debug"},
    {.name = "log_format",
     .type = MH_SETTING_STRING,
     .offset = OFF(log_format),
     .def = "text",
     .choices = log_format_choices,
     .doc = "error log lines on stderr: text, or json (one object per line: time, level, pid, msg)",
     .more = "the access log has its own `access_log_format`"},
    {.name = "shutdown_delay",
     .type = MH_SETTING_DURATION,
     .offset = OFF(shutdown_delay),
     .def = "0s",
     .max = 3600,
     .doc = "seconds to keep serving after SIGTERM with http.stopping() true (health checks fail "
            "first), before the graceful stop"},
    {.name = "access_log",
     .type = MH_SETTING_STRING,
     .offset = OFF(access_log),
     .def = "off",
     .doc = "access log file, - for stdout, or off"},
    {.name = "access_log_format",
     .type = MH_SETTING_STRING,
     .offset = OFF(access_log_format),
     .def = "common",
     .choices = access_log_format_choices,
     .doc = "access log format: common, combined or json",
     .more = "`json` adds `request_id`: `common` and `combined` stay the formats log tools parse"},
    {.name = "access_log_redact",
     .type = MH_SETTING_STRING,
     .offset = OFF(access_log_redact),
     .def = "off",
     .list = true,
     .check = check_param_names,
     .expect = "off, or query parameter names separated by commas (in Lua a list, or false), at "
               "most 16",
     .doc = "query parameters whose values the access log writes as REDACTED",
     .more = "`{ \"token\", \"password\" }`: `/ws?token=eyJ...&room=1` is logged as "
             "`/ws?token=REDACTED&room=1` in every format (the json `query` too). Names are "
             "compared as sent, case and all"},
    {.name = "request_id_header",
     .type = MH_SETTING_STRING,
     .offset = OFF(request_id_header),
     .def = "off",
     .check = check_header_name,
     .expect = "a header name or off",
     .doc = "request header whose value req:id() and the json access log use (e.g. X-Request-Id; "
            "only behind a proxy that sets it), or off: ids are always generated",
     .more = "the value is used when it is a clean token; set it only behind a proxy that sets "
             "or strips that header, since clients can send anything"},
    {.name = "pid_file",
     .type = MH_SETTING_STRING,
     .offset = OFF(pid_file),
     .def = "off",
     .doc = "file to write the server's pid to, or off",
     .more = "the master's pid"},
    {.name = "metrics",
     .type = MH_SETTING_STRING,
     .offset = OFF(metrics),
     .def = "off",
     .check = check_address,
     .expect = "host:port or off",
     .doc = "address of a Prometheus metrics listener (host:port), or off"},
    {.name = "thread_pool",
     .type = MH_SETTING_INT,
     .offset = OFF(thread_pool),
     .def = "2",
     .min = 1,
     .max = 64,
     .doc = "threads per worker for C work kept off the event loop (password hashing)",
     .more = "started with the first job"},
    {.name = "max_pending_timers",
     .type = MH_SETTING_INT,
     .offset = OFF(max_pending_timers),
     .def = "1024",
     .min = 1,
     .max = 1 << 24,
     .doc = "pending http.timer/http.every timers per worker; past it they return nil, err"},
    {.name = "send_timeout",
     .type = MH_SETTING_DURATION,
     .offset = OFF(send_timeout),
     .def = "30s",
     .max = DAY,
     .doc = "seconds a response may make no progress (client reads nothing) before it is cut "
            "(0 = off)",
     .more = "the time between two successful writes while output waits for the client (as "
             "nginx's `send_timeout`); a slow but steady client is never cut"},
    {.name = "handler_cpu_limit",
     .type = MH_SETTING_DURATION,
     .offset = OFF(handler_cpu_limit),
     .def = "2s",
     .max = DAY,
     .doc = "seconds of CPU a handler, timer or thread may use without yielding before it gets "
            "\"cpu limit exceeded\"; time blocked in a system call does not count (0 = off)",
     .more = "raised inside the task: 500 if the response has not started (see "
             "`worker_stall_timeout` for time blocked)"},
    {.name = "lua_memory_limit",
     .type = MH_SETTING_BYTES,
     .offset = OFF(lua_memory_limit),
     .def = "1g",
     .max = 1L << 40,
     .doc = "bytes of Lua memory per worker; the allocation past it fails with Lua's memory error "
            "(0 = off)",
     .more = "500 if not caught"},
    {.name = "worker_stall_timeout",
     .type = MH_SETTING_DURATION,
     .offset = OFF(worker_stall_timeout),
     .def = "10s",
     .max = DAY,
     .doc = "seconds (wall time) a worker's event loop may go without a turn before the master "
            "kills and replaces it (0 = off)",
     .more = "blocked in C code or a system call, or a spin with `handler_cpu_limit = 0`; with "
             "several workers only"},
    {.name = "loop_block_warn",
     .type = MH_SETTING_DURATION,
     .offset = OFF(loop_block_warn),
     .def = "100ms",
     .max = DAY,
     .doc = "seconds (wall time) a handler, timer or thread may hold its worker's event loop "
            "before a warning names its route and where it was (0 = off)",
     .more = "every other request of the worker waits meanwhile: a blocking C call (a socket "
             "library's sleep or read, os.execute) or a long computation; counted in "
             "`moonhttp_guard_events_total{guard=\"loop_blocked\"}`"},
    {.name = "http2",
     .type = MH_SETTING_BOOL,
     .offset = OFF(http2),
     .def = "on",
     .doc = "offer HTTP/2 (ALPN h2, then http/1.1) on TLS listeners"},
    {.name = "h2c",
     .type = MH_SETTING_BOOL,
     .offset = OFF(h2c),
     .def = "on",
     .doc = "serve cleartext HTTP/2 with prior knowledge (detected from the connection preface)"},
    {.name = "h2_max_concurrent_streams",
     .type = MH_SETTING_INT,
     .offset = OFF(h2_max_concurrent_streams),
     .def = "100",
     .min = 1,
     .max = 1 << 20,
     .doc = "HTTP/2 streams a client may have open at once per connection (past it: RST_STREAM "
            "REFUSED_STREAM, the connection goes on)"},
    {.name = "h2_header_table_size",
     .type = MH_SETTING_BYTES,
     .offset = OFF(h2_header_table_size),
     .def = "4096",
     .max = 1 << 20,
     .doc = "HTTP/2 HPACK dynamic table size, each way: clients may use this much for request "
            "headers (SETTINGS_HEADER_TABLE_SIZE), the server uses at most this much for response "
            "headers"},
    {.name = "h2_flood_budget",
     .type = MH_SETTING_INT,
     .offset = OFF(h2_flood_budget),
     .def = "1000",
     .min = 10,
     .max = 1 << 24,
     .doc = "HTTP/2 frames that do no work (PING, SETTINGS, PRIORITY, empty DATA, client "
            "RST_STREAM, streams refused or reset for a protocol error) a connection may send in a "
            "burst (refilled over 10 s); past it: GOAWAY ENHANCE_YOUR_CALM"},
    {.name = "shared",
     .type = MH_SETTING_SHARED,
     .offset = OFF(shared),
     .min = MH_SHARED_MIN_SIZE,
     .max = 32.0 * (1L << 30),
     .doc = "shared dicts across workers: { name = size } in the script, name=size,... as a flag "
            "(e.g. cache=16m,limits=1m)",
     .more = "names are 1 to 63 letters, digits or `_`; at most 16 dicts"},
    {.name = "compress",
     .type = MH_SETTING_COMPRESS,
     .offset = OFF(compress),
     .def = "off",
     .doc = "gzip responses: on, off, a level 1..9, or (script) { types, min_bytes, level }",
     .more = "in the script `true`, or `{ types = {...}, min_bytes = 1024, level = 1 }` "
             "(defaults shown; `types` defaults to `text/*`, `application/json`, "
             "`application/javascript`, `image/svg+xml`); a route's `compress` option replaces "
             "it there"},
    {.name = "cluster",
     .type = MH_SETTING_MODULE,
     .module = "moonhttp.cluster",
     .doc = "one app across servers through Redis: { redis = \"redis://host:6379/0\", name = "
            "\"app\" } (script only)",
     .more = "also `heartbeat` (1 s), `ttl` (3 heartbeats) and `lease` (5 s); instances of one "
             "`name` share channels, `{ once = \"cluster\" }` jobs and `http.cluster.instances()` "
             "(docs/guide/cluster.md)"},
};
const size_t mh_settings_count = sizeof mh_settings / sizeof mh_settings[0];
_Static_assert(sizeof mh_settings / sizeof mh_settings[0] <=
                   sizeof((struct mh_config *)0)->_from_cli,
               "mh_config._from_cli needs a slot per setting");
_Static_assert(sizeof((struct mh_config *)0)->_in_script ==
                   sizeof((struct mh_config *)0)->_from_cli,
               "mh_config._in_script needs a slot per setting");
