/*
 * What an HTTP/2 connection allows, without sockets: the SETTINGS built
 * from the limits, the flood budget's spending and refill, the stream-ID
 * record (skipped IDs refused, opened ones never), and the cut of the
 * second SETTINGS ACK from a byte stream split every possible way.
 */
#include "h2_policy.h"
#include "unit.h"

#include <stdlib.h>
#include <string.h>

static void test_settings(void)
{
    struct mh_http_limits lim = {
        .max_header_bytes = 8192, .h2_max_concurrent_streams = 100, .h2_header_table_size = 512};
    nghttp2_settings_entry iv[MH_H2_SETTINGS_MAX];
    size_t n = mh_h2_settings(&lim, iv);
    CHECK(n == 4);
    bool table = false, list = false, push = false, connect = false;
    for (size_t i = 0; i < n; i++) {
        CHECK(iv[i].settings_id != NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS); /* second frame */
        if (iv[i].settings_id == NGHTTP2_SETTINGS_HEADER_TABLE_SIZE)
            table = iv[i].value == 512;
        if (iv[i].settings_id == NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE)
            list = iv[i].value == 8192;
        if (iv[i].settings_id == NGHTTP2_SETTINGS_ENABLE_PUSH)
            push = iv[i].value == 0;
        if (iv[i].settings_id == NGHTTP2_SETTINGS_ENABLE_CONNECT_PROTOCOL)
            connect = iv[i].value == 1;
    }
    CHECK(table && list && push && connect);
    nghttp2_settings_entry s = mh_h2_settings_streams(&lim);
    CHECK(s.settings_id == NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS && s.value == 100);

    CHECK(mh_h2_conn_window(&lim) == 100 * 65535);
    lim.h2_max_concurrent_streams = 1;
    CHECK(mh_h2_conn_window(&lim) == 65535);
    lim.h2_max_concurrent_streams = 1 << 20; /* 2^20 * 65535 overflows int32: the cap */
    CHECK(mh_h2_conn_window(&lim) == 16 << 20);
}

static void test_flood(void)
{
    struct mh_h2_flood f;
    mh_h2_flood_init(&f, 10, 100.0);
    int ok = 0;
    while (mh_h2_flood_take(&f, 10, 100.0) && ok < 100)
        ok++;
    CHECKF(ok == 10, "a full budget of 10 lets %d through", ok);
    CHECK(!mh_h2_flood_take(&f, 10, 100.0)); /* still spent */
    /* 10 tokens over 10 s: 2.5 s later two more frames (the debt of the refused ones first) */
    mh_h2_flood_init(&f, 10, 0.0);
    for (int i = 0; i < 10; i++)
        mh_h2_flood_take(&f, 10, 0.0);
    CHECK(mh_h2_flood_take(&f, 10, 2.5));
    CHECK(mh_h2_flood_take(&f, 10, 2.5));
    CHECK(!mh_h2_flood_take(&f, 10, 2.5));
    /* a long quiet time refills to the budget, not past it */
    mh_h2_flood_init(&f, 10, 0.0);
    ok = 0;
    while (mh_h2_flood_take(&f, 10, 1000.0) && ok < 100)
        ok++;
    CHECKF(ok == 10, "after 1000 s quiet %d frames pass (want the budget, 10)", ok);
}

static void test_ids(void)
{
    struct mh_h2_ids ids = {0};
    CHECK(mh_h2_ids_headers(&ids, 1));
    CHECK(mh_h2_ids_headers(&ids, 3));
    CHECK(mh_h2_ids_headers(&ids, 1)); /* opened before: trailers or a late frame */
    CHECK(mh_h2_ids_headers(&ids, 9)); /* 5 and 7 skipped */
    CHECK(!mh_h2_ids_headers(&ids, 5));
    CHECK(!mh_h2_ids_headers(&ids, 7));
    CHECK(mh_h2_ids_headers(&ids, 3));
    CHECK(mh_h2_ids_headers(&ids, 9));
    CHECK(mh_h2_ids_headers(&ids, 11));

    /* a client starting high: everything below its first stream was skipped, for good */
    struct mh_h2_ids high = {0};
    CHECK(mh_h2_ids_headers(&high, 101));
    CHECK(!mh_h2_ids_headers(&high, 1));
    CHECK(!mh_h2_ids_headers(&high, 99));
    for (int32_t id = 105; id < 200; id += 4) /* a gap each time */
        CHECK(mh_h2_ids_headers(&high, id));
    CHECK(!mh_h2_ids_headers(&high, 1));
    CHECK(!mh_h2_ids_headers(&high, 195)); /* the latest gaps are known */
    CHECK(!mh_h2_ids_headers(&high, 191));
    CHECK(mh_h2_ids_headers(&high, 193)); /* opened */
    /* an old gap is forgotten: ignored (as nghttp2 would), never an error for an opened ID */
    CHECK(mh_h2_ids_headers(&high, 103));
    for (int32_t id = 101; id < 200; id += 4)
        CHECK(mh_h2_ids_headers(&high, id));
}

static void test_ended(void)
{
    struct mh_h2_ended e = {0};
    CHECK(!mh_h2_ended_has(&e, 0)); /* an empty slot is no stream */
    CHECK(!mh_h2_ended_has(&e, 1));
    mh_h2_ended_add(&e, 1);
    CHECK(mh_h2_ended_has(&e, 1));
    CHECK(!mh_h2_ended_has(&e, 3));
    for (int32_t id = 3; id < 3 + 2 * MH_H2_ENDED; id += 2)
        mh_h2_ended_add(&e, id);
    CHECK(!mh_h2_ended_has(&e, 1)); /* the oldest is forgotten */
    CHECK(mh_h2_ended_has(&e, 3));  /* the latest MH_H2_ENDED are kept */
    CHECK(mh_h2_ended_has(&e, 1 + 2 * MH_H2_ENDED));
}

/* A frame header: length, type, flags, stream 0. */
static size_t frame(uint8_t *p, uint32_t len, uint8_t type, uint8_t flags, uint32_t sid)
{
    p[0] = (uint8_t)(len >> 16), p[1] = (uint8_t)(len >> 8), p[2] = (uint8_t)len;
    p[3] = type, p[4] = flags;
    p[5] = (uint8_t)(sid >> 24), p[6] = (uint8_t)(sid >> 16), p[7] = (uint8_t)(sid >> 8),
    p[8] = (uint8_t)sid;
    memset(p + 9, 0xab, len);
    return 9 + len;
}

/* Feeds in[0..n) in pieces of `step` bytes (0: the split pattern from `seed`); appends the output,
 * counts the runs that are a whole frame header. */
static size_t run_acks(const uint8_t *in, size_t n, size_t step, unsigned seed, uint8_t *out,
                       bool *done, unsigned *headers)
{
    *headers = 0;
    struct mh_h2_acks a;
    mh_h2_acks_init(&a);
    size_t o = 0, at = 0;
    srand(seed);
    while (at < n) {
        size_t k = step ? step : 1 + (size_t)rand() % 40;
        if (k > n - at)
            k = n - at;
        const uint8_t *p = in + at, *seg;
        size_t left = k, len;
        while (mh_h2_acks_next(&a, &p, &left, &seg, &len)) {
            if (seg == a.hdr && len == 9)
                ++*headers;
            memcpy(out + o, seg, len);
            o += len;
        }
        if (left != 0)
            return (size_t)-1; /* input not used up */
        at += k;
    }
    *done = mh_h2_acks_done(&a);
    return o;
}

static void test_acks(void)
{
    uint8_t in[512], want[512], out[512];
    size_t n = 0;
    memcpy(in, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 24); /* the preface passes */
    n += 24;
    n += frame(in + n, 12, NGHTTP2_SETTINGS, 0, 0);
    /* an ACK flag inside a payload is not a frame header */
    n += frame(in + n, 9, NGHTTP2_DATA, 0, 1);
    frame(in + n - 9, 0, NGHTTP2_SETTINGS, NGHTTP2_FLAG_ACK, 0);
    n += frame(in + n, 0, NGHTTP2_SETTINGS, NGHTTP2_FLAG_ACK, 0); /* first ACK: passes */
    n += frame(in + n, 6, NGHTTP2_SETTINGS, NGHTTP2_FLAG_ACK, 0); /* malformed: passes */
    n += frame(in + n, 8, NGHTTP2_PING, 0, 0);
    size_t cut_at = n;
    n += frame(in + n, 0, NGHTTP2_SETTINGS, NGHTTP2_FLAG_ACK, 0); /* second: cut */
    n += frame(in + n, 5, NGHTTP2_HEADERS, NGHTTP2_FLAG_END_HEADERS, 3);
    n += frame(in + n, 0, NGHTTP2_SETTINGS, NGHTTP2_FLAG_ACK, 0); /* third: passes */
    memcpy(want, in, cut_at);
    memcpy(want + cut_at, in + cut_at + 9, n - cut_at - 9);
    size_t wlen = n - 9;

    for (size_t step = 0; step <= n; step++) {
        unsigned seeds = step == 0 ? 200 : 1;
        for (unsigned seed = 1; seed <= seeds; seed++) {
            bool done = false;
            unsigned headers;
            size_t o = run_acks(in, n, step, seed, out, &done, &headers);
            /* every frame but the cut ACK comes as a header run, after the cut too */
            CHECKF(o == wlen && memcmp(out, want, wlen) == 0 && done && headers == 7,
                   "pieces of %zu (seed %u): %zu bytes out, want %zu; %u headers", step, seed, o,
                   wlen, headers);
        }
    }

    /* one ACK only: nothing cut, not done */
    bool done = true;
    unsigned headers;
    size_t o = run_acks(in, cut_at, 7, 0, out, &done, &headers);
    CHECK(o == cut_at && memcmp(out, in, cut_at) == 0 && !done);
}

int main(void)
{
    test_settings();
    test_flood();
    test_ids();
    test_ended();
    test_acks();
    return unit_report();
}
