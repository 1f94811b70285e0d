#ifndef MH_ACCESS_LOG_H
#define MH_ACCESS_LOG_H
/*
 * The access log: one line per answered request, in the Common or Combined
 * Log Format or as JSON. Off by default, and then it costs nothing: the
 * worker tests one flag per request. When on, lines collect in a 32 KiB
 * buffer written when it fills, 200 ms after its first line, and on stop;
 * every write holds whole lines and the file is opened O_APPEND, so workers
 * sharing one file do not interleave within a line.
 */
#include <ev.h>

struct mh_req;

enum mh_access_format { MH_ACCESS_COMMON, MH_ACCESS_COMBINED, MH_ACCESS_JSON };

/* "common", "combined", "json" → format, or -1. */
int mh_access_format_parse(const char *s);

/* Opens path ("-" = stdout) for appending; -1 with errno. */
int mh_access_log_open(const char *path);

/*
 * request_id_header: the header the json format's request_id trusts (as
 * req:id(); NULL: none). It must outlive the log (it is the config's).
 * redact: access_log_redact ("off" or names separated by commas; NULL:
 * none): those query parameters' values are written as REDACTED.
 */
struct mh_access_log *mh_access_log_new(struct ev_loop *loop, int fd, enum mh_access_format fmt,
                                        const char *request_id_header, const char *redact);
/* Logs request r, answered in `seconds`. */
void mh_access_log_request(struct mh_access_log *a, const struct mh_req *r, double seconds);
void mh_access_log_flush(struct mh_access_log *a);
/* Flushes and frees (the fd stays open: it is shared). */
void mh_access_log_free(struct mh_access_log *a);

#endif
