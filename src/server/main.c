/* moonhttp: command line → configuration → a worker serving the script. */
#include "config.h"
#include "log.h"
#include "lua_load.h"
#include "lua_vm.h"
#include "worker.h"

#include "access_log.h"
#include "app_test.h"
#include "master.h"
#include "metrics.h"
#include "notify.h"
#include "passed_sockets.h"
#include "shared_zones.h"
#include "shm_once.h"
#include "upgrade.h"

#include <errno.h>
#include <lua.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* `moonhttp run script.lua`: the script runs as a task, so it may wait on the loop. */
static int run_script(struct mh_config *config, struct mh_gen *g)
{
    struct mh_worker w;
    char err[512];
    if (mh_worker_init(&w, EV_DEFAULT, config, g, err, sizeof err) < 0) {
        fprintf(stderr, "moonhttp: %s\n", err);
        return 1;
    }
    struct mh_shm_dicts shared;
    if (mh_shared_zones_open(&shared, config, err, sizeof err) < 0) {
        fprintf(stderr, "moonhttp: %s\n", err);
        mh_shared_zones_close(&shared);
        mh_worker_destroy(&w);
        return 1;
    }
    w.shared = &shared;
    g->shared = &shared;
    int rc = mh_worker_run_script(&w);
    mh_worker_destroy(&w);
    mh_shared_zones_close(&shared);
    return rc;
}

/* Opens what every worker shares: access log, metrics table and listener. */
static int setup_ops(struct mh_config *config, struct mh_gen *g, struct mh_ops *ops,
                     struct mh_listener *metrics_listener, struct mh_shm_dicts *shared, char *err,
                     size_t errlen)
{
    memset(ops, 0, sizeof *ops);
    ops->access_log_fd = ops->metrics_fd = -1;
    metrics_listener->fd = -1;
    if (strcmp(config->access_log, "off")) {
        ops->access_log_fd = mh_access_log_open(config->access_log);
        if (ops->access_log_fd < 0) {
            snprintf(err, errlen, "access_log \"%s\": %s", config->access_log, strerror(errno));
            return -1;
        }
        ops->access_log_format = mh_access_format_parse(config->access_log_format);
    }
    if (!(ops->metrics = mh_metrics_new())) {
        snprintf(err, errlen, "cannot map the metrics table: %s", strerror(errno));
        return -1;
    }
    ops->metrics_on = g->wants_metrics;
    ops->shared = shared;
    if (mh_shared_zones_open(shared, config, err, errlen) < 0)
        return -1;
    if (!(ops->channels = mh_shared_zones_channels(err, errlen)))
        return -1;
    if (!(ops->once = mh_shm_once_new())) {
        snprintf(err, errlen, "cannot map the once jobs' zone: %s", strerror(errno));
        return -1;
    }
    if (strcmp(config->metrics, "off")) {
        /* A socket passed at start (a binary upgrade's, systemd's "metrics"), else our own. */
        int passed;
        if (mh_passed_sockets_take(config->metrics, true, &passed, 1) == 1)
            mh_listener_adopt(metrics_listener, passed, config->metrics);
        else if (mh_listener_open(metrics_listener, config->metrics, 128, err, errlen))
            return -1;
        ops->metrics_fd = metrics_listener->fd;
        ops->metrics_on = true;
        mh_log(MH_LOG_INFO, "metrics on %s (port %d)", config->metrics,
               mh_listener_port(metrics_listener));
    }
    return 0;
}

static void teardown_ops(struct mh_ops *ops, struct mh_listener *metrics_listener)
{
    if (ops->shared)
        mh_shared_zones_close(ops->shared);
    mh_shm_chan_free(ops->channels);
    mh_shm_once_free(ops->once);
    if (ops->access_log_fd > STDERR_FILENO)
        close(ops->access_log_fd);
    if (metrics_listener->fd >= 0 || metrics_listener->addr)
        mh_listener_close(metrics_listener);
    mh_metrics_free(ops->metrics);
}

static int write_pid_file(const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    fprintf(f, "%d\n", (int)getpid());
    return fclose(f);
}

/*
 * Serving: one worker in this process when --workers is 1 (or --dev), so
 * specs and one-core benchmarks see a single process and SIGHUP swaps the
 * generation in place; otherwise a master and N worker processes.
 */
static int serve(struct mh_config *config, struct mh_gen *g, struct mh_deps *deps,
                 struct mh_upgrade *upgrade)
{
    char err[512];
    struct mh_ops ops;
    struct mh_listener metrics_listener;
    memset(&metrics_listener, 0, sizeof metrics_listener);
    struct mh_shm_dicts shared = {0};
    struct mh_notify notify;
    mh_notify_init(&notify); /* before any fork: workers must not inherit NOTIFY_SOCKET */
    int rc = 1;
    memset(&ops, 0, sizeof ops);
    ops.access_log_fd = ops.metrics_fd = -1;
    metrics_listener.fd = -1;
    if (mh_passed_sockets_load(err, sizeof err) < 0 ||
        setup_ops(config, g, &ops, &metrics_listener, &shared, err, sizeof err) < 0) {
        fprintf(stderr, "moonhttp: %s\n", err);
        mh_gen_unref(g);
        goto out;
    }
    bool pid_file = strcmp(config->pid_file, "off") != 0;
    if (pid_file && write_pid_file(config->pid_file) < 0) {
        fprintf(stderr, "moonhttp: pid_file \"%s\": %s\n", config->pid_file, strerror(errno));
        mh_gen_unref(g);
        goto out;
    }
    ops.notify = &notify;
    int workers = mh_config_workers(config);
    if (workers > 1) {
        rc = mh_master_run(config, g, workers, &ops, upgrade); /* takes g */
    } else {
        struct mh_worker w;
        if (mh_worker_init(&w, EV_DEFAULT, config, g, err, sizeof err) < 0 ||
            mh_passed_sockets_finish(err, sizeof err) < 0) {
            fprintf(stderr, "moonhttp: %s\n", err);
            mh_gen_unref(g);
        } else {
            /* A binary upgrade into one process: the old master hears it serve. */
            w.ready_fd = upgrade->tell_fd;
            upgrade->tell_fd = -1;
            mh_gen_unref(g); /* the worker holds it now */
            mh_worker_set_ops(&w, &ops);
            if (config->dev)
                mh_worker_watch(&w, deps);
            rc = mh_worker_run(&w);
            mh_worker_destroy(&w);
        }
    }
    /* After a binary upgrade the pid file is the new master's, and this one's is .oldbin. */
    if (upgrade->handed_over || upgrade->child) {
        mh_log(MH_LOG_INFO, "stopped: the new master %d serves", (int)upgrade->child);
        mh_upgrade_remove_old_pid_file(config->pid_file);
    } else {
        mh_log(MH_LOG_INFO, "stopped");
        if (pid_file)
            unlink(config->pid_file);
    }
out:
    teardown_ops(&ops, &metrics_listener);
    mh_notify_close(&notify);
    return rc;
}

int main(int argc, char **argv)
{
    struct mh_config config;
    char err[4096];
    struct mh_upgrade upgrade;
    mh_upgrade_init(&upgrade, argv);
    mh_config_init(&config);
    int rc = mh_config_parse_args(&config, argc, argv, err, sizeof err);
    if (rc != 0) {
        if (rc < 0)
            fprintf(stderr, "moonhttp: %s\n", err);
        mh_config_free(&config);
        return rc < 0 ? 2 : 0;
    }
    if (config.mode == MH_MODE_TEST) {
        rc = mh_app_test_run(config.script_argc, config.script_argv);
        mh_config_free(&config);
        return rc;
    }
    struct mh_deps deps = {0};
    struct mh_gen *g = mh_gen_load(
        &config, false, config.dev && config.mode == MH_MODE_SERVE ? &deps : NULL, err, sizeof err);
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
    mh_log_json = strcmp(config.log_format, "json") == 0;
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
    rc = serve(&config, g, &deps, &upgrade);
    mh_deps_free(&deps);
    mh_config_free(&config);
    return rc;
}
