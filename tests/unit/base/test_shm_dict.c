/*
 * The shared dict's structure: operations and their errors, TTL on an
 * injected clock, LRU eviction, filling to the byte, a randomized check
 * against a plain reference model, two processes incrementing one key, and
 * writers killed while holding the lock (at a chosen point and at random).
 */
#include "shm_dict.h"
#include "shm_model.h"
#include "unit.h"

#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int64_t fake_now = 1000000;
static int64_t fake_clock(void)
{
    return fake_now;
}

static struct mh_shm_dict *new_dict(size_t size)
{
    struct mh_shm_dict *d = mh_shm_dict_new(size);
    if (d)
        mh_shm_dict_set_clock(d, fake_clock);
    return d;
}

static const char *put_str(struct mh_shm_dict *d, const char *k, const char *v, int64_t ttl)
{
    struct mh_shm_value val = {.type = MH_SHM_STRING, .str = v, .len = strlen(v)};
    return mh_shm_dict_write(d, MH_SHM_SET, k, strlen(k), &val, ttl, NULL);
}

static const char *put_int(struct mh_shm_dict *d, enum mh_shm_mode mode, const char *k, int64_t i)
{
    struct mh_shm_value val = {.type = MH_SHM_INT, .i = i};
    return mh_shm_dict_write(d, mode, k, strlen(k), &val, 0, NULL);
}

/* The value of k as text ("" when absent), for compact checks. */
static const char *show(struct mh_shm_dict *d, const char *k)
{
    static char out[256];
    char buf[200];
    struct mh_shm_value v;
    if (mh_shm_dict_get(d, k, strlen(k), &v, buf, sizeof buf))
        return "(error)";
    switch (v.type) {
    case MH_SHM_NONE:
        return "";
    case MH_SHM_STRING:
        snprintf(out, sizeof out, "s:%.*s", (int)(v.len < sizeof buf ? v.len : sizeof buf), buf);
        break;
    case MH_SHM_INT:
        snprintf(out, sizeof out, "i:%lld", (long long)v.i);
        break;
    case MH_SHM_FLOAT:
        snprintf(out, sizeof out, "f:%g", v.d);
        break;
    case MH_SHM_BOOL:
        snprintf(out, sizeof out, "b:%d", (int)v.i);
        break;
    }
    return out;
}

static void test_basic(void)
{
    struct mh_shm_dict *d = new_dict(64 * 1024);
    CHECK(d != NULL);
    CHECK(mh_shm_dict_new(100) == NULL); /* below the minimum */
    size_t empty = mh_shm_dict_free_space(d);
    CHECK(empty > 56 * 1024 && empty < 64 * 1024);
    CHECK(put_str(d, "a", "hello", 0) == NULL);
    CHECK_STR(show(d, "a"), "s:hello");
    CHECK_STR(show(d, "b"), "");
    CHECK(put_int(d, MH_SHM_SET, "n", -5) == NULL);
    CHECK_STR(show(d, "n"), "i:-5");
    struct mh_shm_value f = {.type = MH_SHM_FLOAT, .d = 2.5};
    CHECK(mh_shm_dict_write(d, MH_SHM_SET, "f", 1, &f, 0, NULL) == NULL);
    CHECK_STR(show(d, "f"), "f:2.5");
    struct mh_shm_value b = {.type = MH_SHM_BOOL, .i = 0};
    CHECK(mh_shm_dict_write(d, MH_SHM_SET, "t", 1, &b, 0, NULL) == NULL);
    CHECK_STR(show(d, "t"), "b:0");
    CHECK(mh_shm_dict_count(d) == 4);
    /* overwrite with a longer value, then a key and value spanning several blocks */
    CHECK(put_str(d, "a", "a much longer value than fits in one block of sixty-four bytes", 0) ==
          NULL);
    CHECK_STR(show(d, "a"), "s:a much longer value than fits in one block of sixty-four bytes");
    char key[300], val[150];
    memset(key, 'k', sizeof key - 1);
    key[sizeof key - 1] = 0;
    memset(val, 'v', sizeof val - 1);
    val[sizeof val - 1] = 0;
    CHECK(put_str(d, key, val, 0) == NULL);
    char want[200];
    snprintf(want, sizeof want, "s:%s", val);
    CHECK_STR(show(d, key), want);
    key[298] = 'x'; /* same length, last byte differs: a different key */
    CHECK_STR(show(d, key), "");
    key[298] = 'k';
    /* a string longer than the caller's buffer: the full length is reported */
    char small[4];
    struct mh_shm_value v;
    CHECK(mh_shm_dict_get(d, key, strlen(key), &v, small, sizeof small) == NULL);
    CHECK(v.type == MH_SHM_STRING && v.len == strlen(val) && memcmp(small, "vvvv", 4) == 0);
    CHECK(mh_shm_dict_delete(d, key, strlen(key)) == NULL);
    CHECK(mh_shm_dict_delete(d, "nope", 4) == NULL);
    CHECK_STR(show(d, key), "");
    CHECK(mh_shm_dict_check(d) == NULL);
    CHECK(mh_shm_dict_flush_all(d) == NULL);
    CHECK(mh_shm_dict_count(d) == 0 && mh_shm_dict_free_space(d) == empty);
    CHECK(mh_shm_dict_check(d) == NULL);
    mh_shm_dict_free(d);
}

static void test_modes_and_incr(void)
{
    struct mh_shm_dict *d = new_dict(16 * 1024);
    CHECK(put_int(d, MH_SHM_ADD, "k", 1) == NULL);
    CHECK(put_int(d, MH_SHM_ADD, "k", 2) == mh_shm_dict_err_exists);
    CHECK_STR(show(d, "k"), "i:1");
    CHECK(put_int(d, MH_SHM_REPLACE, "k", 3) == NULL);
    CHECK_STR(show(d, "k"), "i:3");
    CHECK(put_int(d, MH_SHM_REPLACE, "absent", 3) == mh_shm_dict_err_not_found);
    CHECK_STR(show(d, "absent"), "");

    struct mh_shm_value one = {.type = MH_SHM_INT, .i = 1}, half = {.type = MH_SHM_FLOAT, .d = 0.5};
    struct mh_shm_value zero = {.type = MH_SHM_INT, .i = 0}, out;
    CHECK(mh_shm_dict_incr(d, "c", 1, &one, NULL, 0, &out) == mh_shm_dict_err_not_found);
    CHECK(mh_shm_dict_incr(d, "c", 1, &one, &zero, 0, &out) == NULL);
    CHECK(out.type == MH_SHM_INT && out.i == 1);
    CHECK(mh_shm_dict_incr(d, "c", 1, &one, &zero, 0, &out) == NULL);
    CHECK(out.type == MH_SHM_INT && out.i == 2);
    CHECK(mh_shm_dict_incr(d, "c", 1, &half, NULL, 0, &out) == NULL);
    CHECK(out.type == MH_SHM_FLOAT && out.d == 2.5);
    CHECK_STR(show(d, "c"), "f:2.5");
    CHECK(put_int(d, MH_SHM_SET, "max", INT64_MAX) == NULL);
    CHECK(mh_shm_dict_incr(d, "max", 3, &one, NULL, 0, &out) == NULL);
    CHECK(out.type == MH_SHM_INT && out.i == INT64_MIN); /* wraps, as Lua integers */
    CHECK(put_str(d, "s", "text", 0) == NULL);
    CHECK(mh_shm_dict_incr(d, "s", 1, &one, &zero, 0, &out) == mh_shm_dict_err_not_number);
    CHECK_STR(show(d, "s"), "s:text");
    CHECK(mh_shm_dict_check(d) == NULL);
    mh_shm_dict_free(d);
}

static void count_key(void *ud, const char *k, size_t kl)
{
    (void)k;
    (void)kl;
    (*(size_t *)ud)++;
}

static void test_ttl(void)
{
    struct mh_shm_dict *d = new_dict(16 * 1024);
    int64_t ms = -1;
    CHECK(put_str(d, "t", "v", 1000) == NULL);
    CHECK(put_str(d, "forever", "v", 0) == NULL);
    CHECK(mh_shm_dict_ttl(d, "t", 1, &ms) == NULL && ms == 1000);
    CHECK(mh_shm_dict_ttl(d, "forever", 7, &ms) == NULL && ms == 0);
    fake_now += 999;
    CHECK_STR(show(d, "t"), "s:v");
    CHECK(mh_shm_dict_ttl(d, "t", 1, &ms) == NULL && ms == 1);
    fake_now += 1;
    CHECK_STR(show(d, "t"), "");
    CHECK(mh_shm_dict_ttl(d, "t", 1, &ms) == mh_shm_dict_err_not_found);
    CHECK(mh_shm_dict_expire(d, "t", 1, 50) == mh_shm_dict_err_not_found);
    /* an expired key is absent for add and replace too */
    CHECK(put_int(d, MH_SHM_REPLACE, "t", 1) == mh_shm_dict_err_not_found);
    CHECK(put_int(d, MH_SHM_ADD, "t", 1) == NULL);
    CHECK(mh_shm_dict_ttl(d, "t", 1, &ms) == NULL && ms == 0);
    CHECK(mh_shm_dict_expire(d, "forever", 7, 10) == NULL);
    CHECK(mh_shm_dict_ttl(d, "forever", 7, &ms) == NULL && ms == 10);
    CHECK(mh_shm_dict_expire(d, "forever", 7, 0) == NULL);
    fake_now += 1000;
    CHECK_STR(show(d, "forever"), "s:v");
    /* incr's init ttl applies to a key it creates, and an incr keeps the expiry */
    struct mh_shm_value one = {.type = MH_SHM_INT, .i = 1}, out;
    CHECK(mh_shm_dict_incr(d, "w", 1, &one, &one, 100, &out) == NULL && out.i == 2);
    fake_now += 60;
    CHECK(mh_shm_dict_incr(d, "w", 1, &one, &one, 100, &out) == NULL && out.i == 3);
    fake_now += 40;
    CHECK(mh_shm_dict_incr(d, "w", 1, &one, &one, 100, &out) == NULL && out.i == 2);
    CHECK(mh_shm_dict_count(d) == 3);
    size_t n = 0;
    /* keys skips expired entries */
    CHECK(put_str(d, "gone", "v", 1) == NULL);
    fake_now += 1;
    CHECK(mh_shm_dict_keys(d, 0, count_key, &n) == NULL && n == 3);
    CHECK(mh_shm_dict_check(d) == NULL);
    mh_shm_dict_free(d);
}

struct key_list {
    char keys[64][16];
    size_t n;
};

static void list_key(void *ud, const char *k, size_t kl)
{
    struct key_list *l = ud;
    if (l->n < 64)
        snprintf(l->keys[l->n++], 16, "%.*s", (int)kl, k);
}

static void test_lru(void)
{
    struct mh_shm_dict *d = new_dict(MH_SHM_DICT_MIN_SIZE);
    size_t blocks = mh_shm_dict_free_space(d) / mh_shm_dict_entry_bytes(1, 0);
    char k[24];
    for (size_t i = 0; i < blocks; i++) {
        snprintf(k, sizeof k, "%zu", i);
        CHECK(put_int(d, MH_SHM_SET, k, (int64_t)i) == NULL);
    }
    CHECK(mh_shm_dict_free_space(d) == 0 && mh_shm_dict_count(d) == blocks);
    CHECK_STR(show(d, "0"), "i:0"); /* 0 is now the most recently used; 1 the least */
    bool forced = false;
    struct mh_shm_value v = {.type = MH_SHM_INT, .i = 7};
    CHECK(mh_shm_dict_write(d, MH_SHM_SET, "new", 3, &v, 0, &forced) == NULL && forced);
    CHECK_STR(show(d, "1"), "");
    CHECK_STR(show(d, "0"), "i:0");
    CHECK_STR(show(d, "2"), "i:2");
    struct key_list l = {0};
    CHECK(mh_shm_dict_keys(d, 3, list_key, &l) == NULL && l.n == 3);
    CHECK_STR(l.keys[0], "2");
    CHECK_STR(l.keys[1], "0");
    CHECK_STR(l.keys[2], "new");
    CHECK(mh_shm_dict_check(d) == NULL);
    mh_shm_dict_free(d);

    /* An expired entry near the LRU tail goes before live ones (as OpenResty: from the tail). */
    d = new_dict(MH_SHM_DICT_MIN_SIZE);
    for (size_t i = 0; i < blocks; i++) {
        snprintf(k, sizeof k, "%zu", i);
        struct mh_shm_value iv = {.type = MH_SHM_INT, .i = (int64_t)i};
        CHECK(mh_shm_dict_write(d, MH_SHM_SET, k, strlen(k), &iv, i == 1 ? 5 : 0, NULL) == NULL);
    }
    fake_now += 10;
    forced = true;
    CHECK(mh_shm_dict_write(d, MH_SHM_SET, "late", 4, &v, 0, &forced) == NULL);
    CHECKF(!forced, "a live entry was evicted while an expired one was there");
    CHECK_STR(show(d, "0"), "i:0");
    CHECK(mh_shm_dict_check(d) == NULL);
    mh_shm_dict_free(d);
}

static void test_fill_to_the_byte(void)
{
    struct mh_shm_dict *d = new_dict(32 * 1024);
    CHECK(mh_shm_dict_size(d) == 32 * 1024);
    size_t space = mh_shm_dict_free_space(d);
    /* entry_bytes tells the cost; find the largest value that fits the whole zone */
    size_t vlen = space;
    while (mh_shm_dict_entry_bytes(1, vlen) > space)
        vlen--;
    CHECK(mh_shm_dict_entry_bytes(1, vlen) == space);
    char *big = malloc(vlen + 2);
    memset(big, 'z', vlen + 1);
    big[vlen + 1] = 0;
    struct mh_shm_value v = {.type = MH_SHM_STRING, .str = big, .len = vlen + 1};
    CHECK(mh_shm_dict_write(d, MH_SHM_SET, "k", 1, &v, 0, NULL) == mh_shm_dict_err_no_memory);
    CHECK(mh_shm_dict_free_space(d) == space);
    put_int(d, MH_SHM_SET, "small", 1);
    v.len = vlen;
    bool forced = false;
    CHECK(mh_shm_dict_write(d, MH_SHM_SET, "k", 1, &v, 0, &forced) == NULL && forced);
    CHECK(mh_shm_dict_free_space(d) == 0 && mh_shm_dict_count(d) == 1);
    char *back = malloc(vlen);
    struct mh_shm_value out;
    CHECK(mh_shm_dict_get(d, "k", 1, &out, back, vlen) == NULL && out.len == vlen &&
          memcmp(back, big, vlen) == 0);
    /* replacing the one entry that fills everything still works (old goes first) */
    big[0] = 'A';
    CHECK(mh_shm_dict_write(d, MH_SHM_SET, "k", 1, &v, 0, NULL) == NULL);
    CHECK(mh_shm_dict_get(d, "k", 1, &out, back, vlen) == NULL && back[0] == 'A');
    CHECK(mh_shm_dict_check(d) == NULL);
    free(big);
    free(back);
    mh_shm_dict_free(d);
}

/* ---- randomized cross-check against a reference model ---------------------- */

/* The model (fuzz/shm_model.c, shared with the fuzz target) runs ops decoded from bytes. */
static void test_model(void)
{
    static uint8_t ops[200000];
    srand(1234);
    for (int round = 0; round < 4; round++) {
        for (size_t i = 0; i < sizeof ops; i++)
            ops[i] = (uint8_t)rand();
        const char *why = NULL;
        int bad = mh_shm_model_run(ops, sizeof ops, round % 2 == 0, &why);
        CHECKF(bad == 0, "round %d: %d mismatches against the model; first: %s", round, bad, why);
    }
}

/* ---- processes ------------------------------------------------------------ */

static void incr_many(struct mh_shm_dict *d, int n)
{
    struct mh_shm_value one = {.type = MH_SHM_INT, .i = 1}, zero = {.type = MH_SHM_INT}, out;
    for (int i = 0; i < n; i++)
        mh_shm_dict_incr(d, "hits", 4, &one, &zero, 0, &out);
}

static void test_fork_incr(void)
{
    struct mh_shm_dict *d = mh_shm_dict_new(64 * 1024);
    enum { N = 200000 };
    pid_t kids[2];
    for (int k = 0; k < 2; k++)
        if ((kids[k] = fork()) == 0) {
            incr_many(d, N);
            _exit(0);
        }
    incr_many(d, N);
    for (int k = 0; k < 2; k++)
        waitpid(kids[k], NULL, 0);
    CHECK_STR(show(d, "hits"), "i:600000");
    CHECK(mh_shm_dict_check(d) == NULL);
    mh_shm_dict_free(d);
}

static void exit_in_hook(const char *key, size_t klen)
{
    if (klen == 4 && memcmp(key, "dies", 4) == 0)
        _exit(3); /* the lock is held and the new entry is built, not linked */
}

static void test_killed_writer(void)
{
    struct mh_shm_dict *d = mh_shm_dict_new(MH_SHM_DICT_MIN_SIZE);
    put_str(d, "dies", "old value", 0);
    put_str(d, "other", "kept", 0);
    size_t before = mh_shm_dict_free_space(d);
    pid_t pid = fork();
    if (pid == 0) {
        mh_shm_dict_set_write_hook(d, exit_in_hook);
        put_str(d, "dies", "a new value long enough to need more blocks than the old one", 0);
        _exit(0);
    }
    int st;
    waitpid(pid, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 3);
    CHECK(mh_shm_dict_recoveries(d) == 0);
    CHECK_STR(show(d, "dies"), "s:old value"); /* the write did not happen */
    CHECK(mh_shm_dict_recoveries(d) == 1);
    CHECK_STR(show(d, "other"), "s:kept");
    CHECK(mh_shm_dict_free_space(d) == before); /* its blocks were reclaimed */
    CHECK(mh_shm_dict_check(d) == NULL);

    /* SIGKILL at random moments of a busy writer, many times */
    int recovered = 0;
    for (int round = 0; round < 40; round++) {
        if ((pid = fork()) == 0) {
            char k[16], v[200];
            memset(v, 'v', sizeof v - 1);
            v[sizeof v - 1] = 0;
            for (unsigned i = 0;; i++) {
                snprintf(k, sizeof k, "k%u", i % 300);
                v[i % 199] = 0;
                put_str(d, k, v, i % 3);
                v[i % 199] = 'v';
                if (i % 5 == 0)
                    mh_shm_dict_delete(d, k, strlen(k));
                show(d, "other");
            }
        }
        struct timespec ts = {0, 2000000 + (round % 7) * 300000};
        nanosleep(&ts, NULL);
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        uint64_t r0 = mh_shm_dict_recoveries(d);
        const char *c = mh_shm_dict_check(d);
        CHECKF(c == NULL, "after kill %d: %s", round, c);
        recovered += mh_shm_dict_recoveries(d) > r0;
    }
    printf("killed writer: %d of 40 kills landed inside the lock\n", recovered);
    CHECK(recovered > 0);
    mh_shm_dict_free(d);
}

/* Entries owned by a process go when it is forgotten; the others, and ownership given up, stay. */
static void test_forget_owner(void)
{
    struct mh_shm_dict *d = new_dict(64 * 1024);
    char k[32];
    for (int i = 0; i < 300; i++) { /* many buckets, chains of several entries */
        snprintf(k, sizeof k, "k%d", i);
        struct mh_shm_value v = {.type = MH_SHM_INT, .i = i, .owner = i % 3 == 0 ? 0 : 100 + i % 3};
        CHECK(mh_shm_dict_write(d, MH_SHM_SET, k, strlen(k), &v, 0, NULL) == NULL);
    }
    CHECK(put_int(d, MH_SHM_SET, "k1", 7) == NULL); /* overwritten without an owner: kept */
    struct mh_shm_value one = {.type = MH_SHM_INT, .i = 1};
    struct mh_shm_value out;
    CHECK(mh_shm_dict_incr(d, "k2", 2, &one, NULL, 0, &out) == NULL); /* a count stays owned */
    size_t removed = 0;
    CHECK(mh_shm_dict_forget_owner(d, 101, &removed) == NULL && removed == 99);
    CHECK(!strcmp(show(d, "k1"), "i:7") && !strcmp(show(d, "k4"), "") && !strcmp(show(d, "k3"), "i:3"));
    CHECK(!strcmp(show(d, "k2"), "i:3"));
    CHECK(mh_shm_dict_forget_owner(d, 102, &removed) == NULL && removed == 100);
    CHECK(!strcmp(show(d, "k2"), "") && !strcmp(show(d, "k299"), "") && !strcmp(show(d, "k297"), "i:297"));
    CHECK(mh_shm_dict_count(d) == 101);
    CHECK(mh_shm_dict_forget_owner(d, 0, &removed) == NULL && removed == 0);
    CHECK(mh_shm_dict_check(d) == NULL);
    mh_shm_dict_free(d);
}

int main(void)
{
    test_basic();
    test_modes_and_incr();
    test_ttl();
    test_lru();
    test_fill_to_the_byte();
    test_model();
    test_fork_incr();
    test_killed_writer();
    test_forget_owner();
    return unit_report();
}
