#ifndef MH_SHARED_ZONES_H
#define MH_SHARED_ZONES_H
/*
 * The shared dicts of a server: one shared-memory zone per entry of
 * http.server{ shared = ... }, mapped by the process that forks the workers
 * (or serves alone) before it serves, so every worker inherits the same
 * mappings. Zones live as long as that process: a worker that crashes, and
 * the workers of a reload, find the data where it was.
 */
#include <stddef.h>

#include "config.h"
#include "shm_channel.h"
#include "shm_dict.h"

struct mh_gen;

/*
 * Maps a zone for each dict config declares. With MOONHTTP_TEST_SHM_HOLD=path
 * in the environment (specs only), a write of a key starting with "hold:"
 * writes the writer's pid to path and sleeps 30 s holding the dict's lock,
 * its new entry built but not linked in. Returns 0, or -1 with err.
 */
int mh_shared_zones_open(struct mh_shm_dicts *set, const struct mh_config *config, char *err,
                         size_t errlen);

/*
 * After a reload loaded g: maps the dicts g's script declares that set
 * lacks (the new workers see them), keeps a dict whose size changed at its
 * old size and logs that a restart applies the new one, and keeps dicts the
 * script no longer declares (old workers may still use them).
 */
void mh_shared_zones_reload(struct mh_shm_dicts *set, struct mh_gen *g);

void mh_shared_zones_close(struct mh_shm_dicts *set);

/*
 * Maps the zone of http.channel() (shm_channel.h) with a ring of
 * MH_CHANNEL_RING bytes. With MOONHTTP_TEST_CHAN_HOLD=path (specs only), a
 * publish of a message starting with "hold:" writes the publisher's pid to
 * path and sleeps 30 s holding the zone's lock. NULL with err.
 */
#define MH_CHANNEL_RING (4 * 1024 * 1024)
struct mh_shm_chan *mh_shared_zones_channels(char *err, size_t errlen);

#endif
