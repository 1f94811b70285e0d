/* Range header rows: value and body size in, result and ranges out. */
#include "range.h"
#include "unit.h"

#include <stdio.h>

static const struct {
    const char *v;
    uint64_t size;
    enum mh_range_result want;
    const char *ranges; /* "first-last,first-last" after sorting and merging */
} rows[] = {
    {"bytes=0-0", 10, MH_RANGE_OK, "0-0"},
    {"bytes=0-", 10, MH_RANGE_OK, "0-9"},
    {"bytes=2-5", 10, MH_RANGE_OK, "2-5"},
    {"bytes=5-100", 10, MH_RANGE_OK, "5-9"},
    {"bytes=-3", 10, MH_RANGE_OK, "7-9"},
    {"bytes=-30", 10, MH_RANGE_OK, "0-9"},
    {"BYTES=1-2", 10, MH_RANGE_OK, "1-2"},
    {"bytes= 1-2 , 4-5", 10, MH_RANGE_OK, "1-2,4-5"},
    {"bytes=4-5,1-2", 10, MH_RANGE_OK, "1-2,4-5"},
    {"bytes=1-3,2-6", 10, MH_RANGE_OK, "1-6"},
    {"bytes=1-3,4-6", 10, MH_RANGE_OK, "1-6"}, /* adjacent: merged */
    {"bytes=0-1,-2", 10, MH_RANGE_OK, "0-1,8-9"},
    {"bytes=,,0-1,,", 10, MH_RANGE_OK, "0-1"},
    {"bytes=0-1,20-30", 10, MH_RANGE_OK, "0-1"}, /* the unsatisfiable one is dropped */
    {"bytes=10-", 10, MH_RANGE_UNSATISFIABLE, NULL},
    {"bytes=10-20,30-40", 10, MH_RANGE_UNSATISFIABLE, NULL},
    {"bytes=-0", 10, MH_RANGE_UNSATISFIABLE, NULL},
    {"bytes=0-", 0, MH_RANGE_UNSATISFIABLE, NULL},
    {"bytes=-5", 0, MH_RANGE_UNSATISFIABLE, NULL},
    {"bytes=99999999999999999999999-", 10, MH_RANGE_UNSATISFIABLE, NULL},
    {"bytes=0-99999999999999999999999", 10, MH_RANGE_OK, "0-9"},
    {"bytes=5-2", 10, MH_RANGE_IGNORE, NULL},
    {"bytes=-", 10, MH_RANGE_IGNORE, NULL},
    {"bytes=", 10, MH_RANGE_IGNORE, NULL},
    {"bytes=a-b", 10, MH_RANGE_IGNORE, NULL},
    {"bytes=1-2;x", 10, MH_RANGE_IGNORE, NULL},
    {"bytes=1 2", 10, MH_RANGE_IGNORE, NULL},
    {"items=0-1", 10, MH_RANGE_IGNORE, NULL},
    {"bytes 0-1", 10, MH_RANGE_IGNORE, NULL},
    {"", 10, MH_RANGE_IGNORE, NULL},
    {"bytes=0-0,1-1,2-2,3-3,4-4,5-5,6-6,7-7,8-8,9-9,10-10,11-11,12-12,13-13,14-14,15-15", 100,
     MH_RANGE_OK, "0-15"},
    {"bytes=0-0,2-2,4-4,6-6,8-8,10-10,12-12,14-14,16-16,18-18,20-20,22-22,24-24,26-26,28-28,30-"
     "30,32-32",
     100, MH_RANGE_IGNORE, NULL}, /* 17 pieces */
    /* The limit applies after merging: 18 adjacent pieces are one range (issue 30). */
    {"bytes=0-0,1-1,2-2,3-3,4-4,5-5,6-6,7-7,8-8,9-9,10-10,11-11,12-12,13-13,14-14,15-15,16-16,17-"
     "17",
     100, MH_RANGE_OK, "0-17"},
    /* 17 pieces, then one covering them all */
    {"bytes=0-0,2-2,4-4,6-6,8-8,10-10,12-12,14-14,16-16,18-18,20-20,22-22,24-24,26-26,28-28,30-"
     "30,32-32,0-40",
     100, MH_RANGE_OK, "0-40"},
    /* 20 overlapping pieces in two runs */
    {"bytes=50-60,0-5,51-52,1-2,52-53,2-3,53-54,3-4,54-55,4-5,55-56,5-6,56-57,6-7,57-58,7-8,58-59,"
     "8-9,59-60,9-10",
     100, MH_RANGE_OK, "0-10,50-60"},
};

int main(void)
{
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        struct mh_range r[MH_RANGE_MAX];
        unsigned n = 0;
        enum mh_range_result got =
            mh_range_parse(rows[i].v, strlen(rows[i].v), rows[i].size, r, &n);
        CHECKF(got == rows[i].want, "row %zu (%s): got %d want %d", i, rows[i].v, got,
               rows[i].want);
        if (got == MH_RANGE_OK && rows[i].ranges) {
            char s[256] = "";
            for (unsigned k = 0; k < n; k++)
                snprintf(s + strlen(s), sizeof s - strlen(s), "%s%llu-%llu", k ? "," : "",
                         (unsigned long long)r[k].first, (unsigned long long)r[k].last);
            CHECKF(strcmp(s, rows[i].ranges) == 0, "row %zu (%s): ranges %s want %s", i, rows[i].v,
                   s, rows[i].ranges);
        }
    }
    return unit_report();
}
