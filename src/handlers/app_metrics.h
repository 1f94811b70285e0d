#ifndef MH_APP_METRICS_H
#define MH_APP_METRICS_H
/*
 * Metrics an app defines (http.metrics.counter/gauge/histogram), kept where
 * the built-in ones are: one shared anonymous mapping made before any fork,
 * updated by every worker with atomics, so any worker answers a scrape with
 * the whole server's numbers and a reload or a worker crash loses nothing.
 *
 * A family (name, help, type, label names, buckets) takes a slot the first
 * time a worker registers it; later registrations of the same name find it,
 * and must agree on type, labels and buckets (the help of the first stays).
 * A series is one family and one tuple of label values. Both tables are
 * fixed (MH_APP_METRICS_FAMILIES, MH_APP_METRICS_SERIES) and each family
 * has its own bound on series (max_series), so label values taken from
 * requests cannot grow memory or the scrape without limit: past the bound an
 * update fails with mh_app_metrics_err_series and is not counted.
 *
 * Names are checked by the caller (mh_app_metrics_check_name,
 * mh_app_metrics_check_label) before they reach the table. Nothing here
 * allocates or takes a lock; a worker that dies in the middle of claiming
 * a slot loses that slot, nothing else.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"

#define MH_APP_METRICS_FAMILIES   128
#define MH_APP_METRICS_SERIES     4096
#define MH_APP_METRICS_NAME_MAX   128 /* bytes of a family or label name, with its NUL */
#define MH_APP_METRICS_HELP_MAX   256
#define MH_APP_METRICS_LABELS     8   /* label names per family */
#define MH_APP_METRICS_VALUES_MAX 256 /* one series' label values, each with its NUL */
#define MH_APP_METRICS_BUCKETS    24  /* histogram bounds, +Inf not counted */

enum mh_app_metric_type { MH_APP_COUNTER, MH_APP_GAUGE, MH_APP_HISTOGRAM };

/* What a family is; filled by the caller and copied into the table. */
struct mh_app_family_spec {
    enum mh_app_metric_type type;
    char name[MH_APP_METRICS_NAME_MAX];
    char help[MH_APP_METRICS_HELP_MAX];
    int nlabels;
    char labels[MH_APP_METRICS_LABELS][MH_APP_METRICS_NAME_MAX];
    int nbuckets; /* histograms: upper bounds, strictly increasing, finite */
    double buckets[MH_APP_METRICS_BUCKETS];
    uint32_t max_series; /* 1..MH_APP_METRICS_SERIES */
    /*
     * Gauges: each worker keeps its own share of each series (a series per
     * worker and label values, counted against max_series); the exported
     * value is their sum, and a worker that exits, however, takes its share
     * with it (mh_app_metrics_forget_worker).
     */
    bool per_worker;
};

/* Errors (static strings, compared by identity). */
extern const char mh_app_metrics_err_series[];  /* "too many series" */
extern const char mh_app_metrics_err_full[];    /* "metrics table full" */
extern const char mh_app_metrics_err_changed[]; /* "declared differently before" */

struct mh_app_metrics;

/* Maps the shared tables; NULL on failure. Call before forking workers. */
struct mh_app_metrics *mh_app_metrics_new(void);
void mh_app_metrics_free(struct mh_app_metrics *a);

/*
 * NULL when name is a valid metric name for an app: [a-zA-Z_][a-zA-Z0-9_]*
 * (Prometheus' rule without the colons it keeps for recording rules), not
 * starting with "moonhttp_" (the server's own) and shorter than
 * MH_APP_METRICS_NAME_MAX; else why not.
 */
const char *mh_app_metrics_check_name(const char *name, size_t len);

/* The same for a label name: no leading "__" (reserved), and "le" only outside histograms. */
const char *mh_app_metrics_check_label(const char *name, size_t len, enum mh_app_metric_type type);

/*
 * Finds or claims the family spec->name. Returns its index (>= 0), or -1
 * with *err: mh_app_metrics_err_changed when the name is taken by a family
 * of another type, labels or buckets; mh_app_metrics_err_full when there is
 * no slot left.
 */
int mh_app_metrics_family(struct mh_app_metrics *a, const struct mh_app_family_spec *spec,
                          const char **err);

/*
 * The series of family `fam` with these label values: `values` holds
 * `nvalues` NUL-terminated strings back to back in `len` bytes (the
 * family's label count; len <= MH_APP_METRICS_VALUES_MAX). Returns its
 * index (>= 0), or -1 with *err (mh_app_metrics_err_series past the
 * family's max_series, mh_app_metrics_err_full when the table is).
 */
int mh_app_metrics_series(struct mh_app_metrics *a, int fam, const char *values, size_t len,
                          const char **err);

/* Updates of one series; the caller has checked the value (finite, >= 0 where it must be). */
void mh_app_metrics_add(struct mh_app_metrics *a, int series, double v);     /* counter, gauge */
void mh_app_metrics_set(struct mh_app_metrics *a, int series, double v);     /* gauge */
void mh_app_metrics_observe(struct mh_app_metrics *a, int series, double v); /* histogram */

/*
 * A worker exited (the master calls this for each, however it ended): its
 * shares of per_worker gauges go to zero, and their slots are taken over by
 * the next worker that updates the same label values.
 */
void mh_app_metrics_forget_worker(struct mh_app_metrics *a, int pid);

/* Appends every family with its series in the Prometheus text format (cut short on OOM, as
 * mh_metrics_render's own text). */
void mh_app_metrics_render(struct mh_app_metrics *a, struct mh_buf *out);

#endif
