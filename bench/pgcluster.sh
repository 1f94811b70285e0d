# shellcheck shell=bash
# A throw-away PostgreSQL 15 cluster for the benchmarks (bench/pg.sh,
# bench/tfb/run.sh), sourced from the repository root: initdb as `postgres`
# (the server refuses to run as root) into $WORK/data, trust auth, UTF8, C
# locale, listening on 127.0.0.1:$PGPORT only, started pinned to core 1 (the
# load generator's core, so the server under test keeps core 0). The caller
# sets WORK and PGPORT, and calls pg_cluster_stop from its cleanup.
PGBIN=${PG_BINDIR:-/usr/lib/postgresql/15/bin}
pg() { runuser -u postgres -- "$@"; }

pg_cluster_start() {
    chown postgres: "$WORK"
    pg "$PGBIN/initdb" -D "$WORK/data" -U postgres --auth=trust -E UTF8 --locale=C --no-sync >/dev/null
    cat >>"$WORK/data/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
port = $PGPORT
unix_socket_directories = '$WORK'
max_connections = 200
CONF
    taskset -c 1 runuser -u postgres -- "$PGBIN/pg_ctl" -D "$WORK/data" -l "$WORK/server.log" -w start >/dev/null
}

pg_cluster_stop() {
    [ -d "$WORK/data" ] && pg "$PGBIN/pg_ctl" -D "$WORK/data" -w stop -m immediate >/dev/null 2>&1 || true
}
