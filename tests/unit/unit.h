/* A minimal test harness: CHECK records failures and goes on; main returns non-zero on any. */
#ifndef MH_UNIT_H
#define MH_UNIT_H
#include <stdio.h>
#include <string.h>

static int unit_passed, unit_failed;

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (cond) {                                                                                \
            unit_passed++;                                                                         \
        } else {                                                                                   \
            unit_failed++;                                                                         \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);               \
        }                                                                                          \
    } while (0)

/* CHECK with a printf-style message for the failure. */
#define CHECKF(cond, ...)                                                                          \
    do {                                                                                           \
        if (cond) {                                                                                \
            unit_passed++;                                                                         \
        } else {                                                                                   \
            unit_failed++;                                                                         \
            fprintf(stderr, "%s:%d: check failed: ", __FILE__, __LINE__);                          \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, "\n");                                                                 \
        }                                                                                          \
    } while (0)

#define CHECK_STR(got, want)                                                                       \
    do {                                                                                           \
        const char *g_ = (got), *w_ = (want);                                                      \
        if (g_ && w_ && strcmp(g_, w_) == 0) {                                                     \
            unit_passed++;                                                                         \
        } else {                                                                                   \
            unit_failed++;                                                                         \
            fprintf(stderr, "%s:%d: got \"%s\", want \"%s\"\n", __FILE__, __LINE__,                \
                    g_ ? g_ : "(null)", w_ ? w_ : "(null)");                                       \
        }                                                                                          \
    } while (0)

static inline int unit_report(void)
{
    printf("%d passed, %d failed\n", unit_passed, unit_failed);
    return unit_failed ? 1 : 0;
}
#endif
