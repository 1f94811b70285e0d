/*
 * libFuzzer target over sequences of shared-dict operations: the first byte
 * picks a zone that never evicts (results must match the model exactly) or
 * a small one (evictions allowed); the rest are operations (fuzz/shm_model.c).
 * Any mismatch or broken structure aborts, so libFuzzer keeps the input.
 */
#include "shm_model.h"

#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const char *why = NULL;
    if (mh_shm_model_run(data + 1, size - 1, data[0] & 1, &why)) {
        fprintf(stderr, "shared dict differs from the model: %s\n", why);
        abort();
    }
    return 0;
}
