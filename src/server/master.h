#ifndef MH_MASTER_H
#define MH_MASTER_H
/*
 * The master of a multi-worker server. It binds the listening sockets (so
 * port 0 resolves to one port for every worker), forks the workers, which
 * inherit the sockets and each run their own loop and Lua state, and
 * supervises them. Each worker has a slot 0..N-1; with `reuseport` (the
 * default) each listener is N SO_REUSEPORT sockets, one per slot, and the
 * kernel spreads new connections evenly over them (master.c
 * open_listeners says why not EPOLLEXCLUSIVE). The master keeps every
 * socket for the server's life, so a connection in slot i's backlog waits
 * for slot i's next worker instead of being reset:
 *
 *   - a worker that exits unexpectedly is restarted; one that dies within a
 *     second of starting is restarted after an exponential back-off (0.1 s
 *     doubling to 10 s), so a crash loop does not spin the CPU;
 *   - SIGHUP loads and checks the script in the master first; a failure is
 *     logged and changes nothing. Otherwise a new set of workers is forked
 *     with the new code, and once each of them reports ready the old ones
 *     are told to stop gracefully (stop accepting, finish in flight, close
 *     idle). The new worker of slot i accepts on the socket the old one of
 *     slot i did, so what waits in its backlog is taken, never reset (the
 *     reset comes when the last copy of a SO_REUSEPORT socket closes, and
 *     the master holds one). With `reuseport = false` all workers share one
 *     socket per listener: a slot whose worker is down (a crash loop's
 *     back-off) leaves nothing waiting, at the price of uneven load;
 *   - SIGTERM/SIGINT stop every worker gracefully (shutdown_timeout, then
 *     SIGKILL half a second later) and the master exits 0; a retired worker
 *     gets the same deadline;
 *   - a worker whose heartbeat (lua_guard.h) has not moved for
 *     worker_stall_timeout is killed and replaced;
 *   - SIGUSR2 starts the binary on disk as a new master on the same
 *     listening sockets (upgrade.h); once its workers serve, this master's
 *     workers drain as a reload's old ones do and it exits. A new binary
 *     that fails to start leaves this master serving.
 *
 * The master's loop is the default libev loop (ev_child needs it); a forked
 * worker stops the master's watchers and calls ev_loop_fork before serving.
 */
#include "config.h"

struct mh_gen;
struct mh_ops;
struct mh_upgrade;

/*
 * Runs the master until a stop, or until a binary upgrade's new master
 * serves and this one's workers drained (upgrade->handed_over). `gen` is
 * the checked first load (the master keeps it for restarts; workers get a
 * copy through fork). Listeners are the sockets passed at start where
 * there are some (passed_sockets.h). Returns the exit code.
 */
int mh_master_run(struct mh_config *config, struct mh_gen *gen, int nworkers, struct mh_ops *ops,
                  struct mh_upgrade *upgrade);

#endif
