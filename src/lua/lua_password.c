#include "lua_password.h"

#include "lua_opts.h"
#include "lua_sched.h"
#include "lua_vm.h"
#include "workpool.h"

#include <argon2.h>
#include <lauxlib.h>
#include <mbedtls/base64.h>
#include <mbedtls/constant_time.h>
#include <mbedtls/md.h>
#include <mbedtls/pkcs5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

/* OWASP's Argon2id recommendation (Password Storage Cheat Sheet): 19 MiB, 2 passes, 1 lane. */
#define DEFAULT_MEMORY_KIB 19456
#define DEFAULT_TIME_COST  2
#define DEFAULT_LANES      1
#define SALT_BYTES         16
#define HASH_BYTES         32
#define MAX_MEMORY_KIB     (4u << 20) /* 4 GiB: a guard against typos, not a policy */
#define MAX_TIME_COST      1000
#define MAX_LANES          64
#define MAX_PASSWORD       4096
/* Stored PBKDF2 hashes come from a database: bound the work one may ask for. */
#define PBKDF2_MAX_ITERATIONS 10000000L
#define ENCODED_MAX           512

struct argon2_params {
    uint32_t t_cost, m_cost, lanes;
};

enum job_kind { HASH, VERIFY_ARGON2, VERIFY_PBKDF2 };

/*
 * One hash or verification on the pool. Owned by the waiting task until the
 * pool is done with it; if the task goes away first (killed, its request
 * aborted), `orphaned` makes done() free it instead.
 */
struct job {
    struct mh_work work;
    struct mh_task *task;
    enum job_kind kind;
    bool finished, orphaned;
    struct argon2_params params;
    unsigned char salt[SALT_BYTES];
    size_t salt_len;
    long iterations;              /* PBKDF2 */
    unsigned char want[64];       /* PBKDF2: the stored derived key */
    size_t want_len;
    char *password;               /* a copy, wiped after use */
    size_t password_len;
    char encoded[ENCODED_MAX];    /* HASH: the result; VERIFY_ARGON2: the stored hash */
    int rc;                       /* ARGON2_OK, or an argon2 / mbedtls error */
    bool match;
};

static void job_free(struct job *j)
{
    if (j->password) {
        explicit_bzero(j->password, j->password_len);
        free(j->password);
    }
    explicit_bzero(j, sizeof *j);
    free(j);
}

static void run_job(struct mh_work *w)
{
    struct job *j = (struct job *)w;
    switch (j->kind) {
    case HASH:
        j->rc = argon2id_hash_encoded(j->params.t_cost, j->params.m_cost, j->params.lanes,
                                      j->password, j->password_len, j->salt, j->salt_len,
                                      HASH_BYTES, j->encoded, sizeof j->encoded);
        break;
    case VERIFY_ARGON2:
        j->rc = argon2id_verify(j->encoded, j->password, j->password_len);
        j->match = j->rc == ARGON2_OK;
        if (j->rc == ARGON2_VERIFY_MISMATCH)
            j->rc = ARGON2_OK;
        break;
    case VERIFY_PBKDF2: {
        unsigned char got[64];
        j->rc = mbedtls_pkcs5_pbkdf2_hmac_ext(MBEDTLS_MD_SHA256, (const unsigned char *)j->password,
                                              j->password_len, j->salt, j->salt_len,
                                              (unsigned)j->iterations, (uint32_t)j->want_len, got);
        j->match = j->rc == 0 && mbedtls_ct_memcmp(got, j->want, j->want_len) == 0;
        explicit_bzero(got, sizeof got);
        break;
    }
    }
    explicit_bzero(j->password, j->password_len);
}

static void done_job(struct mh_work *w)
{
    struct job *j = (struct job *)w;
    if (j->orphaned) {
        job_free(j);
        return;
    }
    j->finished = true;
    mh_task_wake(j->task);
}

static void cancel_job(struct mh_task *t)
{
    struct job *j = t->wait_data;
    if (j->finished)
        job_free(j); /* woken, but ended before it could read the result */
    else
        j->orphaned = true;
}

static int resume_job(struct mh_task *t, lua_State *co)
{
    struct job *j = t->wait_data;
    int n;
    if (j->kind == HASH && j->rc == ARGON2_OK) {
        lua_pushstring(co, j->encoded);
        n = 1;
    } else if (j->kind == HASH) {
        lua_pushnil(co);
        lua_pushstring(co, argon2_error_message(j->rc));
        n = 2;
    } else if (j->rc != 0) {
        lua_pushboolean(co, 0);
        lua_pushliteral(co, "malformed hash");
        n = 2;
    } else {
        lua_pushboolean(co, j->match);
        n = 1;
    }
    job_free(j);
    return n;
}

/* Takes the password argument into a new job (nothing else set). Raises on misuse. */
static struct job *new_job(lua_State *L, const char *what)
{
    size_t len;
    const char *pw = luaL_checklstring(L, 1, &len);
    if (len > MAX_PASSWORD)
        luaL_error(L, "%s: password longer than %d bytes", what, MAX_PASSWORD);
    struct job *j = calloc(1, sizeof *j);
    char *copy = malloc(len ? len : 1);
    if (!j || !copy) {
        free(j);
        free(copy);
        luaL_error(L, "%s: out of memory", what);
    }
    memcpy(copy, pw, len);
    j->password = copy;
    j->password_len = len;
    j->work.run = run_job;
    j->work.done = done_job;
    return j;
}

/* Queues j and waits for it; j belongs to the pool and the task from here on. */
static int submit(lua_State *L, struct mh_task *t, struct job *j, const char *what)
{
    const struct mh_gen_host *host = mh_gen_of(L)->host;
    if (!host || !host->workpool || mh_workpool_submit(host->workpool, &j->work) < 0) {
        job_free(j);
        return luaL_error(L, "%s: no thread to run it on", what);
    }
    j->task = t;
    return mh_task_wait(L, t, resume_job, cancel_job, j);
}

static uint32_t opt_field(lua_State *L, int idx, const char *name, uint32_t def, uint32_t lo,
                          uint32_t hi, const char *what)
{
    lua_getfield(L, idx, name);
    if (lua_isnil(L, -1)) {
        lua_pop(L, 1);
        return def;
    }
    lua_Integer v = 0;
    if (!lua_isinteger(L, -1) || (v = lua_tointeger(L, -1)) < lo || v > hi)
        luaL_error(L, "%s: %s must be an integer from %I to %I", what, name, (lua_Integer)lo,
                   (lua_Integer)hi);
    lua_pop(L, 1);
    return (uint32_t)v;
}

/* opts at idx (or none) → parameters; unknown keys are misuse. */
static struct argon2_params read_params(lua_State *L, int idx, const char *what)
{
    static const char *const known[] = {"memory_kib", "time_cost", "parallelism", NULL};
    struct argon2_params p = {DEFAULT_TIME_COST, DEFAULT_MEMORY_KIB, DEFAULT_LANES};
    if (lua_isnoneornil(L, idx))
        return p;
    luaL_checktype(L, idx, LUA_TTABLE);
    mh_lua_check_opts(L, idx, what, known, 1);
    p.m_cost = opt_field(L, idx, "memory_kib", p.m_cost, 8, MAX_MEMORY_KIB, what);
    p.t_cost = opt_field(L, idx, "time_cost", p.t_cost, 1, MAX_TIME_COST, what);
    p.lanes = opt_field(L, idx, "parallelism", p.lanes, 1, MAX_LANES, what);
    if (p.m_cost < 8 * p.lanes)
        luaL_error(L, "%s: memory_kib must be at least 8 per lane", what);
    return p;
}

/* http.crypto.password_hash(pw [, opts]) -> "$argon2id$v=19$m=..,t=..,p=..$salt$hash" | nil, err */
static int l_password_hash(lua_State *L)
{
    static const char what[] = "http.crypto.password_hash";
    struct argon2_params p = read_params(L, 2, what);
    struct mh_task *t = mh_task_check(L, what);
    struct job *j = new_job(L, what);
    j->kind = HASH;
    j->params = p;
    j->salt_len = SALT_BYTES;
    if (getrandom(j->salt, SALT_BYTES, 0) != SALT_BYTES) {
        job_free(j);
        lua_pushnil(L);
        lua_pushliteral(L, "no random bytes for a salt");
        return 2;
    }
    return submit(L, t, j, what);
}

/* "$argon2id$v=19$m=M,t=T,p=P$..." → its parameters; false if it is not one. */
static bool parse_argon2id(const char *s, struct argon2_params *p)
{
    unsigned v, m, t, l;
    int n = 0;
    if (sscanf(s, "$argon2id$v=%u$m=%u,t=%u,p=%u$%n", &v, &m, &t, &l, &n) != 4 || n == 0)
        return false;
    *p = (struct argon2_params){t, m, l};
    return v == ARGON2_VERSION_13;
}

/*
 * Django's "pbkdf2_sha256$<iterations>$<salt>$<base64 key>", the format
 * most PBKDF2 hashes to migrate come in. Fills the job; false if malformed.
 */
static bool parse_pbkdf2(const char *s, struct job *j)
{
    const char *p = s + strlen("pbkdf2_sha256$");
    char *end;
    long iter = strtol(p, &end, 10);
    if (end == p || *end != '$' || iter < 1 || iter > PBKDF2_MAX_ITERATIONS)
        return false;
    const char *salt = end + 1, *dollar = strchr(salt, '$');
    if (!dollar || dollar == salt || (size_t)(dollar - salt) > sizeof j->salt)
        return false;
    size_t key_len;
    if (mbedtls_base64_decode(j->want, sizeof j->want, &key_len,
                              (const unsigned char *)dollar + 1, strlen(dollar + 1)) != 0 ||
        key_len != HASH_BYTES) /* Django's is SHA-256's length; a shorter one would match its prefix */
        return false;
    memcpy(j->salt, salt, (size_t)(dollar - salt));
    j->salt_len = (size_t)(dollar - salt);
    j->want_len = key_len;
    j->iterations = iter;
    return true;
}

/* http.crypto.password_verify(pw, hash) -> true | false [, "malformed hash"] */
static int l_password_verify(lua_State *L)
{
    static const char what[] = "http.crypto.password_verify";
    size_t hlen;
    const char *hash = luaL_checklstring(L, 2, &hlen);
    struct mh_task *t = mh_task_check(L, what);
    struct job *j = new_job(L, what);
    struct argon2_params p;
    bool ok;
    if (strncmp(hash, "pbkdf2_sha256$", 14) == 0) {
        j->kind = VERIFY_PBKDF2;
        ok = parse_pbkdf2(hash, j);
    } else {
        j->kind = VERIFY_ARGON2;
        ok = hlen < sizeof j->encoded && parse_argon2id(hash, &p) && p.m_cost <= MAX_MEMORY_KIB &&
             p.t_cost <= MAX_TIME_COST && p.lanes <= MAX_LANES;
        if (ok)
            memcpy(j->encoded, hash, hlen + 1);
    }
    if (!ok) {
        job_free(j);
        lua_pushboolean(L, 0);
        lua_pushliteral(L, "malformed hash");
        return 2;
    }
    return submit(L, t, j, what);
}

/* http.crypto.needs_rehash(hash [, opts]) -> true unless hash is Argon2id with these parameters */
static int l_needs_rehash(lua_State *L)
{
    const char *hash = luaL_checkstring(L, 1);
    struct argon2_params want = read_params(L, 2, "http.crypto.needs_rehash"), have;
    lua_pushboolean(L, !parse_argon2id(hash, &have) || have.m_cost != want.m_cost ||
                           have.t_cost != want.t_cost || have.lanes != want.lanes);
    return 1;
}

void mh_lua_password_register(lua_State *L)
{
    static const luaL_Reg fns[] = {{"password_hash", l_password_hash},
                                   {"password_verify", l_password_verify},
                                   {"needs_rehash", l_needs_rehash},
                                   {NULL, NULL}};
    luaL_setfuncs(L, fns, 0);
}
