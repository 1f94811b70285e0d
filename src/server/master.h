#ifndef MH_MASTER_H
#define MH_MASTER_H
/*
 * The master of a multi-worker server. It binds the listening sockets once
 * (so port 0 resolves to one port that every worker shares), forks the
 * workers, which inherit the sockets and each run their own loop and Lua
 * state, and supervises them:
 *
 *   - a worker that exits unexpectedly is restarted; one that dies within a
 *     second of starting is restarted after an exponential back-off (0.1 s
 *     doubling to 10 s), so a crash loop does not spin the CPU;
 *   - SIGHUP loads and checks the script in the master first; a failure is
 *     logged and changes nothing. Otherwise a new set of workers is forked
 *     with the new code, and once each of them reports ready the old ones
 *     are told to stop gracefully (stop accepting, finish in flight, close
 *     idle). Because all workers accept from the same inherited sockets, a
 *     connection waiting in the backlog is taken by a new worker instead of
 *     being reset with the old worker's socket, as it would be with one
 *     SO_REUSEPORT socket per worker;
 *   - SIGTERM/SIGINT stop every worker gracefully (shutdown_timeout, then
 *     SIGKILL half a second later) and the master exits 0; a retired worker
 *     gets the same deadline;
 *   - a worker whose heartbeat (lua_guard.h) has not moved for
 *     worker_stall_timeout is killed and replaced.
 *
 * The master's loop is the default libev loop (ev_child needs it); a forked
 * worker stops the master's watchers and calls ev_loop_fork before serving.
 */
#include "config.h"

struct mh_gen;
struct mh_ops;

/*
 * Runs the master until a stop; `gen` is the checked first load (the master
 * keeps it for restarts; workers get a copy through fork). Returns the exit code.
 */
int mh_master_run(struct mh_config *config, struct mh_gen *gen, int nworkers, struct mh_ops *ops);

#endif
