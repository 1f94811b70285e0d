#ifndef MH_HOP_H
#define MH_HOP_H
/*
 * Hop-by-hop header fields (RFC 9110 §7.6.1) for a message passed on to
 * another connection (http.proxy): the standard names, the older ones still
 * seen (Keep-Alive, Proxy-Connection), and the fields the message's own
 * Connection header names. The Lua paths (a proxy hook, the upgrade relay)
 * apply it through src/lua/lua_proxy.c (core.hop_kept, core.hop_names), so
 * there is one copy of the rules.
 *
 * Plain functions over (pointer, length) slices: no allocation, no Lua.
 */
#include <stdbool.h>
#include <stddef.h>

/* How many Connection fields one message may carry for mh_hop_add_connection. */
#define MH_HOP_MAX_CONNECTION 8

/* The Connection field values of one message (slices owned by the caller). */
struct mh_hop {
    const char *value[MH_HOP_MAX_CONNECTION];
    size_t len[MH_HOP_MAX_CONNECTION];
    unsigned n;
};

/* The standard hop-by-hop field names, lowercase, with their lengths. */
struct mh_hop_name {
    const char *name;
    size_t len;
};
extern const struct mh_hop_name mh_hop_standard[];
extern const size_t mh_hop_nstandard;

/* True when name[0..len) (any case) is a standard hop-by-hop field name. */
bool mh_hop_is_standard(const char *name, size_t len);

/* True when name[0..len) is "Connection" in any case. */
bool mh_hop_is_connection(const char *name, size_t len);

/*
 * Records one Connection field value. Returns false when the message has
 * more than MH_HOP_MAX_CONNECTION of them (the caller then takes a path that
 * has no such limit).
 */
bool mh_hop_add_connection(struct mh_hop *h, const char *value, size_t len);

/*
 * True when a Connection value names name[0..len): its tokens are the runs of
 * bytes between commas and white space, compared without case.
 */
bool mh_hop_named(const struct mh_hop *h, const char *name, size_t len);

/* mh_hop_is_standard || mh_hop_named: the field is not passed on. */
bool mh_hop_drops(const struct mh_hop *h, const char *name, size_t len);

#endif
