#ifndef MH_LOG_H
#define MH_LOG_H
/* Level-gated error log on stderr. */
#include <stdarg.h>
#include <stdbool.h>

enum mh_log_level { MH_LOG_NONE = -1, MH_LOG_ERROR, MH_LOG_WARN, MH_LOG_INFO, MH_LOG_DEBUG };

/* Messages above this level are dropped. Set once at startup. */
extern enum mh_log_level mh_log_threshold;
/* log_format = "json": each line is {"time","level","pid","msg"}. Set once at startup. */
extern bool mh_log_json;

void mh_log(enum mh_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void mh_logv(enum mh_log_level level, const char *fmt, va_list ap);
/* Parses "error", "warn", "info", "debug"; returns -1 for anything else. */
int mh_log_level_parse(const char *s);

#define mh_log_enabled(level) ((level) <= mh_log_threshold)

#endif
