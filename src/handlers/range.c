#include "range.h"

#include <stdbool.h>

static bool ows(char c)
{
    return c == ' ' || c == '\t';
}

/* Reads 1+ digits, saturating at UINT64_MAX (a huge position is valid syntax, just unsatisfiable).
 */
static bool number(const char *v, size_t len, size_t *i, uint64_t *out)
{
    size_t start = *i;
    uint64_t x = 0;
    for (; *i < len && v[*i] >= '0' && v[*i] <= '9'; (*i)++) {
        unsigned d = (unsigned)(v[*i] - '0');
        x = x > (UINT64_MAX - d) / 10 ? UINT64_MAX : x * 10 + d;
    }
    *out = x;
    return *i > start;
}

static bool unit_bytes(const char *v, size_t len, size_t *i)
{
    static const char u[] = "bytes=";
    if (len < sizeof u - 1)
        return false;
    for (size_t k = 0; k < sizeof u - 1; k++) {
        char c = v[k];
        if (c >= 'A' && c <= 'Z')
            c = (char)(c + 32);
        if (c != u[k])
            return false;
    }
    *i = sizeof u - 1;
    return true;
}

/*
 * Pieces read before merging: the limit of MH_RANGE_MAX applies to what is
 * left after it (18 adjacent pieces are one range), so more are kept here;
 * this bound only caps the work (the sort is quadratic) and the stack.
 */
#define MH_RANGE_SPECS_MAX 256

enum mh_range_result mh_range_parse(const char *v, size_t len, uint64_t size, struct mh_range *out,
                                    unsigned *n)
{
    struct mh_range all[MH_RANGE_SPECS_MAX];
    size_t i;
    unsigned specs = 0, kept = 0;
    if (!unit_bytes(v, len, &i))
        return MH_RANGE_IGNORE;
    for (;;) {
        while (i < len && (ows(v[i]) || v[i] == ','))
            i++;
        if (i == len)
            break;
        uint64_t first, last;
        bool has_first = number(v, len, &i, &first);
        if (i == len || v[i] != '-')
            return MH_RANGE_IGNORE;
        i++;
        bool has_last = number(v, len, &i, &last);
        if (!has_first && !has_last)
            return MH_RANGE_IGNORE;
        if (has_first && has_last && last < first)
            return MH_RANGE_IGNORE;
        while (i < len && ows(v[i]))
            i++;
        if (i < len && v[i] != ',')
            return MH_RANGE_IGNORE;
        if (++specs > MH_RANGE_SPECS_MAX)
            return MH_RANGE_IGNORE;
        if (!has_first) { /* suffix: the last `last` bytes */
            if (last == 0 || size == 0)
                continue;
            first = last >= size ? 0 : size - last;
            last = size - 1;
        } else {
            if (first >= size)
                continue;
            if (!has_last || last >= size)
                last = size - 1;
        }
        all[kept].first = first;
        all[kept].last = last;
        kept++;
    }
    if (specs == 0)
        return MH_RANGE_IGNORE;
    if (kept == 0)
        return MH_RANGE_UNSATISFIABLE;
    /* Insertion sort (at most MH_RANGE_SPECS_MAX), then merge overlapping or adjacent ranges. */
    for (unsigned a = 1; a < kept; a++) {
        struct mh_range r = all[a];
        unsigned b = a;
        while (b > 0 && all[b - 1].first > r.first) {
            all[b] = all[b - 1];
            b--;
        }
        all[b] = r;
    }
    unsigned m = 0;
    for (unsigned a = 1; a < kept; a++) {
        if (all[a].first <= all[m].last + 1) {
            if (all[a].last > all[m].last)
                all[m].last = all[a].last;
        } else {
            all[++m] = all[a];
        }
    }
    if (m + 1 > MH_RANGE_MAX)
        return MH_RANGE_IGNORE;
    for (unsigned a = 0; a <= m; a++)
        out[a] = all[a];
    *n = m + 1;
    return MH_RANGE_OK;
}
