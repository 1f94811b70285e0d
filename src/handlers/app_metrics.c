#include "app_metrics.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

const char mh_app_metrics_err_series[] = "too many series";
const char mh_app_metrics_err_full[] = "metrics table full";
const char mh_app_metrics_err_changed[] = "declared differently before";

enum { SLOT_EMPTY, SLOT_CLAIMED, SLOT_READY };

struct family {
    uint32_t state;
    uint32_t nseries; /* series claimed, bounded by spec.max_series */
    struct mh_app_family_spec spec;
};

#define OWNER_GONE (-1) /* a per_worker share whose worker exited: its slot may be taken over */

struct series {
    uint32_t state;
    int32_t family;
    int32_t owner; /* per_worker gauges: the worker's pid, or OWNER_GONE; else 0 */
    uint32_t hash;
    uint32_t len;
    char values[MH_APP_METRICS_VALUES_MAX];
    uint64_t value; /* a double's bits: a counter's or gauge's value, a histogram's sum */
    uint64_t count; /* histogram */
    uint64_t buckets[MH_APP_METRICS_BUCKETS + 1]; /* not cumulative; the last is +Inf */
};

struct mh_app_metrics {
    struct family families[MH_APP_METRICS_FAMILIES];
    struct series series[MH_APP_METRICS_SERIES];
};

#define LOAD(p)    __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define ADD(p, v)  __atomic_fetch_add((p), (v), __ATOMIC_RELAXED)
#define SPIN_LIMIT (1 << 16)

struct mh_app_metrics *mh_app_metrics_new(void)
{
    /* Pages are touched only as slots are used: the mapping's size is an upper bound. */
    void *p = mmap(NULL, sizeof(struct mh_app_metrics), PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

void mh_app_metrics_free(struct mh_app_metrics *a)
{
    if (a)
        munmap(a, sizeof *a);
}

static bool name_char(char c, bool first)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
           (!first && c >= '0' && c <= '9');
}

static const char *check_ident(const char *name, size_t len)
{
    if (len == 0)
        return "empty name";
    if (len >= MH_APP_METRICS_NAME_MAX)
        return "name too long";
    for (size_t i = 0; i < len; i++)
        if (!name_char(name[i], i == 0))
            return "a name is letters, digits and _, not starting with a digit";
    return NULL;
}

const char *mh_app_metrics_check_name(const char *name, size_t len)
{
    const char *e = check_ident(name, len);
    if (e)
        return e;
    if (len >= 9 && memcmp(name, "moonhttp_", 9) == 0)
        return "names starting with moonhttp_ are the server's own";
    return NULL;
}

const char *mh_app_metrics_check_label(const char *name, size_t len, enum mh_app_metric_type type)
{
    const char *e = check_ident(name, len);
    if (e)
        return e;
    if (len >= 2 && name[0] == '_' && name[1] == '_')
        return "label names starting with __ are reserved";
    if (type == MH_APP_HISTOGRAM && len == 2 && memcmp(name, "le", 2) == 0)
        return "le is the histogram's own label";
    return NULL;
}

/* Same type, labels and buckets: help and max_series may differ (the first's stay). */
static bool same_shape(const struct mh_app_family_spec *x, const struct mh_app_family_spec *y)
{
    if (x->type != y->type || x->nlabels != y->nlabels || x->nbuckets != y->nbuckets ||
        x->per_worker != y->per_worker)
        return false;
    for (int i = 0; i < x->nlabels; i++)
        if (strcmp(x->labels[i], y->labels[i]) != 0)
            return false;
    for (int i = 0; i < x->nbuckets; i++)
        if (x->buckets[i] != y->buckets[i])
            return false;
    return true;
}

/* Waits out another worker writing a slot it claimed (a few instructions); bounded, in case it
 * died in between. */
static uint32_t settle(uint32_t *state)
{
    uint32_t st = LOAD(state);
    for (int spin = 0; st == SLOT_CLAIMED && spin < SPIN_LIMIT; spin++)
        st = LOAD(state);
    return st;
}

int mh_app_metrics_family(struct mh_app_metrics *a, const struct mh_app_family_spec *spec,
                          const char **err)
{
    for (int i = 0; i < MH_APP_METRICS_FAMILIES; i++) {
        struct family *f = &a->families[i];
        uint32_t st = LOAD(&f->state);
        if (st == SLOT_EMPTY) {
            uint32_t expect = SLOT_EMPTY;
            if (__atomic_compare_exchange_n(&f->state, &expect, SLOT_CLAIMED, false,
                                            __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
                f->spec = *spec;
                __atomic_store_n(&f->state, SLOT_READY, __ATOMIC_RELEASE);
                return i;
            }
        }
        if (settle(&f->state) != SLOT_READY || strcmp(f->spec.name, spec->name) != 0)
            continue;
        if (!same_shape(&f->spec, spec)) {
            *err = mh_app_metrics_err_changed;
            return -1;
        }
        return i;
    }
    *err = mh_app_metrics_err_full;
    return -1;
}

static uint32_t hash_series(int fam, const char *values, size_t len)
{
    uint32_t h = 2166136261u ^ (uint32_t)fam;
    for (size_t i = 0; i < len; i++)
        h = (h ^ (uint8_t)values[i]) * 16777619u;
    return h;
}

/* Claims the empty slot s for a new series of f, within f's bound. 1: claimed; 0: another
 * worker took the slot first (look at it again); -1: the family is at its bound. */
static int claim_series(struct family *f, struct series *s, int fam, uint32_t h, const char *values,
                        size_t len, int32_t owner)
{
    if (ADD(&f->nseries, 1) >= f->spec.max_series) {
        __atomic_fetch_sub(&f->nseries, 1, __ATOMIC_RELAXED);
        return -1;
    }
    uint32_t expect = SLOT_EMPTY;
    if (!__atomic_compare_exchange_n(&s->state, &expect, SLOT_CLAIMED, false, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE)) {
        __atomic_fetch_sub(&f->nseries, 1, __ATOMIC_RELAXED);
        return 0;
    }
    s->family = fam;
    s->owner = owner;
    s->hash = h;
    s->len = (uint32_t)len;
    memcpy(s->values, values, len);
    __atomic_store_n(&s->state, SLOT_READY, __ATOMIC_RELEASE);
    return 1;
}

int mh_app_metrics_series(struct mh_app_metrics *a, int fam, const char *values, size_t len,
                          const char **err)
{
    struct family *f = &a->families[fam];
    uint32_t h = hash_series(fam, values, len);
    /* A per_worker gauge's shares have the same values: they sit together from h on. */
    int32_t owner = f->spec.per_worker ? (int32_t)getpid() : 0;
    for (uint32_t i = 0; i < MH_APP_METRICS_SERIES; i++) {
        uint32_t at = (h + i) % MH_APP_METRICS_SERIES;
        struct series *s = &a->series[at];
        if (LOAD(&s->state) == SLOT_EMPTY) {
            int rc = claim_series(f, s, fam, h, values, len, owner);
            if (rc > 0)
                return (int)at;
            if (rc < 0) {
                *err = mh_app_metrics_err_series;
                return -1;
            }
        }
        if (settle(&s->state) != SLOT_READY)
            continue;
        if (s->family != fam || s->hash != h || s->len != len ||
            memcmp(s->values, values, len) != 0)
            continue;
        int32_t was = LOAD(&s->owner);
        if (was == owner)
            return (int)at;
        if (was == OWNER_GONE && __atomic_compare_exchange_n(&s->owner, &was, owner, false,
                                                             __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
            return (int)at; /* a dead worker's share, zeroed: ours now */
    }
    *err = mh_app_metrics_err_full;
    return -1;
}

static void add_double(uint64_t *p, double v)
{
    uint64_t old = __atomic_load_n(p, __ATOMIC_RELAXED), next;
    do {
        double d;
        memcpy(&d, &old, sizeof d);
        d += v;
        memcpy(&next, &d, sizeof next);
    } while (!__atomic_compare_exchange_n(p, &old, next, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
}

static double load_double(const uint64_t *p)
{
    uint64_t bits = __atomic_load_n(p, __ATOMIC_RELAXED);
    double d;
    memcpy(&d, &bits, sizeof d);
    return d;
}

void mh_app_metrics_add(struct mh_app_metrics *a, int series, double v)
{
    add_double(&a->series[series].value, v);
}

void mh_app_metrics_set(struct mh_app_metrics *a, int series, double v)
{
    uint64_t bits;
    memcpy(&bits, &v, sizeof bits);
    __atomic_store_n(&a->series[series].value, bits, __ATOMIC_RELAXED);
}

void mh_app_metrics_observe(struct mh_app_metrics *a, int series, double v)
{
    struct series *s = &a->series[series];
    const struct mh_app_family_spec *spec = &a->families[s->family].spec;
    int b = 0;
    while (b < spec->nbuckets && v > spec->buckets[b])
        b++;
    ADD(&s->buckets[b], 1);
    add_double(&s->value, v);
    ADD(&s->count, 1);
}

/* ---- the exposition ------------------------------------------------------ */

/* A sample value as the text format writes it: the shortest form that reads back exactly. */
static void format_value(char *out, size_t n, double v)
{
    if (isnan(v)) {
        snprintf(out, n, "NaN");
        return;
    }
    if (isinf(v)) {
        snprintf(out, n, v > 0 ? "+Inf" : "-Inf");
        return;
    }
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(out, n, "%.*g", prec, v);
        if (strtod(out, NULL) == v)
            return;
    }
}

/* Escapes for a label value (quote too) or a HELP text (backslash and newline only). */
static int append_escaped(struct mh_buf *b, const char *s, size_t len, bool quote)
{
    int rc = 0;
    for (size_t i = 0; i < len && rc == 0; i++) {
        if (s[i] == '\\')
            rc = mh_buf_append(b, "\\\\", 2);
        else if (s[i] == '\n')
            rc = mh_buf_append(b, "\\n", 2);
        else if (quote && s[i] == '"')
            rc = mh_buf_append(b, "\\\"", 2);
        else
            rc = mh_buf_append(b, &s[i], 1);
    }
    return rc;
}

/* name{a="x",b="y"[,le="bound"]} value\n */
static void sample(struct mh_buf *out, const char *name, const char *suffix,
                   const struct mh_app_family_spec *spec, const struct series *s, const char *le,
                   const char *value)
{
    mh_buf_append_str(out, name);
    mh_buf_append_str(out, suffix);
    if (spec->nlabels || le) {
        const char *v = s->values;
        mh_buf_append_str(out, "{");
        for (int i = 0; i < spec->nlabels; i++) {
            size_t n = strnlen(v, (size_t)(s->values + s->len - v));
            if (i)
                mh_buf_append_str(out, ",");
            mh_buf_append_str(out, spec->labels[i]);
            mh_buf_append_str(out, "=\"");
            append_escaped(out, v, n, true);
            mh_buf_append_str(out, "\"");
            v += n + 1;
        }
        if (le) {
            mh_buf_append_str(out, spec->nlabels ? ",le=\"" : "le=\"");
            mh_buf_append_str(out, le);
            mh_buf_append_str(out, "\"");
        }
        mh_buf_append_str(out, "}");
    }
    mh_buf_append_str(out, " ");
    mh_buf_append_str(out, value);
    mh_buf_append_str(out, "\n");
}

static void render_histogram(struct mh_buf *out, const struct mh_app_family_spec *spec,
                             const struct series *s)
{
    char num[64], le[64];
    uint64_t cum = 0;
    for (int b = 0; b <= spec->nbuckets; b++) {
        cum += __atomic_load_n(&s->buckets[b], __ATOMIC_RELAXED);
        if (b < spec->nbuckets)
            format_value(le, sizeof le, spec->buckets[b]);
        else
            snprintf(le, sizeof le, "+Inf");
        snprintf(num, sizeof num, "%llu", (unsigned long long)cum);
        sample(out, spec->name, "_bucket", spec, s, le, num);
    }
    format_value(num, sizeof num, load_double(&s->value));
    sample(out, spec->name, "_sum", spec, s, NULL, num);
    /* The count is the +Inf bucket's, so the two never disagree within a scrape. */
    snprintf(num, sizeof num, "%llu", (unsigned long long)cum);
    sample(out, spec->name, "_count", spec, s, NULL, num);
}

/* The first share of s's label values (s itself or an earlier slot): it stands for them all. */
static bool first_share(const struct mh_app_metrics *a, const struct series *s)
{
    for (const struct series *o = a->series; o < s; o++)
        if (LOAD(&o->state) == SLOT_READY && o->family == s->family && o->hash == s->hash &&
            o->len == s->len && memcmp(o->values, s->values, s->len) == 0)
            return false;
    return true;
}

/* The sum of the shares of s's label values, from s (the first) on. */
static double sum_shares(const struct mh_app_metrics *a, const struct series *s)
{
    double sum = 0;
    for (const struct series *o = s; o < a->series + MH_APP_METRICS_SERIES; o++)
        if (LOAD(&o->state) == SLOT_READY && o->family == s->family && o->hash == s->hash &&
            o->len == s->len && memcmp(o->values, s->values, s->len) == 0)
            sum += load_double(&o->value);
    return sum;
}

void mh_app_metrics_forget_worker(struct mh_app_metrics *a, int pid)
{
    for (int i = 0; i < MH_APP_METRICS_SERIES; i++) {
        struct series *s = &a->series[i];
        if (LOAD(&s->state) != SLOT_READY || LOAD(&s->owner) != pid)
            continue;
        __atomic_store_n(&s->value, 0, __ATOMIC_RELAXED); /* 0.0's bits */
        __atomic_store_n(&s->owner, OWNER_GONE, __ATOMIC_RELEASE);
    }
}

static void render_family(struct mh_app_metrics *a, int fam, struct mh_buf *out)
{
    static const char *const types[] = {"counter", "gauge", "histogram"};
    const struct mh_app_family_spec *spec = &a->families[fam].spec;
    mh_buf_append_str(out, "# HELP ");
    mh_buf_append_str(out, spec->name);
    mh_buf_append_str(out, " ");
    append_escaped(out, spec->help, strlen(spec->help), false);
    mh_buf_append_str(out, "\n# TYPE ");
    mh_buf_append_str(out, spec->name);
    mh_buf_append_str(out, " ");
    mh_buf_append_str(out, types[spec->type]);
    mh_buf_append_str(out, "\n");
    for (int i = 0; i < MH_APP_METRICS_SERIES; i++) {
        const struct series *s = &a->series[i];
        if (LOAD(&s->state) != SLOT_READY || s->family != fam)
            continue;
        if (spec->type == MH_APP_HISTOGRAM) {
            render_histogram(out, spec, s);
        } else if (spec->per_worker) {
            if (!first_share(a, s))
                continue;
            char num[64];
            format_value(num, sizeof num, sum_shares(a, s));
            sample(out, spec->name, "", spec, s, NULL, num);
        } else {
            char num[64];
            format_value(num, sizeof num, load_double(&s->value));
            sample(out, spec->name, "", spec, s, NULL, num);
        }
    }
}

void mh_app_metrics_render(struct mh_app_metrics *a, struct mh_buf *out)
{
    for (int i = 0; i < MH_APP_METRICS_FAMILIES; i++) {
        uint32_t st = LOAD(&a->families[i].state);
        if (st == SLOT_EMPTY)
            break; /* families are claimed in order: none after the first empty slot */
        if (st == SLOT_READY)
            render_family(a, i, out);
    }
}
