#include "compress.h"

#include <string.h>

static const char *const default_types[] = {"text/*", "application/json", "application/javascript",
                                            "image/svg+xml"};

void mh_compress_conf_init(struct mh_compress_conf *c)
{
    memset(c, 0, sizeof *c);
    c->level = 1;
    c->min_bytes = 1024;
    for (size_t i = 0; i < sizeof default_types / sizeof default_types[0]; i++)
        mh_compress_conf_add_type(c, default_types[i], strlen(default_types[i]));
}

void mh_compress_conf_clear_types(struct mh_compress_conf *c)
{
    c->ntypes = 0;
}

static char lower(char ch)
{
    return ch >= 'A' && ch <= 'Z' ? (char)(ch + 32) : ch;
}

static bool type_char(char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || strchr("!#$&-^_.+", ch);
}

const char *mh_compress_conf_add_type(struct mh_compress_conf *c, const char *s, size_t len)
{
    if (c->ntypes == MH_COMPRESS_MAX_TYPES)
        return "too many compress types";
    if (len >= MH_COMPRESS_TYPE_MAX)
        return "compress type too long";
    struct mh_compress_type *t = &c->types[c->ntypes];
    const char *slash = memchr(s, '/', len);
    if (!slash || slash == s || slash == s + len - 1)
        return "compress type must be type/subtype or type/*";
    bool prefix = slash == s + len - 2 && s[len - 1] == '*';
    size_t n = prefix ? len - 1 : len;
    for (size_t i = 0; i < n; i++) {
        char ch = lower(s[i]);
        if (ch != '/' ? !type_char(ch) : s + i != slash)
            return "compress type must be type/subtype or type/*";
        t->name[i] = ch;
    }
    t->name[n] = '\0';
    t->len = (uint8_t)n;
    t->prefix = prefix;
    c->ntypes++;
    return NULL;
}

bool mh_compress_type_matches(const struct mh_compress_conf *c, const char *type, size_t len)
{
    size_t n = 0;
    while (n < len && type[n] != ';' && type[n] != ' ' && type[n] != '\t')
        n++;
    for (size_t i = 0; i < c->ntypes; i++) {
        const struct mh_compress_type *t = &c->types[i];
        if (t->prefix ? n <= t->len : n != t->len)
            continue;
        size_t k = 0;
        while (k < t->len && lower(type[k]) == t->name[k])
            k++;
        if (k == t->len)
            return true;
    }
    return false;
}

bool mh_compress_no_transform(const char *v, size_t len)
{
    static const char d[] = "no-transform";
    for (size_t i = 0; i + sizeof d - 1 <= len; i++) {
        if (i && v[i - 1] != ',' && v[i - 1] != ' ' && v[i - 1] != '\t')
            continue;
        size_t k = 0;
        while (k < sizeof d - 1 && lower(v[i + k]) == d[k])
            k++;
        size_t e = i + k;
        if (k == sizeof d - 1 && (e == len || v[e] == ',' || v[e] == ' ' || v[e] == '\t'))
            return true;
    }
    return false;
}

struct mh_compress_verdict mh_compress_decide(const struct mh_compress_conf *c,
                                              const struct mh_compress_input *in)
{
    struct mh_compress_verdict v = {false, false};
    if (!c->on || in->head || in->encoded || in->no_transform)
        return v;
    if (in->status < 200 || in->status == 204 || in->status == 206 || in->status == 304)
        return v;
    if (in->length_known && in->length < c->min_bytes)
        return v;
    if (!in->type || !mh_compress_type_matches(c, in->type, in->type_len))
        return v;
    v.vary = true;
    v.gzip = in->accept &&
             mh_accept_encoding_choose(in->accept, MH_CODING_BIT(MH_CODING_GZIP)) == MH_CODING_GZIP;
    return v;
}
