#include "log.h"

#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

enum mh_log_level mh_log_threshold = MH_LOG_INFO;

static const char *const level_names[] = {"error", "warn", "info", "debug"};

const char *mh_log_level_name(enum mh_log_level level)
{
    return level_names[level];
}

int mh_log_level_parse(const char *s)
{
    for (int i = 0; i <= MH_LOG_DEBUG; i++)
        if (strcmp(s, level_names[i]) == 0)
            return i;
    return -1;
}

void mh_logv(enum mh_log_level level, const char *fmt, va_list ap)
{
    if (!mh_log_enabled(level))
        return;
    char line[4096];
    struct timeval tv;
    struct tm tm;
    gettimeofday(&tv, NULL);
    gmtime_r(&tv.tv_sec, &tm);
    int n = snprintf(line, sizeof line,
                     "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ [%s] %d: ", tm.tm_year + 1900,
                     tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                     (int)(tv.tv_usec / 1000), level_names[level], (int)getpid());
    if (n < 0)
        return;
    int m = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
    if (len > sizeof line - 2)
        len = sizeof line - 2;
    line[len++] = '\n';
    /* One write per line so lines from several workers do not interleave. */
    ssize_t w = write(STDERR_FILENO, line, len);
    (void)w;
}

void mh_log(enum mh_log_level level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    mh_logv(level, fmt, ap);
    va_end(ap);
}
