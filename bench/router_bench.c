/*
 * ns per mh_router_lookup at 12, 100, 1,000 and 10,000 routes, for a static
 * mix ("GET /api/v1/rN/items/list") and a wildcard mix
 * ("GET /api/v1/rN/{id}/list"): same depth (5 segments), so the figures show
 * how lookup cost grows with the number of routes, not with the path. The
 * N-th level is the worst case for the table: one node with N children.
 * Lookups cycle through 4,096 pre-built paths naming random routes, so the
 * larger tables do not sit in L1. The eight configurations are timed round
 * robin and each keeps its best run, which filters out noise from other
 * processes on a shared machine. The build time of each router is printed too.
 *
 *   router_bench [lookups-per-run [runs]]
 */
#include "router.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NPATHS 4096
#define NSIZES 4

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* xorshift: a fixed sequence, so runs are comparable */
static unsigned rnd(unsigned *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 17;
    *s ^= *s << 5;
    return *s;
}

struct config {
    int nroutes, wild;
    struct mh_router *r;
    double build_ms, best_ns;
    char paths[NPATHS][48];
    size_t lens[NPATHS];
};

static int setup(struct config *c)
{
    char pat[64], err[512];
    struct mh_router_builder *b = mh_router_builder_new();
    for (int i = 0; i < c->nroutes; i++) {
        int n = snprintf(pat, sizeof pat,
                         c->wild ? "GET /api/v1/r%d/{id}/list" : "GET /api/v1/r%d/items/list", i);
        if (mh_router_add(b, pat, (size_t)n, i, "bench", err, sizeof err) != 0) {
            fprintf(stderr, "%s\n", err);
            return -1;
        }
    }
    double t0 = now_ns();
    c->r = mh_router_build(b, err, sizeof err);
    c->build_ms = (now_ns() - t0) / 1e6;
    mh_router_builder_free(b);
    if (!c->r) {
        fprintf(stderr, "%s\n", err);
        return -1;
    }
    unsigned seed = 2463534242u;
    struct mh_route_match m;
    char scratch[64];
    for (int i = 0; i < NPATHS; i++) {
        int want = (int)(rnd(&seed) % (unsigned)c->nroutes);
        c->lens[i] = (size_t)snprintf(c->paths[i], sizeof c->paths[i],
                                      c->wild ? "/api/v1/r%d/%u/list" : "/api/v1/r%d/items/list",
                                      want, rnd(&seed) % 100000);
        /* Check, outside the timing, that every path finds its route. */
        if (mh_router_lookup(c->r, "GET", 3, "", 0, c->paths[i], c->lens[i], MH_CLEAN_REDIRECT,
                             scratch, sizeof scratch, &m) != MH_ROUTE_FOUND ||
            m.handler_id != want) {
            fprintf(stderr, "lookup of %s failed\n", c->paths[i]);
            return -1;
        }
    }
    c->best_ns = 1e30;
    return 0;
}

static long time_run(struct config *c, long lookups)
{
    struct mh_route_match m;
    char scratch[64];
    long sink = 0;
    double t0 = now_ns();
    for (long k = 0; k < lookups; k++) {
        int i = (int)(k & (NPATHS - 1));
        mh_router_lookup(c->r, "GET", 3, "", 0, c->paths[i], c->lens[i], MH_CLEAN_REDIRECT, scratch,
                         sizeof scratch, &m);
        sink += m.handler_id;
    }
    double ns = (now_ns() - t0) / (double)lookups;
    if (ns < c->best_ns)
        c->best_ns = ns;
    return sink;
}

int main(int argc, char **argv)
{
    long lookups = argc > 1 ? atol(argv[1]) : 400000;
    int runs = argc > 2 ? atoi(argv[2]) : 25;
    static const int sizes[NSIZES] = {12, 100, 1000, 10000};
    static struct config cfg[2][NSIZES];
    for (int w = 0; w < 2; w++) {
        for (int s = 0; s < NSIZES; s++) {
            cfg[w][s].nroutes = sizes[s];
            cfg[w][s].wild = w;
            if (setup(&cfg[w][s]) != 0)
                return 1;
        }
    }
    long sink = 0;
    for (int run = 0; run < runs; run++)
        for (int w = 0; w < 2; w++)
            for (int s = 0; s < NSIZES; s++)
                sink += time_run(&cfg[w][s], lookups);
    printf("| routes | static ns/lookup | wildcard ns/lookup | static build ms | wildcard build "
           "ms |\n");
    printf("|---:|---:|---:|---:|---:|\n");
    for (int s = 0; s < NSIZES; s++)
        printf("| %d | %.1f | %.1f | %.2f | %.2f |\n", sizes[s], cfg[0][s].best_ns,
               cfg[1][s].best_ns, cfg[0][s].build_ms, cfg[1][s].build_ms);
    printf("\n10,000 / 12 routes: static %.2fx, wildcard %.2fx (checksum %ld)\n",
           cfg[0][3].best_ns / cfg[0][0].best_ns, cfg[1][3].best_ns / cfg[1][0].best_ns, sink);
    for (int w = 0; w < 2; w++)
        for (int s = 0; s < NSIZES; s++)
            mh_router_free(cfg[w][s].r);
    return 0;
}
