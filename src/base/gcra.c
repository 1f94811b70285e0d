#include "gcra.h"

bool mh_gcra_take(int64_t tat, int64_t now, int64_t emission, int64_t tolerance, int64_t cost,
                  int64_t *new_tat)
{
    int64_t from = tat > now ? tat : now;
    int64_t after = from + cost * emission;
    if (after - now > tolerance) {
        *new_tat = from;
        return false;
    }
    *new_tat = after;
    return true;
}
