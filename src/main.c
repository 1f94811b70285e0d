/* moonhttp: command line → configuration → a worker serving the script. */
#include "config.h"
#include "log.h"
#include "lua_sched.h"
#include "lua_vm.h"
#include "worker.h"

#include <lua.h>
#include <stdio.h>
#include <stdlib.h>

static int run_script_done;
static int run_script_status;

static void on_script_done(struct mh_task *t)
{
    run_script_done = 1;
    run_script_status = t->exit_status;
}

/* `moonhttp run script.lua`: the script runs as a task, so it may wait on the loop. */
static int run_script(struct mh_config *config, struct mh_gen *g)
{
    struct mh_worker w;
    char err[512];
    if (mh_worker_init(&w, EV_DEFAULT, config, g, err, sizeof err) < 0) {
        fprintf(stderr, "moonhttp: %s\n", err);
        return 1;
    }
    if (!mh_task_spawn(g, 0, on_script_done)) {
        fprintf(stderr, "moonhttp: out of memory\n");
        return 1;
    }
    if (!run_script_done)
        ev_run(w.loop, 0);
    mh_worker_destroy(&w);
    return run_script_status;
}

int main(int argc, char **argv)
{
    struct mh_config config;
    char err[4096];
    mh_config_init(&config);
    int rc = mh_config_parse_args(&config, argc, argv, err, sizeof err);
    if (rc != 0) {
        if (rc < 0)
            fprintf(stderr, "moonhttp: %s\n", err);
        mh_config_free(&config);
        return rc < 0 ? 2 : 0;
    }
    struct mh_deps deps = {0};
    struct mh_gen *g = mh_gen_load(&config, false, config.dev && config.mode == MH_MODE_SERVE ? &deps : NULL, err, sizeof err);
    if (!g) {
        fprintf(stderr, "moonhttp: %s\n", err);
        mh_deps_free(&deps);
        mh_config_free(&config);
        return 1;
    }
    if (mh_config_validate(&config, err, sizeof err) < 0) {
        fprintf(stderr, "moonhttp: %s\n", err);
        mh_deps_free(&deps);
        mh_gen_unref(g);
        mh_config_free(&config);
        return 1;
    }
    mh_log_threshold = (enum mh_log_level)mh_log_level_parse(config.log_level);
    if (config.mode == MH_MODE_CHECK) {
        printf("%s: ok (%zu routes)\n", config.script, mh_router_size(g->router));
        mh_gen_unref(g);
        mh_config_free(&config);
        return 0;
    }
    if (config.mode == MH_MODE_RUN) {
        rc = run_script(&config, g);
        mh_gen_unref(g);
        mh_config_free(&config);
        return rc;
    }
    int workers = mh_config_workers(&config);
    if (workers > 1)
        mh_log(MH_LOG_WARN, "--workers %d: multi-process mode is not available yet; running one "
                            "worker",
               workers);
    struct mh_worker w;
    if (mh_worker_init(&w, EV_DEFAULT, &config, g, err, sizeof err) < 0) {
        fprintf(stderr, "moonhttp: %s\n", err);
        mh_gen_unref(g);
        mh_config_free(&config);
        return 1;
    }
    mh_gen_unref(g); /* the worker holds it now */
    if (config.dev)
        mh_worker_watch(&w, &deps);
    mh_deps_free(&deps);
    rc = mh_worker_run(&w);
    mh_log(MH_LOG_INFO, "stopped");
    mh_worker_destroy(&w);
    mh_config_free(&config);
    return rc;
}
