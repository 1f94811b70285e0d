/*
 * libFuzzer target for the WebSocket frame parser (http/ws_frame.c). First
 * byte: bit 0 = require masking, the rest picks the read size; the remaining
 * bytes are the wire. ws_run.h aborts on over-consumption or an empty
 * payload event; the transcript must not depend on the split.
 */
#include "ws_run.h"

#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    bool mask = data[0] & 1;
    size_t step = (size_t)(data[0] >> 1) % 17 + 1;
    struct mp_transcript whole, split;
    ws_run(mask, 1 << 16, (const char *)data + 1, size - 1, 0, &whole);
    ws_run(mask, 1 << 16, (const char *)data + 1, size - 1, step, &split);
    if (strcmp(whole.s, split.s) != 0)
        abort();
    free(whole.s);
    free(split.s);
    return 0;
}
