#ifndef MH_SHM_MODEL_H
#define MH_SHM_MODEL_H
/*
 * A reference model of the shared dict (an array of keys with values and
 * expiry times) run side by side with the real structure over a sequence of
 * operations decoded from bytes: get, set/add/replace, incr, delete, ttl,
 * expire, keys, flush_all and clock steps. Used by the libFuzzer target
 * (fuzz_shm_dict.c) and by tests/unit/base/test_shm_dict.c with random bytes.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * exact: a zone that never evicts (64k: 40 keys of at most 7 blocks), every
 * result must match the model;
 * otherwise a small zone where entries may be evicted (the model then
 * forgets a key the dict no longer has, but the dict may never return a
 * value the model does not hold). The structure is checked every few ops.
 * Returns the number of mismatches; *why tells the first.
 */
int mh_shm_model_run(const uint8_t *ops, size_t n, bool exact, const char **why);

#endif
