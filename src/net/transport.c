#include "transport.h"

#include <sys/socket.h>
#include <unistd.h>

static ssize_t plain_read(struct mh_transport *t, void *buf, size_t len)
{
    return read(t->fd, buf, len);
}

static ssize_t plain_write(struct mh_transport *t, const void *buf, size_t len)
{
    return send(t->fd, buf, len, MSG_NOSIGNAL);
}

static void plain_shutdown(struct mh_transport *t)
{
    shutdown(t->fd, SHUT_WR);
}

static void plain_close(struct mh_transport *t)
{
    close(t->fd);
    t->fd = -1;
}

static bool plain_pending(const struct mh_transport *t)
{
    (void)t;
    return false;
}

static const struct mh_transport_ops plain_ops = {
    .name = "tcp",
    .read = plain_read,
    .write = plain_write,
    .shutdown = plain_shutdown,
    .close = plain_close,
    .pending = plain_pending,
};

void mh_transport_plain_init(struct mh_transport *t, int fd)
{
    t->ops = &plain_ops;
    t->fd = fd;
    t->wants = 0;
    t->_impl = NULL;
}
