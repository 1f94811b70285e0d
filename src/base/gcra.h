#ifndef MH_GCRA_H
#define MH_GCRA_H
/*
 * The generic cell rate algorithm (GCRA, ITU-T I.371; the "virtual
 * scheduling" form), the rule of moonhttp.ratelimit. A key's whole state is
 * one time, its TAT (theoretical arrival time): the moment the key would be
 * back to its full quota. Each unit of quota costs `emission`; a burst of
 * up to `tolerance / emission` units may arrive at once. A request of `cost`
 * units is allowed when, once counted, the TAT is at most `tolerance`
 * ahead of now; a refused request changes nothing.
 *
 * Times are in one unit (microseconds in moonhttp) on one clock (the shared
 * dict's, or Redis's TIME in lua/moonhttp/ratelimit.lua's server-side
 * script, which states this same rule in Lua for Redis to run). Pure: no
 * clock, no memory.
 */
#include <stdbool.h>
#include <stdint.h>

/*
 * tat: the key's stored TAT, or any value <= now when it has none. Returns
 * whether the request is allowed; *new_tat gets the TAT to store (when
 * allowed: max(tat, now) + cost * emission) or, when refused, max(tat, now)
 * (nothing to store). emission >= 1, cost >= 0, tolerance >= 0.
 */
bool mh_gcra_take(int64_t tat, int64_t now, int64_t emission, int64_t tolerance, int64_t cost,
                  int64_t *new_tat);

#endif
