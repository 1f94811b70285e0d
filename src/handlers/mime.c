#include "mime.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char mh_mime_default[] = "application/octet-stream";

#define MIME_EXT_MAX 32

struct mime_entry {
    char ext[MIME_EXT_MAX]; /* lower case; "" = free slot */
    const char *type;
};

struct mh_mime {
    struct mime_entry *slots;
    size_t cap, n; /* cap: a power of two, kept at most half full */
    char **types;  /* owned type strings */
    size_t ntypes, types_cap;
};

/* Used when the mime.types file cannot be read. */
static const char *const builtin[][2] = {
    {"text/html", "html"},        {"text/html", "htm"},         {"text/css", "css"},
    {"text/javascript", "js"},    {"text/javascript", "mjs"},   {"text/plain", "txt"},
    {"application/json", "json"}, {"image/svg+xml", "svg"},     {"image/png", "png"},
    {"image/jpeg", "jpg"},        {"image/gif", "gif"},         {"image/webp", "webp"},
    {"font/woff2", "woff2"},      {"application/wasm", "wasm"}, {"application/pdf", "pdf"},
};

static unsigned long hash_ext(const char *s, size_t n)
{
    unsigned long h = 5381;
    for (size_t i = 0; i < n; i++)
        h = h * 33 + (unsigned char)s[i];
    return h;
}

static bool is_text(const char *type)
{
    return strncmp(type, "text/", 5) == 0 || strcmp(type, "application/javascript") == 0 ||
           strcmp(type, "application/xml") == 0;
}

static int grow(struct mh_mime *m)
{
    size_t ncap = m->cap ? m->cap * 2 : 1024;
    struct mime_entry *ns = calloc(ncap, sizeof *ns);
    if (!ns)
        return -1;
    for (size_t i = 0; i < m->cap; i++) {
        struct mime_entry *e = &m->slots[i];
        if (!e->ext[0])
            continue;
        size_t j = hash_ext(e->ext, strlen(e->ext)) & (ncap - 1);
        while (ns[j].ext[0])
            j = (j + 1) & (ncap - 1);
        ns[j] = *e;
    }
    free(m->slots);
    m->slots = ns;
    m->cap = ncap;
    return 0;
}

static const char *intern_type(struct mh_mime *m, const char *type, size_t n)
{
    if (m->ntypes && strncmp(m->types[m->ntypes - 1], type, n) == 0 &&
        (m->types[m->ntypes - 1][n] == '\0' || m->types[m->ntypes - 1][n] == ';'))
        return m->types[m->ntypes - 1]; /* the same line's previous extension */
    if (m->ntypes == m->types_cap) {
        size_t ncap = m->types_cap ? m->types_cap * 2 : 256;
        char **nt = realloc(m->types, ncap * sizeof *nt);
        if (!nt)
            return NULL;
        m->types = nt;
        m->types_cap = ncap;
    }
    char *t = malloc(n + sizeof "; charset=utf-8");
    if (!t)
        return NULL;
    memcpy(t, type, n);
    t[n] = '\0';
    if (is_text(t))
        strcpy(t + n, "; charset=utf-8");
    m->types[m->ntypes++] = t;
    return t;
}

/* Adds ext → type unless ext is known already. 0, or -1 on OOM. */
static int add(struct mh_mime *m, const char *type, size_t tlen, const char *ext, size_t elen)
{
    if (elen == 0 || elen >= MIME_EXT_MAX)
        return 0;
    if ((m->n + 1) * 2 > m->cap && grow(m) < 0)
        return -1;
    char low[MIME_EXT_MAX];
    for (size_t i = 0; i < elen; i++)
        low[i] = (char)(ext[i] >= 'A' && ext[i] <= 'Z' ? ext[i] + 32 : ext[i]);
    low[elen] = '\0';
    size_t j = hash_ext(low, elen) & (m->cap - 1);
    while (m->slots[j].ext[0]) {
        if (strcmp(m->slots[j].ext, low) == 0)
            return 0;
        j = (j + 1) & (m->cap - 1);
    }
    const char *t = intern_type(m, type, tlen);
    if (!t)
        return -1;
    memcpy(m->slots[j].ext, low, elen + 1);
    m->slots[j].type = t;
    m->n++;
    return 0;
}

static bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

static int load_line(struct mh_mime *m, const char *line)
{
    const char *p = line;
    while (is_space(*p))
        p++;
    if (*p == '#' || !*p)
        return 0;
    const char *type = p;
    while (*p && !is_space(*p))
        p++;
    size_t tlen = (size_t)(p - type);
    for (;;) {
        while (is_space(*p))
            p++;
        if (!*p || *p == '#')
            return 0;
        const char *ext = p;
        while (*p && !is_space(*p))
            p++;
        if (add(m, type, tlen, ext, (size_t)(p - ext)) < 0)
            return -1;
    }
}

struct mh_mime *mh_mime_load(const char *path)
{
    struct mh_mime *m = calloc(1, sizeof *m);
    if (!m || grow(m) < 0) {
        free(m);
        return NULL;
    }
    FILE *f = path ? fopen(path, "r") : NULL;
    int rc = 0;
    if (f) {
        char line[4096];
        while (rc == 0 && fgets(line, sizeof line, f))
            rc = load_line(m, line);
        fclose(f);
    }
    for (size_t i = 0; rc == 0 && i < sizeof builtin / sizeof builtin[0]; i++)
        rc = add(m, builtin[i][0], strlen(builtin[i][0]), builtin[i][1], strlen(builtin[i][1]));
    if (rc < 0) {
        mh_mime_free(m);
        return NULL;
    }
    return m;
}

void mh_mime_free(struct mh_mime *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->ntypes; i++)
        free(m->types[i]);
    free(m->types);
    free(m->slots);
    free(m);
}

const char *mh_mime_lookup(const struct mh_mime *m, const char *name, size_t len)
{
    size_t i = len;
    while (i > 0 && name[i - 1] != '.' && name[i - 1] != '/')
        i--;
    if (i <= 1 || name[i - 1] != '.' || name[i - 2] == '/')
        return mh_mime_default; /* no dot, or only a leading one */
    size_t elen = len - i;
    if (elen == 0 || elen >= MIME_EXT_MAX)
        return mh_mime_default;
    char low[MIME_EXT_MAX];
    for (size_t k = 0; k < elen; k++) {
        char c = name[i + k];
        low[k] = (char)(c >= 'A' && c <= 'Z' ? c + 32 : c);
    }
    low[elen] = '\0';
    size_t j = hash_ext(low, elen) & (m->cap - 1);
    while (m->slots[j].ext[0]) {
        if (strcmp(m->slots[j].ext, low) == 0)
            return m->slots[j].type;
        j = (j + 1) & (m->cap - 1);
    }
    return mh_mime_default;
}

size_t mh_mime_count(const struct mh_mime *m)
{
    return m->n;
}
