/*
 * The command-line reader: argv into struct mh_config by the schema of
 * settings/settings.h (--name value, --name=value, '-' for '_'), and --help
 * written from the same schema. The script's http.server{} is read by
 * lua/lua_settings.c; flags set here win over it.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

void mh_config_print_help(const char *argv0)
{
    printf("usage: %s [flags] app.lua            serve app.lua\n"
           "       %s run script.lua [args...]   run a script on the event loop\n"
           "       %s --check app.lua            load app.lua, build routes, report errors\n"
           "       %s test [busted args...]      run an app's busted specs with this binary\n\n"
           "flags (they override http.server{...} in the script):\n",
           argv0, argv0, argv0, argv0);
    printf("  %-28s %s\n", "--dev",
           "one worker, reload on save of the script or a module it required; "
           "log each request, tracebacks in 500s");
    printf("  %-28s %s\n", "--check", "load the script and build the routes, then exit 0/1");
    printf("  %-28s %s\n", "--help, --version", "");
    mh_settings_print_flags(stdout);
}

/*
 * Flags may come before or after the script (`moonhttp app.lua --listen :9000`),
 * and `--` ends them. `moonhttp run script.lua args...` is the exception: what
 * follows the script belongs to the script, untouched.
 */
int mh_config_parse_args(struct mh_config *c, int argc, char **argv, char *err, size_t errlen)
{
    int i = 1;
    bool flags_done = false;
    if (argc > 1 && strcmp(argv[1], "test") == 0) { /* the rest is busted's (app_test.h) */
        c->mode = MH_MODE_TEST;
        c->script_argc = argc - 2;
        c->script_argv = argv + 2;
        return 0;
    }
    if (argc > 1 && strcmp(argv[1], "run") == 0) {
        c->mode = MH_MODE_RUN;
        i = 2;
    }
    for (; i < argc; i++) {
        const char *a = argv[i];
        if (!flags_done && !strcmp(a, "--")) {
            flags_done = true;
            continue;
        }
        if (flags_done || a[0] != '-' || a[1] != '-') {
            if (c->script) {
                snprintf(err, errlen, "unexpected argument after script: %s", a);
                return -1;
            }
            c->script = a;
            c->script_argc = argc - i;
            c->script_argv = argv + i;
            if (c->mode == MH_MODE_RUN)
                break;
            c->script_argc = 1;
            continue;
        }
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            mh_config_print_help(argv[0]);
            return 1;
        }
        if (!strcmp(a, "--version")) {
            printf("moonhttp %s\n", MH_VERSION);
            return 1;
        }
        if (!strcmp(a, "--dev")) {
            c->dev = true;
            continue;
        }
        if (!strcmp(a, "--check")) {
            c->mode = MH_MODE_CHECK;
            continue;
        }
        const char *name = a + 2, *eq = strchr(name, '=');
        size_t nlen = eq ? (size_t)(eq - name) : strlen(name);
        const struct mh_setting *s = mh_setting_find(name, nlen, true);
        if (!s) {
            char hint[96] = "";
            const char *near = mh_setting_suggest(name, nlen, true);
            if (near) {
                char flag[64];
                snprintf(flag, sizeof flag, "%s", near);
                for (char *p = flag; *p; p++)
                    if (*p == '_')
                        *p = '-';
                snprintf(hint, sizeof hint, "did you mean --%s? ", flag);
            }
            snprintf(err, errlen, "unknown flag %s (%ssee --help)", a, hint);
            return -1;
        }
        const char *val = eq ? eq + 1 : NULL;
        if (!val) {
            if (i + 1 >= argc) {
                snprintf(err, errlen, "flag %s needs a value", a);
                return -1;
            }
            val = argv[++i];
        }
        size_t idx = (size_t)(s - mh_settings);
        if (s->type == MH_SETTING_LISTEN && !c->_from_cli[idx])
            mh_config_clear_listen(c);
        if (mh_setting_parse(c, s, val, err, errlen) < 0)
            return -1;
        c->_from_cli[idx] = 1;
    }
    if (!c->script) {
        snprintf(err, errlen, "no script given (usage: moonhttp [flags] app.lua; see --help)");
        return -1;
    }
    return 0;
}
