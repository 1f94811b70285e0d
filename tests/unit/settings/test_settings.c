/*
 * The settings schema against itself: every row's default parses, lies in
 * its range and among its choices; names are unique and suggestable; docs
 * are one line; a value set from a string reads back the same; the checks
 * after the merge name the setting and the closest choice.
 */
#include "settings.h"
#include "unit.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static double number_of(const struct mh_config *c, const struct mh_setting *s)
{
    const char *field = (const char *)c + s->offset;
    return s->type == MH_SETTING_DURATION ? *(const double *)field : (double)*(const long *)field;
}

static bool is_number(const struct mh_setting *s)
{
    return s->type == MH_SETTING_DURATION || s->type == MH_SETTING_BYTES ||
           s->type == MH_SETTING_INT;
}

static void test_rows(void)
{
    struct mh_config c;
    mh_config_init(&c);
    for (size_t i = 0; i < mh_settings_count; i++) {
        const struct mh_setting *s = &mh_settings[i];
        CHECKF(s->doc && *s->doc && !strchr(s->doc, '\n'), "%s: doc is one line", s->name);
        CHECKF(!s->more || !strchr(s->more, '\n'), "%s: more is one line", s->name);
        CHECKF(!s->check || s->expect, "%s: a check needs `expect`", s->name);
        CHECKF(s->min <= s->max, "%s: min <= max", s->name);
        for (size_t j = 0; j < i; j++)
            CHECKF(strcmp(s->name, mh_settings[j].name) != 0, "%s: declared twice", s->name);
        CHECK(mh_setting_find(s->name, strlen(s->name), false) == s);
        char flag[64];
        snprintf(flag, sizeof flag, "%s", s->name);
        for (char *p = flag; *p; p++)
            if (*p == '_')
                *p = '-';
        CHECK(mh_setting_find(flag, strlen(flag), true) == s);
        if (is_number(s)) {
            double v = number_of(&c, s);
            CHECKF(v >= s->min && v <= s->max, "%s: default %g in %g..%g", s->name, v, s->min,
                   s->max);
        }
        if (s->choices) {
            const char *v = *(char *const *)((const char *)&c + s->offset);
            bool found = false;
            for (size_t k = 0; s->choices[k]; k++)
                found = found || !strcmp(v, s->choices[k]);
            CHECKF(found, "%s: default \"%s\" is one of the choices", s->name, v);
        }
    }
    char err[256] = "";
    CHECKF(mh_config_validate(&c, err, sizeof err) == 0, "defaults validate: %s", err);
    mh_config_free(&c);
}

/* A number set from its string form reads back as the number, at both ends of its range. */
static void test_ranges(void)
{
    for (size_t i = 0; i < mh_settings_count; i++) {
        const struct mh_setting *s = &mh_settings[i];
        if (!is_number(s))
            continue;
        struct mh_config c;
        char err[256], v[64];
        mh_config_init(&c);
        snprintf(v, sizeof v, "%.0f", s->max);
        CHECKF(mh_setting_parse(&c, s, v, err, sizeof err) == 0 && number_of(&c, s) == s->max,
               "%s = %s: %s", s->name, v, err);
        snprintf(v, sizeof v, "%.0f", s->max + 1);
        CHECKF(mh_setting_parse(&c, s, v, err, sizeof err) < 0 && strstr(err, "out of range"),
               "%s = %s refused", s->name, v);
        snprintf(v, sizeof v, "%.0f", s->min - 1);
        CHECKF(mh_setting_parse(&c, s, v, err, sizeof err) < 0 && strstr(err, s->name) == err,
               "%s = %s refused, naming it", s->name, v);
        mh_config_free(&c);
    }
    struct mh_config c;
    char err[256];
    mh_config_init(&c);
    const struct mh_setting *t = mh_setting_find("idle_timeout", 12, false);
    CHECK(mh_setting_parse(&c, t, "500ms", err, sizeof err) == 0 && c.idle_timeout == 0.5);
    CHECK(mh_setting_parse(&c, t, "2m", err, sizeof err) == 0 && c.idle_timeout == 120);
    CHECK(mh_setting_parse(&c, t, "soon", err, sizeof err) < 0);
    CHECK_STR(err, "idle_timeout: \"soon\" is not a duration (e.g. 5, 1.5s, 500ms)");
    mh_config_free(&c);
}

static void test_checks(void)
{
    struct mh_config c;
    char err[256];
    mh_config_init(&c);
    const struct mh_setting *lvl = mh_setting_find("log_level", 9, false);
    CHECK(mh_setting_parse(&c, lvl, "dbug", err, sizeof err) == 0); /* choices: at validate */
    CHECK(mh_config_validate(&c, err, sizeof err) < 0);
    CHECK_STR(err,
              "log_level: \"dbug\" is not error, warn, info or debug (did you mean \"debug\"?)");
    CHECK(mh_setting_parse(&c, lvl, "loud", err, sizeof err) == 0);
    CHECK(mh_config_validate(&c, err, sizeof err) < 0);
    CHECK_STR(err, "log_level: \"loud\" is not error, warn, info or debug");
    CHECK(mh_setting_parse(&c, lvl, "warn", err, sizeof err) == 0);
    const struct mh_setting *w = mh_setting_find("workers", 7, false);
    CHECK(mh_setting_parse(&c, w, "2000", err, sizeof err) == 0);
    CHECK(mh_config_validate(&c, err, sizeof err) < 0);
    CHECK_STR(err, "workers: \"2000\" is not auto or a number 1..1024");
    CHECK(mh_setting_parse(&c, w, "4", err, sizeof err) == 0);
    CHECK(mh_config_validate(&c, err, sizeof err) == 0 && mh_config_workers(&c) == 4);
    CHECK(c.nlisten == 1 && !strcmp(c.listen[0], ":8080")); /* listen's default, at validate */
    mh_config_free(&c);

    CHECK_STR(mh_config_suggest("idle_timout", 11), "idle_timeout");
    CHECK_STR(mh_setting_suggest("max-body-byte", 13, true), "max_body_bytes");
    CHECK(mh_config_suggest("zebra", 5) == NULL);
    CHECK(mh_config_is_setting("h2c", 3) && !mh_config_is_setting("h2", 2));
}

/* docs/reference/settings.md's table has a row per setting, with its default. */
static void test_markdown(void)
{
    char *page = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&page, &len);
    mh_settings_write_markdown(f);
    fclose(f);
    for (size_t i = 0; i < mh_settings_count; i++) {
        const struct mh_setting *s = &mh_settings[i];
        char row[256];
        snprintf(row, sizeof row, "\n| `%s` | %s%s%s | ", s->name, s->def ? "`" : "",
                 s->def ? s->def : "none", s->def ? "`" : "");
        CHECKF(strstr(page, row) != NULL, "row for %s", s->name);
    }
    free(page);
}

int main(void)
{
    test_rows();
    test_ranges();
    test_checks();
    test_markdown();
    return unit_report();
}
