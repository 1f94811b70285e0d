/*
 * The channels' shared ring: names and ids, publish order and contents
 * across wrap-arounds at random sizes, a reader lapped by the ring (it sees
 * the gap in sequence numbers), wake-ups coalesced per slot and cleared for
 * a forgotten worker, a publish racing a reader's re-arming, two processes
 * publishing at once, and a publisher killed holding the lock.
 */
#include "shm_channel.h"
#include "unit.h"

#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#define RING MH_SHM_CHAN_MIN_RING

struct seen {
    size_t n;
    uint32_t id[4096];
    uint64_t seq[4096];
    size_t len[4096];
    char first[4096]; /* each message's first byte */
    bool gap[4096];   /* a gap notice (msg NULL) */
    bool bad;         /* a message's bytes were not all its first byte */
};

static void collect(void *ud, uint32_t id, uint64_t seq, const char *msg, size_t len)
{
    struct seen *s = ud;
    if (s->n == 4096)
        return;
    s->id[s->n] = id;
    s->seq[s->n] = seq;
    s->len[s->n] = len;
    s->gap[s->n] = !msg;
    s->first[s->n] = len && msg ? msg[0] : 0;
    for (size_t i = 1; i < len; i++)
        s->bad = s->bad || msg[i] != msg[0];
    s->n++;
}

static bool readable(int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    return poll(&p, 1, 0) == 1;
}

static void test_names(void)
{
    struct mh_shm_chan *c = mh_shm_chan_new(RING);
    CHECK(c != NULL);
    uint32_t a, b, a2;
    uint64_t seq = 9;
    CHECK(mh_shm_chan_lookup(c, "a", 1, &a, &seq) == NULL);
    CHECK(seq == 0);
    CHECK(mh_shm_chan_lookup(c, "b", 1, &b, NULL) == NULL);
    CHECK(mh_shm_chan_lookup(c, "a", 1, &a2, NULL) == NULL);
    CHECK(a == a2 && a != b && a && b);
    char long_name[MH_SHM_CHAN_NAME_MAX + 1];
    memset(long_name, 'x', sizeof long_name);
    CHECK(mh_shm_chan_lookup(c, long_name, sizeof long_name, &a, NULL) ==
          mh_shm_chan_err_too_large);
    CHECK(mh_shm_chan_lookup(c, long_name, 0, &a, NULL) == mh_shm_chan_err_too_large);
    /* names listened to: half the table, then "too many channels"; old names still resolve */
    int slot = mh_shm_chan_claim(c, 100);
    CHECK(mh_shm_chan_listen(c, slot, a, true, NULL) == NULL);
    CHECK(mh_shm_chan_listen(c, slot, b, true, NULL) == NULL);
    uint64_t version = mh_shm_chan_listen_version(c);
    const char *err = NULL;
    int made = 2;
    for (int i = 0; !err && i < MH_SHM_CHAN_MAX; i++) {
        char name[32];
        int n = snprintf(name, sizeof name, "ch%d", i);
        uint32_t id;
        if (!(err = mh_shm_chan_lookup(c, name, (size_t)n, &id, NULL)) &&
            !(err = mh_shm_chan_listen(c, slot, id, true, NULL)))
            made++;
    }
    CHECK(err == mh_shm_chan_err_too_many);
    CHECKF(made == MH_SHM_CHAN_MAX / 2, "%d channels", made);
    CHECK(mh_shm_chan_listen_version(c) == version + (uint64_t)made - 2);
    CHECK(mh_shm_chan_lookup(c, "a", 1, &a2, NULL) == NULL && a2 == a);
    CHECK(mh_shm_chan_find(c, "a", 1) == a && mh_shm_chan_find(c, "zz", 2) == 0);
    /* nobody listens any more: the names are retired, their ids stale, their room reused */
    mh_shm_chan_release(c, slot);
    CHECK(mh_shm_chan_listen_version(c) == version + 2 * ((uint64_t)made - 2) + 2);
    CHECK(mh_shm_chan_publish(c, a, "x", 1, NULL) == mh_shm_chan_err_stale);
    CHECK(mh_shm_chan_listen(c, 0, a, true, NULL) == mh_shm_chan_err_stale);
    CHECK(mh_shm_chan_find(c, "a", 1) == 0);
    for (int i = 0; !err && i < 2 * MH_SHM_CHAN_MAX; i++) { /* names only publishers use */
        char name[32];
        int n = snprintf(name, sizeof name, "pub%d", i);
        uint32_t id;
        CHECK(mh_shm_chan_lookup(c, name, (size_t)n, &id, NULL) == NULL);
    }
    CHECK(mh_shm_chan_lookup(c, "a", 1, &a2, NULL) == NULL && a2 != a && a2);
    a = a2;
    static char big[MH_SHM_CHAN_MSG_MAX + 1];
    CHECK(mh_shm_chan_publish(c, a, big, sizeof big, NULL) == mh_shm_chan_err_too_large);
    CHECK(mh_shm_chan_publish(c, a, big, sizeof big - 1, NULL) == NULL);
    mh_shm_chan_free(c);
}

/* Random sizes through many wrap-arounds; the reader keeps up: nothing lost, nothing torn. */
static void test_order_and_wrap(void)
{
    struct mh_shm_chan *c = mh_shm_chan_new(RING);
    uint32_t a, b;
    mh_shm_chan_lookup(c, "a", 1, &a, NULL);
    mh_shm_chan_lookup(c, "b", 1, &b, NULL);
    struct mh_shm_chan_cursor cur;
    CHECK(mh_shm_chan_cursor_init(c, &cur) == NULL);
    static char buf[MH_SHM_CHAN_MSG_MAX];
    static struct seen s;
    uint64_t next[3] = {0, 1, 1};
    size_t total = 0;
    srand(7);
    for (int round = 0; round < 200; round++) {
        int k = 1 + rand() % 3; /* fewer than the ring holds between reads */
        for (int i = 0; i < k; i++) {
            size_t len = (size_t)rand() % (rand() % 4 ? 200 : MH_SHM_CHAN_MSG_MAX);
            uint32_t id = rand() % 2 ? a : b;
            memset(buf, 'a' + (int)(total % 26), len);
            CHECK(mh_shm_chan_publish(c, id, buf, len, NULL) == NULL);
            total++;
        }
        memset(&s, 0, sizeof s);
        bool lapped = true;
        CHECK(mh_shm_chan_read(c, -1, &cur, collect, &s, &lapped) == NULL);
        CHECK(!lapped);
        CHECK(s.n == (size_t)k);
        for (size_t i = 0; i < s.n; i++) {
            int which = s.id[i] == a ? 1 : 2;
            CHECKF(s.seq[i] == next[which], "seq %llu want %llu", (unsigned long long)s.seq[i],
                   (unsigned long long)next[which]);
            next[which] = s.seq[i] + 1;
        }
        CHECK(!s.bad);
        size_t bytes, records;
        mh_shm_chan_usage(c, &bytes, &records);
        CHECK(bytes <= RING);
    }
    CHECK(next[1] + next[2] - 2 == total);
    mh_shm_chan_free(c);
}

/* A reader that sleeps through several ring-fulls is told so and resumes at the oldest record. */
static void test_lapped(void)
{
    struct mh_shm_chan *c = mh_shm_chan_new(RING);
    uint32_t a;
    mh_shm_chan_lookup(c, "a", 1, &a, NULL);
    struct mh_shm_chan_cursor cur;
    mh_shm_chan_cursor_init(c, &cur);
    static char buf[1000];
    for (int i = 0; i < 2000; i++) {
        memset(buf, 'a' + i % 26, sizeof buf);
        mh_shm_chan_publish(c, a, buf, sizeof buf, NULL);
    }
    size_t bytes, records;
    mh_shm_chan_usage(c, &bytes, &records);
    CHECK(records > 100 && records < 2000);
    static struct seen s;
    memset(&s, 0, sizeof s);
    bool lapped = false;
    CHECK(mh_shm_chan_read(c, -1, &cur, collect, &s, &lapped) == NULL);
    CHECK(lapped);
    CHECK(s.n == records);
    CHECK(s.seq[0] == 2000 - records + 1 && s.seq[s.n - 1] == 2000);
    CHECK(s.first[s.n - 1] == 'a' + 1999 % 26);
    CHECK(!s.bad);
    mh_shm_chan_free(c);
}

static void test_wakeups(void)
{
    struct mh_shm_chan *c = mh_shm_chan_new(RING);
    int s1 = mh_shm_chan_claim(c, 101), s2 = mh_shm_chan_claim(c, 102);
    CHECK(s1 >= 0 && s2 >= 0 && s1 != s2);
    uint32_t a, b;
    mh_shm_chan_lookup(c, "a", 1, &a, NULL);
    mh_shm_chan_lookup(c, "b", 1, &b, NULL);
    uint64_t seq = 7;
    CHECK(mh_shm_chan_listen(c, s1, a, true, &seq) == NULL && seq == 0);
    CHECK(mh_shm_chan_listen(c, s2, b, true, NULL) == NULL);
    struct mh_shm_chan_cursor cur;
    mh_shm_chan_cursor_init(c, &cur);
    unsigned woken = 9;
    CHECK(mh_shm_chan_publish(c, a, "x", 1, &woken) == NULL && woken == 1);
    CHECK(readable(mh_shm_chan_fd(c, s1)) && !readable(mh_shm_chan_fd(c, s2)));
    CHECK(mh_shm_chan_publish(c, a, "y", 1, &woken) == NULL && woken == 0); /* coalesced */
    static struct seen s;
    memset(&s, 0, sizeof s);
    CHECK(mh_shm_chan_read(c, s1, &cur, collect, &s, NULL) == NULL);
    CHECK(s.n == 2 && !readable(mh_shm_chan_fd(c, s1)));
    CHECK(mh_shm_chan_publish(c, a, "z", 1, &woken) == NULL && woken == 1); /* read: armed again */
    CHECK(mh_shm_chan_listen(c, s1, a, false, &seq) == NULL && seq == 3);
    mh_shm_chan_read(c, s1, &cur, collect, &s, NULL);
    /* its last listener left: the name is retired; looked up again, it wakes nobody */
    CHECK(mh_shm_chan_publish(c, a, "w", 1, &woken) == mh_shm_chan_err_stale && woken == 0);
    CHECK(mh_shm_chan_lookup(c, "a", 1, &a, NULL) == NULL);
    CHECK(mh_shm_chan_publish(c, a, "w", 1, &woken) == NULL && woken == 0);
    /* a dead worker's slot: no more wake-ups, and the slot is free again */
    CHECK(mh_shm_chan_publish(c, b, "v", 1, &woken) == NULL && woken == 1);
    mh_shm_chan_forget(c, 102);
    CHECK(!readable(mh_shm_chan_fd(c, s2)));
    CHECK(mh_shm_chan_publish(c, b, "u", 1, &woken) == mh_shm_chan_err_stale);
    int s3 = mh_shm_chan_claim(c, 103);
    CHECK(s3 == s2);
    int n = 0;
    while (mh_shm_chan_claim(c, 200 + n) >= 0)
        n++;
    CHECK(n == MH_SHM_CHAN_SLOTS - 2);
    mh_shm_chan_free(c);
}

static uint32_t race_chan;

static void publish_mid_rearm(struct mh_shm_chan *c)
{
    mh_shm_chan_set_rearm_hook(c, NULL); /* once */
    mh_shm_chan_publish(c, race_chan, "r", 1, NULL);
}

/*
 * A publish that lands while a reader re-arms its slot, then one after the
 * read: the second must still wake the reader. (With pending cleared before
 * the eventfd was drained, the drain swallowed the first one's write, the
 * second found pending set, and the reader never woke again.)
 */
static void test_publish_during_rearm(void)
{
    struct mh_shm_chan *c = mh_shm_chan_new(RING);
    int slot = mh_shm_chan_claim(c, 101);
    mh_shm_chan_lookup(c, "a", 1, &race_chan, NULL);
    mh_shm_chan_listen(c, slot, race_chan, true, NULL);
    struct mh_shm_chan_cursor cur;
    mh_shm_chan_cursor_init(c, &cur);
    mh_shm_chan_publish(c, race_chan, "x", 1, NULL);
    mh_shm_chan_set_rearm_hook(c, publish_mid_rearm);
    static struct seen s;
    memset(&s, 0, sizeof s);
    mh_shm_chan_read(c, slot, &cur, collect, &s, NULL);
    CHECK(s.n == 2 && s.first[1] == 'r');
    unsigned woken = 0;
    CHECK(mh_shm_chan_publish(c, race_chan, "y", 1, &woken) == NULL);
    CHECK(readable(mh_shm_chan_fd(c, slot)));
    mh_shm_chan_read(c, slot, &cur, collect, &s, NULL);
    CHECK(s.n == 3 && s.first[2] == 'y');
    mh_shm_chan_free(c);
}

/* Two processes publish at once on their own channels: each channel's sequence is whole. */
static void test_two_publishers(void)
{
    struct mh_shm_chan *c = mh_shm_chan_new(1 << 20);
    uint32_t a, b;
    mh_shm_chan_lookup(c, "a", 1, &a, NULL);
    mh_shm_chan_lookup(c, "b", 1, &b, NULL);
    struct mh_shm_chan_cursor cur;
    mh_shm_chan_cursor_init(c, &cur);
    enum { N = 2000 };
    pid_t pid = fork();
    if (pid == 0) {
        for (int i = 0; i < N; i++)
            mh_shm_chan_publish(c, a, "aaaaaaaa", 8, NULL);
        _exit(0);
    }
    for (int i = 0; i < N; i++)
        mh_shm_chan_publish(c, b, "bbbb", 4, NULL);
    int status;
    waitpid(pid, &status, 0);
    static struct seen s;
    memset(&s, 0, sizeof s);
    bool lapped = true;
    mh_shm_chan_read(c, -1, &cur, collect, &s, &lapped);
    CHECK(!lapped && s.n == 2 * N);
    uint64_t next_a = 1, next_b = 1;
    bool in_order = true;
    for (size_t i = 0; i < s.n; i++) {
        uint64_t *next = s.id[i] == a ? &next_a : &next_b;
        in_order = in_order && s.seq[i] == *next && s.first[i] == (s.id[i] == a ? 'a' : 'b');
        *next = s.seq[i] + 1;
    }
    CHECK(in_order && next_a == N + 1 && next_b == N + 1);
    mh_shm_chan_free(c);
}

static void die(const char *msg, size_t len)
{
    (void)msg;
    (void)len;
    _exit(3);
}

/* A publisher killed with the lock held, its record written but not visible. */
static void test_killed_publisher(void)
{
    struct mh_shm_chan *c = mh_shm_chan_new(RING);
    uint32_t a;
    mh_shm_chan_lookup(c, "a", 1, &a, NULL);
    struct mh_shm_chan_cursor cur;
    mh_shm_chan_cursor_init(c, &cur);
    mh_shm_chan_publish(c, a, "one", 3, NULL);
    pid_t pid = fork();
    if (pid == 0) {
        mh_shm_chan_set_publish_hook(c, die);
        mh_shm_chan_publish(c, a, "lost", 4, NULL);
        _exit(0);
    }
    int status;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 3);
    CHECK(mh_shm_chan_publish(c, a, "two", 3, NULL) == NULL);
    CHECK(mh_shm_chan_recoveries(c) == 1);
    static struct seen s;
    memset(&s, 0, sizeof s);
    mh_shm_chan_read(c, -1, &cur, collect, &s, NULL);
    CHECK(s.n == 2 && s.seq[0] == 1 && s.seq[1] == 2 && s.first[1] == 't');
    mh_shm_chan_free(c);
}

/* A gap notice is a record of its own, in order, numbered as a message. */
static void test_gap(void)
{
    struct mh_shm_chan *c = mh_shm_chan_new(RING);
    int slot = mh_shm_chan_claim(c, 101);
    uint32_t a;
    mh_shm_chan_lookup(c, "a", 1, &a, NULL);
    mh_shm_chan_listen(c, slot, a, true, NULL);
    struct mh_shm_chan_cursor cur;
    mh_shm_chan_cursor_init(c, &cur);
    unsigned woken = 0;
    CHECK(mh_shm_chan_publish(c, a, "x", 1, NULL) == NULL);
    CHECK(mh_shm_chan_publish(c, a, NULL, 0, &woken) == NULL);
    CHECK(mh_shm_chan_publish(c, a, "y", 1, NULL) == NULL);
    static struct seen s;
    memset(&s, 0, sizeof s);
    CHECK(mh_shm_chan_read(c, slot, &cur, collect, &s, NULL) == NULL);
    CHECK(s.n == 3 && !s.gap[0] && s.gap[1] && !s.gap[2] && s.len[1] == 0);
    CHECK(s.first[0] == 'x' && s.first[2] == 'y' && s.seq[1] == 2 && s.seq[2] == 3);
    mh_shm_chan_free(c);
}

int main(void)
{
    test_names();
    test_gap();
    test_order_and_wrap();
    test_lapped();
    test_wakeups();
    test_publish_during_rearm();
    test_two_publishers();
    test_killed_publisher();
    return unit_report();
}
