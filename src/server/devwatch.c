#include "devwatch.h"

#include "log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>

/* One save is often several events (truncate, write, close, rename): wait for quiet. */
#define DEBOUNCE_SECONDS 0.02

struct watched_dir {
    int wd;
    char *path;
};

struct watched_file {
    size_t dir; /* index into dirs */
    char *name; /* base name */
};

struct mh_devwatch {
    struct ev_loop *loop;
    void (*on_change)(void *ctx);
    void *ctx;
    int fd;
    ev_io io;
    ev_timer debounce;
    char *app_dir; /* only files below it are watched */
    struct watched_dir *dirs;
    size_t ndirs;
    struct watched_file *files;
    size_t nfiles;
};

static char *dir_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        return strdup(".");
    if (slash == path)
        return strdup("/");
    return strndup(path, (size_t)(slash - path));
}

static bool under_app_dir(const struct mh_devwatch *dw, const char *path)
{
    size_t n = strlen(dw->app_dir);
    if (strcmp(dw->app_dir, ".") == 0)
        return path[0] != '/' || strncmp(path, "./", 2) == 0;
    return strncmp(path, dw->app_dir, n) == 0 && (path[n] == '/' || dw->app_dir[n - 1] == '/');
}

static long dir_index(struct mh_devwatch *dw, const char *dir)
{
    for (size_t i = 0; i < dw->ndirs; i++)
        if (strcmp(dw->dirs[i].path, dir) == 0)
            return (long)i;
    int wd = inotify_add_watch(dw->fd, dir, IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE);
    if (wd < 0) {
        mh_log(MH_LOG_WARN, "--dev: cannot watch %s: %s", dir, strerror(errno));
        return -1;
    }
    struct watched_dir *d = realloc(dw->dirs, (dw->ndirs + 1) * sizeof *d);
    if (!d)
        return -1;
    dw->dirs = d;
    d[dw->ndirs].wd = wd;
    d[dw->ndirs].path = strdup(dir);
    return (long)dw->ndirs++;
}

static void add_file(struct mh_devwatch *dw, const char *path)
{
    if (!under_app_dir(dw, path))
        return;
    char *dir = dir_of(path);
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    long di = dir ? dir_index(dw, dir) : -1;
    free(dir);
    if (di < 0)
        return;
    for (size_t i = 0; i < dw->nfiles; i++)
        if (dw->files[i].dir == (size_t)di && strcmp(dw->files[i].name, base) == 0)
            return;
    struct watched_file *f = realloc(dw->files, (dw->nfiles + 1) * sizeof *f);
    if (!f)
        return;
    dw->files = f;
    f[dw->nfiles].dir = (size_t)di;
    f[dw->nfiles].name = strdup(base);
    dw->nfiles++;
    mh_log(MH_LOG_DEBUG, "--dev: watching %s", path);
}

static void clear_files(struct mh_devwatch *dw)
{
    for (size_t i = 0; i < dw->nfiles; i++)
        free(dw->files[i].name);
    dw->nfiles = 0;
}

static bool is_watched(const struct mh_devwatch *dw, int wd, const char *name)
{
    for (size_t i = 0; i < dw->nfiles; i++) {
        const struct watched_file *f = &dw->files[i];
        if (dw->dirs[f->dir].wd == wd && strcmp(f->name, name) == 0)
            return true;
    }
    return false;
}

static void on_debounce(struct ev_loop *loop, ev_timer *t, int revents)
{
    struct mh_devwatch *dw = t->data;
    (void)loop;
    (void)revents;
    dw->on_change(dw->ctx);
}

static void on_inotify(struct ev_loop *loop, ev_io *io, int revents)
{
    struct mh_devwatch *dw = io->data;
    char buf[8192] __attribute__((aligned(__alignof__(struct inotify_event))));
    (void)revents;
    bool hit = false;
    for (;;) {
        ssize_t n = read(dw->fd, buf, sizeof buf);
        if (n <= 0)
            break;
        for (char *p = buf; p < buf + n;) {
            struct inotify_event *ev = (struct inotify_event *)p;
            if (ev->len && is_watched(dw, ev->wd, ev->name))
                hit = true;
            p += sizeof *ev + ev->len;
        }
    }
    if (hit) {
        ev_timer_stop(loop, &dw->debounce);
        ev_timer_set(&dw->debounce, DEBOUNCE_SECONDS, 0.);
        ev_timer_start(loop, &dw->debounce);
    }
}

struct mh_devwatch *mh_devwatch_start(struct ev_loop *loop, const char *script,
                                      const struct mh_deps *deps, void (*on_change)(void *ctx),
                                      void *ctx)
{
    struct mh_devwatch *dw = calloc(1, sizeof *dw);
    if (!dw)
        return NULL;
    dw->loop = loop;
    dw->on_change = on_change;
    dw->ctx = ctx;
    dw->fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (dw->fd < 0) {
        mh_log(MH_LOG_WARN, "--dev: inotify: %s; reload on save is off (SIGHUP still reloads)",
               strerror(errno));
        free(dw);
        return NULL;
    }
    dw->app_dir = dir_of(script);
    mh_devwatch_update(dw, deps, true);
    ev_io_init(&dw->io, on_inotify, dw->fd, EV_READ);
    dw->io.data = dw;
    ev_io_start(loop, &dw->io);
    ev_init(&dw->debounce, on_debounce);
    dw->debounce.data = dw;
    mh_log(MH_LOG_INFO, "--dev: watching %zu file(s) for changes", dw->nfiles);
    return dw;
}

void mh_devwatch_update(struct mh_devwatch *dw, const struct mh_deps *deps, bool replace)
{
    if (replace)
        clear_files(dw);
    for (size_t i = 0; i < deps->n; i++)
        add_file(dw, deps->files[i]);
}

void mh_devwatch_stop(struct mh_devwatch *dw)
{
    if (!dw)
        return;
    ev_io_stop(dw->loop, &dw->io);
    ev_timer_stop(dw->loop, &dw->debounce);
    close(dw->fd);
    clear_files(dw);
    free(dw->files);
    for (size_t i = 0; i < dw->ndirs; i++)
        free(dw->dirs[i].path);
    free(dw->dirs);
    free(dw->app_dir);
    free(dw);
}
