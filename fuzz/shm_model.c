#include "shm_model.h"

#include "shm_dict.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MODEL_KEYS 40
#define MAX_STR    300

struct model_entry {
    bool present;
    struct mh_shm_value v;
    char str[MAX_STR];
    int64_t expires;
};

static int64_t now_ms;
static int64_t model_clock(void)
{
    return now_ms;
}

struct reader {
    const uint8_t *p, *end;
};

static unsigned byte(struct reader *r)
{
    return r->p < r->end ? *r->p++ : 0;
}

static bool live(const struct model_entry *m)
{
    return m->present && (!m->expires || m->expires > now_ms);
}

static void read_value(struct reader *r, struct mh_shm_value *v, char *str)
{
    memset(v, 0, sizeof *v);
    unsigned t = byte(r);
    switch (t % 4) {
    case 0:
        v->type = MH_SHM_STRING;
        v->len = (byte(r) | (t & 0x40 ? byte(r) << 8 : 0)) % MAX_STR;
        for (size_t i = 0; i < v->len; i++)
            str[i] = (char)('a' + (i + t) % 26);
        v->str = str;
        break;
    case 1:
        v->type = MH_SHM_INT;
        v->i = (int64_t)byte(r) - 128;
        if (t & 0x80)
            v->i = INT64_MAX - 128 - v->i; /* near the edge: incr wraps */
        break;
    case 2:
        v->type = MH_SHM_FLOAT;
        v->d = byte(r) / 4.0;
        break;
    default:
        v->type = MH_SHM_BOOL;
        v->i = byte(r) & 1;
    }
}

static bool same(const struct mh_shm_value *a, const char *astr, const struct model_entry *m)
{
    if (a->type != m->v.type)
        return false;
    switch (a->type) {
    case MH_SHM_STRING:
        return a->len == m->v.len && memcmp(astr, m->str, a->len) == 0;
    case MH_SHM_FLOAT:
        return a->d == m->v.d;
    default:
        return a->i == m->v.i;
    }
}

static void model_add(const struct mh_shm_value *a, const struct mh_shm_value *b,
                      struct mh_shm_value *out)
{
    memset(out, 0, sizeof *out);
    if (a->type == MH_SHM_INT && b->type == MH_SHM_INT) {
        out->type = MH_SHM_INT;
        out->i = (int64_t)((uint64_t)a->i + (uint64_t)b->i);
    } else {
        out->type = MH_SHM_FLOAT;
        out->d = (a->type == MH_SHM_INT ? (double)a->i : a->d) +
                 (b->type == MH_SHM_INT ? (double)b->i : b->d);
    }
}

static void store(struct model_entry *e, const struct mh_shm_value *v, const char *str, int64_t ttl)
{
    e->present = true;
    e->v = *v;
    if (v->type == MH_SHM_STRING && str)
        memcpy(e->str, str, v->len);
    e->expires = ttl ? now_ms + ttl : 0;
}

static void count_key(void *ud, const char *k, size_t kl)
{
    (void)k;
    (void)kl;
    (*(size_t *)ud)++;
}

struct run {
    int bad;
    const char **why;
};

static void mismatch(struct run *run, const char *what)
{
    if (!run->bad++ && run->why)
        *run->why = what;
}

/* One operation; returns false when the input is used up. */
static bool step(struct mh_shm_dict *d, struct model_entry *m, struct reader *r, bool exact,
                 struct run *run)
{
    if (r->p >= r->end)
        return false;
    unsigned op = byte(r), ki = byte(r) % MODEL_KEYS;
    char key[48];
    snprintf(key, sizeof key, "key-%u%s", ki, ki % 7 == 0 ? "-with-a-long-tail-of-bytes" : "");
    size_t klen = strlen(key);
    struct model_entry *e = &m[ki];
    int64_t ttl = op & 0x80 ? 1 + byte(r) % 50 : 0;
    char buf[MAX_STR], str[MAX_STR];
    struct mh_shm_value v, got;
    const char *err = NULL, *want = NULL;
    switch (op % 11) {
    case 0:
    case 1:
        err = mh_shm_dict_get(d, key, klen, &got, buf, sizeof buf);
        if (!live(e)) {
            if (got.type != MH_SHM_NONE)
                mismatch(run, "get: a value the model does not hold");
        } else if (got.type == MH_SHM_NONE && !exact) {
            e->present = false; /* evicted */
        } else if (!same(&got, buf, e)) {
            mismatch(run, "get: wrong value");
        }
        break;
    case 2:
    case 3:
    case 4: {
        enum mh_shm_mode mode = (enum mh_shm_mode)(byte(r) % 3);
        read_value(r, &v, str);
        err = mh_shm_dict_write(d, mode, key, klen, &v, ttl, NULL);
        bool was = live(e);
        if (!exact && was && ((mode == MH_SHM_ADD && !err) || err == mh_shm_dict_err_not_found))
            was = e->present = false; /* evicted meanwhile */
        want = mode == MH_SHM_ADD && was        ? mh_shm_dict_err_exists
               : mode == MH_SHM_REPLACE && !was ? mh_shm_dict_err_not_found
                                                : NULL;
        if (!want && !err)
            store(e, &v, str, ttl);
        break;
    }
    case 5: {
        struct mh_shm_value by, init = {.type = MH_SHM_INT, .i = (int64_t)byte(r) - 10};
        read_value(r, &by, str);
        if (by.type != MH_SHM_FLOAT)
            by.type = MH_SHM_INT; /* incr takes numbers only */
        bool with_init = op & 0x40;
        err = mh_shm_dict_incr(d, key, klen, &by, with_init ? &init : NULL, ttl, &got);
        if (!exact && live(e) && err == mh_shm_dict_err_not_found)
            e->present = false;
        if (!live(e)) {
            want = with_init ? NULL : mh_shm_dict_err_not_found;
            struct mh_shm_value sum;
            model_add(&init, &by, &sum);
            if (with_init && !err) {
                if (got.type != sum.type ||
                    (sum.type == MH_SHM_INT ? got.i != sum.i : got.d != sum.d))
                    mismatch(run, "incr: wrong initial sum");
                store(e, &sum, NULL, ttl);
            }
        } else if (e->v.type != MH_SHM_INT && e->v.type != MH_SHM_FLOAT) {
            want = mh_shm_dict_err_not_number;
        } else if (!err) {
            struct mh_shm_value sum;
            model_add(&e->v, &by, &sum);
            if (got.type != sum.type || (sum.type == MH_SHM_INT ? got.i != sum.i : got.d != sum.d))
                mismatch(run, "incr: wrong sum");
            e->v = sum;
        }
        break;
    }
    case 6:
        err = mh_shm_dict_delete(d, key, klen);
        e->present = false;
        break;
    case 7: {
        int64_t ms = -1;
        err = mh_shm_dict_ttl(d, key, klen, &ms);
        if (!exact && err && live(e))
            e->present = false, err = NULL;
        want = live(e) ? NULL : mh_shm_dict_err_not_found;
        if (!err && live(e) && ms != (e->expires ? e->expires - now_ms : 0))
            mismatch(run, "ttl: wrong time left");
        break;
    }
    case 8:
        err = mh_shm_dict_expire(d, key, klen, ttl);
        if (!exact && err && live(e))
            e->present = false, err = NULL;
        want = live(e) ? NULL : mh_shm_dict_err_not_found;
        if (!err && live(e))
            e->expires = ttl ? now_ms + ttl : 0;
        break;
    case 9: {
        size_t n = 0, want_n = 0;
        err = mh_shm_dict_keys(d, 0, count_key, &n);
        for (int i = 0; i < MODEL_KEYS; i++)
            want_n += live(&m[i]);
        if (exact ? n != want_n : n > want_n)
            mismatch(run, "keys: wrong count");
        if (byte(r) == 0xff) {
            err = mh_shm_dict_flush_all(d);
            memset(m, 0, MODEL_KEYS * sizeof *m);
        }
        break;
    }
    default:
        now_ms += byte(r) % 20;
    }
    if (err != want)
        mismatch(run, "an operation's error differs from the model's");
    return true;
}

int mh_shm_model_run(const uint8_t *ops, size_t n, bool exact, const char **why)
{
    struct mh_shm_dict *d = mh_shm_dict_new(exact ? 64 * 1024 : MH_SHM_DICT_MIN_SIZE);
    if (!d)
        return 1;
    mh_shm_dict_set_clock(d, model_clock);
    now_ms = 1000;
    static struct model_entry m[MODEL_KEYS];
    memset(m, 0, sizeof m);
    struct reader r = {ops, ops + n};
    struct run run = {0, why};
    for (unsigned k = 1; step(d, m, &r, exact, &run); k++) {
        if (k % 64 == 0 || r.p >= r.end) {
            const char *c = mh_shm_dict_check(d);
            if (c)
                mismatch(&run, c);
        }
    }
    const char *c = mh_shm_dict_check(d);
    if (c)
        mismatch(&run, c);
    mh_shm_dict_free(d);
    return run.bad;
}
