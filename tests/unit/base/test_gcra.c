/* GCRA: rows of (stored TAT, now, emission, tolerance, cost) -> allowed and the TAT after. */
#include "gcra.h"
#include "unit.h"

int main(void)
{
    static const struct {
        int64_t tat, now, emission, tolerance, cost;
        bool allowed;
        int64_t after;
    } rows[] = {
        /* 10 per second (100 ms each), a burst of 10 (tolerance 1000 ms) */
        {0, 5000, 100, 1000, 1, true, 5100},       /* no state: counts from now */
        {5900, 5000, 100, 1000, 1, true, 6000},    /* the tenth of a burst: exactly at the edge */
        {6000, 5000, 100, 1000, 1, false, 6000},   /* the eleventh: refused, nothing stored */
        {6000, 5100, 100, 1000, 1, true, 6100},    /* 100 ms later one unit came back */
        {6000, 5050, 100, 1000, 1, false, 6000},   /* 50 ms later: not yet */
        {4000, 5000, 100, 1000, 1, true, 5100},    /* a TAT in the past counts from now, not from it */
        {5000, 5000, 100, 1000, 10, true, 6000},   /* a cost of the whole burst at once */
        {5000, 5000, 100, 1000, 11, false, 5000},  /* more than the burst: never */
        {5500, 5000, 100, 1000, 0, true, 5500},    /* cost 0: a look that takes nothing */
        {5000, 5000, 1000, 0, 1, false, 5000},     /* no tolerance: nothing ever passes */
        {0, 0, 1, 1, 1, true, 1},                  /* the smallest units */
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        int64_t after = -1;
        bool ok = mh_gcra_take(rows[i].tat, rows[i].now, rows[i].emission, rows[i].tolerance,
                               rows[i].cost, &after);
        CHECKF(ok == rows[i].allowed && after == rows[i].after,
               "row %zu: allowed %d after %lld, want %d %lld", i, ok, (long long)after,
               rows[i].allowed, (long long)rows[i].after);
    }
    return unit_report();
}
