/*
 * The output chunk queue: order across memory, referenced and file chunks,
 * iovec gathering up to a file range, partial consumption, exactly-once
 * releases (consume, move + consume, clear), reading any kind from the
 * front, and compaction of a queue that never drains.
 */
#include "outq.h"
#include "unit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int released[16];

static void on_release(void *ud, uintptr_t token)
{
    (void)ud;
    released[token]++;
}

/* Everything in q, read with mh_outq_read_front (consumes). */
static char *drain(struct mh_outq *q)
{
    static char buf[1 << 16];
    ssize_t n = mh_outq_read_front(q, buf, sizeof buf - 1);
    CHECK(n >= 0);
    buf[n < 0 ? 0 : n] = 0;
    return buf;
}

static int temp_file(const char *text)
{
    char path[] = "/tmp/mh-outq-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    unlink(path);
    CHECK(write(fd, text, strlen(text)) == (ssize_t)strlen(text));
    return fd;
}

static void test_order_and_iov(void)
{
    memset(released, 0, sizeof released);
    struct mh_outq q = {0};
    int fd = temp_file("0123456789");
    CHECK(mh_outq_append(&q, "ab", 2) == 0);
    CHECK(mh_outq_append(&q, "cd", 2) == 0); /* joins the previous memory chunk */
    CHECK(mh_outq_count(&q) == 1);
    CHECK(mh_outq_append_ref(&q, "REF", 3, on_release, NULL, 1) == 0);
    CHECK(mh_outq_append_file(&q, fd, 2, 5, on_release, NULL, 2) == 0);
    CHECK(mh_outq_append(&q, "z", 1) == 0);
    CHECK(mh_outq_count(&q) == 4);
    CHECK(q.bytes == 2 + 2 + 3 + 5 + 1);

    struct iovec iov[8];
    size_t bytes;
    int n = mh_outq_iov(&q, iov, 8, &bytes);
    CHECK(n == 2 && bytes == 7); /* stops at the file range */
    CHECK(iov[0].iov_len == 4 && memcmp(iov[0].iov_base, "abcd", 4) == 0);
    CHECK(iov[1].iov_len == 3 && memcmp(iov[1].iov_base, "REF", 3) == 0);

    /* a write that ends inside the reference */
    mh_outq_consume(&q, 5);
    CHECK(released[1] == 0);
    n = mh_outq_iov(&q, iov, 8, &bytes);
    CHECK(n == 1 && bytes == 2 && memcmp(iov[0].iov_base, "EF", 2) == 0);
    mh_outq_consume(&q, 2);
    CHECK(released[1] == 1);

    int ffd;
    off_t off;
    uint64_t len;
    CHECK(mh_outq_front_file(&q, &ffd, &off, &len) && ffd == fd && off == 2 && len == 5);
    mh_outq_consume(&q, 3); /* as sendfile would: part of the range */
    CHECK(mh_outq_front_file(&q, &ffd, &off, &len) && off == 5 && len == 2);
    CHECK(released[2] == 0);
    CHECK_STR(drain(&q), "56z");
    CHECK(released[2] == 1);
    CHECK(mh_outq_empty(&q) && q.bytes == 0);
    close(fd);
    mh_outq_free(&q);
}

static void test_move_and_clear(void)
{
    memset(released, 0, sizeof released);
    struct mh_outq a = {0}, b = {0};
    mh_outq_append(&a, "head|", 5);
    mh_outq_append(&b, "x", 1);
    mh_outq_append_ref(&b, "big", 3, on_release, NULL, 3);
    mh_outq_append(&b, "y", 1);
    CHECK(mh_outq_move(&a, &b) == 0);
    CHECK(mh_outq_empty(&b) && b.bytes == 0);
    CHECK(a.bytes == 10);
    CHECK(released[3] == 0); /* moved, not released */
    CHECK_STR(drain(&a), "head|xbigy");
    CHECK(released[3] == 1);

    /* clear releases what is pending, once; a second clear releases nothing */
    mh_outq_append_ref(&a, "r", 1, on_release, NULL, 4);
    mh_outq_clear(&a);
    mh_outq_clear(&a);
    CHECK(released[4] == 1);
    /* free with pending chunks too */
    mh_outq_append_ref(&b, "r", 1, on_release, NULL, 5);
    mh_outq_free(&b);
    CHECK(released[5] == 1);
    mh_outq_free(&a);
}

/* A stream whose queue never empties must not grow without bound. */
static void test_compaction(void)
{
    struct mh_outq q = {0};
    char piece[1000];
    memset(piece, 'p', sizeof piece);
    for (int i = 0; i < 10000; i++) {
        CHECK(mh_outq_append(&q, piece, sizeof piece) == 0);
        mh_outq_consume(&q, sizeof piece - (i == 0 ? 1 : 0)); /* always one byte left */
    }
    CHECK(q.bytes == 1);
    CHECKF(q._mem.cap <= 64 * 1024, "buffer grew to %zu", q._mem.cap);
    mh_outq_free(&q);
}

/* reserve/commit as head serializers use them, and an empty reservation leaves nothing. */
static void test_reserve(void)
{
    struct mh_outq q = {0};
    char *p = mh_outq_reserve(&q, 64);
    CHECK(p != NULL);
    mh_outq_commit(&q, 0);
    CHECK(mh_outq_empty(&q));
    p = mh_outq_reserve(&q, 64);
    memcpy(p, "HTTP", 4);
    mh_outq_commit(&q, 4);
    mh_outq_append(&q, "/1.1", 4);
    CHECK(mh_outq_count(&q) == 1);
    CHECK_STR(drain(&q), "HTTP/1.1");
    mh_outq_free(&q);
}

int main(void)
{
    test_order_and_iov();
    test_move_and_clear();
    test_compaction();
    test_reserve();
    return unit_report();
}
