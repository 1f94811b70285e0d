/*
 * libFuzzer target for the multipart parser (http/multipart.c). The first
 * input byte picks the read size, the rest is the body (boundary "b", so
 * the fuzzer finds delimiters quickly). Checks what must hold for any input:
 * no over-consumption, no stall, no empty data event (multipart_run.h
 * aborts), and the same events whether the body came at once or in pieces.
 */
#include "multipart_run.h"

#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    size_t step = (size_t)data[0] % 17 + 1;
    const char *body = (const char *)data + 1;
    struct mp_transcript whole, split;
    mp_run("b", body, size - 1, 0, &whole);
    mp_run("b", body, size - 1, step, &split);
    if (strcmp(whole.s, split.s) != 0)
        abort();
    free(whole.s);
    free(split.s);
    return 0;
}
