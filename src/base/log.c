#include "log.h"

#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

enum mh_log_level mh_log_threshold = MH_LOG_INFO;
bool mh_log_json = false;

static const char *const level_names[] = {"error", "warn", "info", "debug"};

int mh_log_level_parse(const char *s)
{
    for (int i = 0; i <= MH_LOG_DEBUG; i++)
        if (strcmp(s, level_names[i]) == 0)
            return i;
    return -1;
}

/*
 * The message as a JSON string body: quotes, backslashes and control bytes
 * escaped (other bytes pass as they are, as the text format writes them).
 * Returns the length written to out (at most cap - 1, whole escapes only).
 */
static size_t json_escape(char *out, size_t cap, const char *s)
{
    size_t n = 0;
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        char esc[8];
        size_t k = 1;
        if (c == '"' || c == '\\')
            esc[0] = '\\', esc[1] = (char)c, k = 2;
        else if (c == '\n')
            memcpy(esc, "\\n", k = 2);
        else if (c < 0x20)
            k = (size_t)snprintf(esc, sizeof esc, "\\u%04x", c);
        else
            esc[0] = (char)c;
        if (n + k >= cap)
            break;
        memcpy(out + n, esc, k);
        n += k;
    }
    return n;
}

static void log_json(enum mh_log_level level, const char *stamp, const char *msg)
{
    char line[8192];
    int n = snprintf(line, sizeof line, "{\"time\":\"%s\",\"level\":\"%s\",\"pid\":%d,\"msg\":\"",
                     stamp, level_names[level], (int)getpid());
    if (n < 0)
        return;
    size_t len = (size_t)n + json_escape(line + n, sizeof line - (size_t)n - 3, msg);
    memcpy(line + len, "\"}\n", 3);
    ssize_t w = write(STDERR_FILENO, line, len + 3);
    (void)w;
}

void mh_logv(enum mh_log_level level, const char *fmt, va_list ap)
{
    if (!mh_log_enabled(level))
        return;
    struct timeval tv;
    struct tm tm;
    gettimeofday(&tv, NULL);
    gmtime_r(&tv.tv_sec, &tm);
    char stamp[40];
    snprintf(stamp, sizeof stamp, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
             tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
             (int)(tv.tv_usec / 1000));
    char line[4096];
    if (mh_log_json) {
        vsnprintf(line, sizeof line, fmt, ap);
        log_json(level, stamp, line);
        return;
    }
    int n = snprintf(line, sizeof line, "%s [%s] %d: ", stamp, level_names[level], (int)getpid());
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
