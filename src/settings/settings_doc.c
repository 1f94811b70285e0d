/*
 * The settings as people read them: --help's flag lines and docs/reference/settings.md,
 * both written from mh_settings[] so neither can drift from the code. The
 * build writes docs/reference/settings.md again and a test fails when the committed
 * copy differs (CMakeLists.txt, settings_doc).
 */
#include "settings.h"

#include <math.h>
#include <string.h>

/* A byte count as a flag would write it: 16m rather than 16777216. */
static void fmt_bytes(double v, char *out, size_t outlen)
{
    static const char units[] = "gmk";
    for (int i = 0; i < 3; i++) {
        double unit = ldexp(1, 10 * (3 - i));
        if (v >= unit && fmod(v, unit) == 0) {
            snprintf(out, outlen, "%.0f%c", v / unit, units[i]);
            return;
        }
    }
    snprintf(out, outlen, "%.0f", v);
}

/* The values a setting takes, for docs/reference/settings.md. */
static void fmt_values(const struct mh_setting *s, char *out, size_t outlen)
{
    char lo[32], hi[32];
    switch (s->type) {
    case MH_SETTING_DURATION:
        snprintf(out, outlen, "seconds, %g..%g (`500ms`, `1.5s`, `2m` as strings)", s->min, s->max);
        return;
    case MH_SETTING_BYTES:
    case MH_SETTING_SHARED:
        fmt_bytes(s->min, lo, sizeof lo);
        fmt_bytes(s->max, hi, sizeof hi);
        snprintf(out, outlen, "%sbytes, %s..%s (`64k`, `1m`, `1g` as strings)",
                 s->type == MH_SETTING_SHARED ? "name = size; " : "", lo, hi);
        return;
    case MH_SETTING_INT:
        snprintf(out, outlen, "%.0f..%.0f", s->min, s->max);
        return;
    case MH_SETTING_BOOL:
        snprintf(out, outlen, "`true`/`false` (flag: `on`/`off`)");
        return;
    case MH_SETTING_STRING:
        if (s->choices) {
            size_t used = 0;
            out[0] = 0;
            for (size_t i = 0; s->choices[i] && used < outlen; i++) {
                int w = snprintf(out + used, outlen - used, "%s`%s`", i ? ", " : "", s->choices[i]);
                used += w > 0 ? (size_t)w : 0;
            }
        } else {
            snprintf(out, outlen, "%s", s->expect ? s->expect : "a string");
        }
        return;
    case MH_SETTING_LISTEN:
        snprintf(out, outlen, "`host:port`, `:port`, `https://host:port`; at most %d",
                 MH_MAX_LISTEN);
        return;
    case MH_SETTING_TLS:
    case MH_SETTING_MODULE:
        snprintf(out, outlen, "a table (script only)");
        return;
    case MH_SETTING_COMPRESS:
        snprintf(out, outlen, "`true`, `false`, a table (flag: `on`, `off`, `1`..`9`)");
        return;
    }
}

void mh_settings_print_flags(FILE *out)
{
    for (size_t i = 0; i < mh_settings_count; i++) {
        const struct mh_setting *s = &mh_settings[i];
        char flag[64];
        snprintf(flag, sizeof flag, "--%s", s->name);
        for (char *p = flag + 2; *p; p++)
            if (*p == '_')
                *p = '-';
        fprintf(out, "  %-28s %s (default %s)\n", flag, s->doc, s->def ? s->def : "none");
    }
}

/* Text for a table cell: a '|' would end the cell. */
static void md_cell(FILE *out, const char *s)
{
    for (; *s; s++) {
        if (*s == '|')
            fputc('\\', out);
        fputc(*s, out);
    }
}

void mh_settings_write_markdown(FILE *out)
{
    fputs("<!-- Generated from src/settings/settings_table.c by the build (settings_doc): edit\n"
          "     the table there, then `cmake --build build --target settings-doc`. A test fails\n"
          "     when this file and the table disagree. -->\n"
          "# Settings\n\n"
          "Every setting can be given in the script with `http.server{...}` and on the\n"
          "command line as `--name value` or `--name=value` (underscores become dashes); the\n"
          "command line wins. Durations are seconds (a number, or a string such as `\"1.5s\"`,\n"
          "`\"500ms\"`, `\"2m\"`); sizes are bytes (a number, or `\"64k\"`, `\"1m\"`, `\"1g\"`).\n"
          "An unknown name or a value out of range stops the server at startup with the\n"
          "closest known name (\"did you mean\") or the range; `moonhttp --help` lists the\n"
          "same settings. A reload keeps the running settings and warns about those the\n"
          "script changed, once per new value: they take effect on a restart.\n\n"
          "| setting | default | values | meaning |\n"
          "|---|---|---|---|\n",
          out);
    for (size_t i = 0; i < mh_settings_count; i++) {
        const struct mh_setting *s = &mh_settings[i];
        char values[256];
        fmt_values(s, values, sizeof values);
        fprintf(out, "| `%s` | %s%s%s | ", s->name, s->def ? "`" : "", s->def ? s->def : "none",
                s->def ? "`" : "");
        md_cell(out, values);
        fputs(" | ", out);
        md_cell(out, s->doc);
        if (s->more) {
            fputs("; ", out);
            md_cell(out, s->more);
        }
        fputs(" |\n", out);
    }
}
